-- Delete up to $2 failures set aside (remuda.failures) whose last occurrence is older than $1
-- ms (-1: kept for ever), but the marks of runs the duties could not stop while those runs
-- exist. With $4 a dry run: counts instead. Only for the leader $3 at term $5
-- when $3 is given.
WITH lease AS (
    SELECT 1 FROM remuda.leader
    WHERE name = 'default' AND leader_id = $3 AND term = $5 AND expires_at > now()
    FOR SHARE
), doomed AS (
    SELECT f.source, f.subject FROM remuda.failures f
    WHERE $1::bigint >= 0 AND f.last_at < now() - make_interval(secs => $1::bigint / 1000.0)
      AND ($3::text IS NULL OR EXISTS (SELECT 1 FROM lease))
      -- a run the duties could not stop is passed over while it exists (wf_unstoppable.sql
      -- reads this row): its mark goes with the run
      AND NOT (f.source IN ('workflow_timers', 'workflow_repair') AND f.subject ~ '^run [0-9]+ \(stop\)$'
               AND EXISTS (SELECT 1 FROM remuda.workflows w
                           WHERE w.id = substring(f.subject FROM '^run ([0-9]+) ')::bigint))
    ORDER BY f.last_at LIMIT $2
    FOR UPDATE SKIP LOCKED
), deleted AS (
    DELETE FROM remuda.failures f USING doomed d
    WHERE f.source = d.source AND f.subject = d.subject AND NOT $4::bool
    RETURNING 1
)
SELECT (SELECT count(*) FROM deleted) AS deleted, (SELECT count(*) FROM doomed) AS doomed
