-- Rescue the running jobs of the dead workers $1 (from dead_workers.sql): retried at once if
-- attempts remain, failed otherwise, each with a WORKER_LOST error in its history. The lost
-- worker's late completion is then rejected by the guard of complete_jobs. Finding them scans
-- the table (no index on running jobs, see the migration): paid only when a worker died.
WITH rescued AS (
    UPDATE remuda.jobs j
    SET state = CASE WHEN j.attempt < COALESCE(j.max_attempts, 1)
                     THEN 'available' ELSE 'failed' END::remuda.job_state,
        finished_at = CASE WHEN j.attempt < COALESCE(j.max_attempts, 1) THEN NULL ELSE now() END,
        result = CASE WHEN j.attempt < COALESCE(j.max_attempts, 1) THEN NULL
                      ELSE jsonb_build_object('err', jsonb_build_object(
                          'code', 'WORKER_LOST',
                          'message', 'worker ' || coalesce(j.worker_id, '?') || ' stopped heartbeating while running this job',
                          'data', NULL)) END,
        errors = j.errors || jsonb_build_array(jsonb_build_object(
            'attempt', j.attempt, 'at', now(), 'code', 'WORKER_LOST',
            'message', 'worker ' || coalesce(j.worker_id, '?') || ' stopped heartbeating while running this job',
            'worker', j.worker_id))
    WHERE j.id = ANY(ARRAY(
        SELECT l.id
        FROM remuda.jobs l
        WHERE l.state = 'running' AND l.worker_id = ANY($1::text[])
        FOR UPDATE SKIP LOCKED))
    RETURNING j.id, j.queue, j.state, j.awaited
)
SELECT (SELECT count(*) FROM rescued WHERE state = 'available') AS retried,
       (SELECT count(*) FROM rescued WHERE state = 'failed') AS failed,
       (SELECT count(*) FROM (SELECT pg_notify('remuda_insert', q.queue)
                              FROM (SELECT DISTINCT queue FROM rescued WHERE state = 'available') q) w) AS woken,
       (SELECT count(*) FROM (SELECT pg_notify('remuda_done', r.id::text) FROM rescued r
                              WHERE r.awaited AND r.state = 'failed') n) AS notified
