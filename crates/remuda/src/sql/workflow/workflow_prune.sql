-- Delete up to $4 finished workflow runs past their age: completed runs after $1 ms, failed
-- after $2, cancelled after $3 (-1: kept for ever), counted from when they ended; a
-- sub-workflow goes with its parent (ON DELETE CASCADE), as do nodes and signals, so a run
-- is kept while a sub-workflow under it (at any depth: one retried on its own) has not
-- ended. Their jobs are then pruned as any others. With $6 a dry run: counts instead. Only for the
-- leader $5 at term $7 when $5 is given.
WITH lease AS (
    SELECT 1 FROM remuda.leader
    WHERE name = 'default' AND leader_id = $5 AND term = $7 AND expires_at > now()
    FOR SHARE
), doomed AS (
    SELECT w.id FROM remuda.workflows w
    CROSS JOIN LATERAL (SELECT CASE w.state WHEN 'completed' THEN $1::bigint
                                            WHEN 'failed' THEN $2::bigint
                                            ELSE $3::bigint END AS ms) r
    WHERE w.parent_id IS NULL AND w.state IN ('completed', 'failed', 'cancelled')
      AND r.ms >= 0 AND w.finished_at < now() - make_interval(secs => r.ms / 1000.0)
      AND ($5::text IS NULL OR EXISTS (SELECT 1 FROM lease))
      AND NOT EXISTS (
          WITH RECURSIVE under AS (
              SELECT c.id, c.state FROM remuda.workflows c WHERE c.parent_id = w.id
              UNION ALL
              SELECT c.id, c.state FROM remuda.workflows c JOIN under u ON c.parent_id = u.id)
          SELECT 1 FROM under WHERE under.state IN ('running', 'paused'))
    ORDER BY w.finished_at
    LIMIT $4
    FOR UPDATE SKIP LOCKED
), deleted AS (
    DELETE FROM remuda.workflows w WHERE w.id = ANY(ARRAY(SELECT id FROM doomed)) AND NOT $6::bool
    RETURNING 1
)
SELECT (SELECT count(*) FROM deleted) AS deleted, (SELECT count(*) FROM doomed) AS doomed
