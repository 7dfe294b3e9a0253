-- Promote up to $1 due scheduled jobs to available, wake their queues, and report when the
-- next scheduled job falls due so the promoter can sleep until then.
WITH due AS (
    SELECT id FROM remuda.jobs
    WHERE state = 'scheduled' AND run_at <= now()
    ORDER BY run_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
), promoted AS (
    UPDATE remuda.jobs j SET state = 'available'
    FROM due WHERE j.id = due.id
    RETURNING j.queue
)
SELECT (SELECT count(*) FROM promoted) AS promoted,
       (SELECT count(*) FROM (SELECT pg_notify('remuda_insert', q.queue)
                              FROM (SELECT DISTINCT queue FROM promoted) q) w) AS woken,
       (SELECT min(run_at) FROM remuda.jobs WHERE state = 'scheduled' AND run_at > now()) AS next_run_at
