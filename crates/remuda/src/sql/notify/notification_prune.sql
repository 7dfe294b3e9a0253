-- Delete up to $3 finished notifications of each final state past their age: sent ones $1 ms
-- after they were sent, dead ones $2 ms after they died (-1: kept for ever). With $5 a dry
-- run: counts instead. Only for the leader $4 at term $6 when $4 is given. Rows another
-- transaction holds are passed over.
WITH lease AS (
    SELECT 1 FROM remuda.leader
    WHERE name = 'default' AND leader_id = $4 AND term = $6 AND expires_at > now()
    FOR SHARE
), sent AS (
    SELECT n.id FROM remuda.notifications n
    WHERE n.state <> 'pending' AND n.state = 'sent' AND $1::bigint >= 0
      AND n.finished_at < now() - make_interval(secs => $1::bigint / 1000.0)
      AND ($4::text IS NULL OR EXISTS (SELECT 1 FROM lease))
    ORDER BY n.finished_at LIMIT $3
    FOR UPDATE SKIP LOCKED
), dead AS (
    SELECT n.id FROM remuda.notifications n
    WHERE n.state <> 'pending' AND n.state = 'dead' AND $2::bigint >= 0
      AND n.finished_at < now() - make_interval(secs => $2::bigint / 1000.0)
      AND ($4::text IS NULL OR EXISTS (SELECT 1 FROM lease))
    ORDER BY n.finished_at LIMIT $3
    FOR UPDATE SKIP LOCKED
), doomed AS (
    SELECT id FROM sent UNION ALL SELECT id FROM dead
), deleted AS (
    DELETE FROM remuda.notifications n WHERE n.id = ANY(ARRAY(SELECT id FROM doomed)) AND NOT $5::bool
    RETURNING 1
)
SELECT (SELECT count(*) FROM deleted) AS deleted, (SELECT count(*) FROM doomed) AS doomed
