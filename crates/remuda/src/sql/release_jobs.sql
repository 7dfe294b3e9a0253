-- Give running jobs back without burning an attempt (graceful shutdown past its timeout):
-- available again, attempt restored, and the queues woken so another worker takes them.
WITH released AS (
    UPDATE remuda.jobs
    SET state = 'available', attempt = attempt - 1, worker_id = NULL, started_at = NULL
    -- state as text: found by primary key, never by a partial index (see complete_jobs.sql)
    WHERE id = ANY($1::bigint[]) AND state::text = 'running' AND worker_id = $2
    RETURNING queue
)
SELECT (SELECT count(*) FROM released) AS released,
       (SELECT count(*) FROM (SELECT pg_notify('remuda_insert', q.queue)
                              FROM (SELECT DISTINCT queue FROM released) q) w) AS woken
