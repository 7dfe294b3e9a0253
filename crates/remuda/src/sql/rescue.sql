-- Rescue the running jobs of the dead workers $1 (from mark_dead.sql, with their crash-loop
-- limits $2 and the moments $3 they were declared dead): each gets a WORKER_LOST error in its
-- history and is retried at once if attempts remain, failed otherwise. A job whose last
-- crash_loop_limit attempts all ended in WORKER_LOST is failed with CRASH_LOOP instead of being
-- handed to yet another worker. Only jobs that started before the verdict are taken: a worker
-- that comes back registers again under the same id, and what it claims afterwards is its own.
-- The lost worker's late writes are then rejected by the guard of complete_jobs. Finding the
-- jobs scans the table (no index on running jobs, see the migration): paid only when a worker died.
WITH lost AS (
    SELECT l.id,
           d.crash_loop_limit AS crash_limit,
           -- the attempts just before this one (the last crash_loop_limit - 1 entries of the
           -- history, read by index: no sort) all ended with their worker lost
           CASE WHEN (SELECT coalesce(bool_and(jsonb_array_length(l.errors) >= k
                          AND (l.errors -> (jsonb_array_length(l.errors) - k) ->> 'code') = 'WORKER_LOST'), true)
                      FROM generate_series(1, d.crash_loop_limit - 1) AS k)
                THEN 'CRASH_LOOP' ELSE 'WORKER_LOST' END AS code
    FROM remuda.jobs l
    JOIN unnest($1::text[], $2::int[], $3::timestamptz[]) AS d(worker_id, crash_loop_limit, marked_at)
      ON l.worker_id = d.worker_id
    WHERE l.id = ANY(ARRAY(
        SELECT x.id FROM remuda.jobs x
        WHERE x.state = 'running' AND x.worker_id = ANY($1::text[])
        FOR UPDATE SKIP LOCKED))
      AND l.started_at <= d.marked_at
), rescued AS (
    UPDATE remuda.jobs j
    SET state = CASE WHEN v.code = 'WORKER_LOST' AND j.attempt < COALESCE(j.max_attempts, 1)
                     THEN 'available' ELSE 'failed' END::remuda.job_state,
        finished_at = CASE WHEN v.code = 'WORKER_LOST' AND j.attempt < COALESCE(j.max_attempts, 1)
                           THEN NULL ELSE now() END,
        result = CASE WHEN v.code = 'WORKER_LOST' AND j.attempt < COALESCE(j.max_attempts, 1) THEN NULL
                      ELSE jsonb_build_object('err', jsonb_build_object(
                          'code', v.code,
                          'message', CASE WHEN v.code = 'CRASH_LOOP'
                              THEN 'its last ' || v.crash_limit || ' attempts in a row ended with their worker lost: quarantined, as the job itself may be what kills workers'
                              ELSE 'worker ' || coalesce(j.worker_id, '?') || ' stopped heartbeating while running this job' END,
                          'data', NULL)) END,
        errors = j.errors || jsonb_build_array(jsonb_build_object(
            'attempt', j.attempt, 'at', now(), 'code', 'WORKER_LOST',
            'message', 'worker ' || coalesce(j.worker_id, '?') || ' stopped heartbeating while running this job',
            'worker', j.worker_id))
    FROM lost v
    WHERE j.id = v.id
    RETURNING j.id, j.queue, j.state, j.awaited, v.code
)
SELECT (SELECT count(*) FROM rescued WHERE state = 'available') AS retried,
       (SELECT count(*) FROM rescued WHERE state = 'failed') AS failed,
       (SELECT count(*) FROM rescued WHERE code = 'CRASH_LOOP') AS quarantined,
       (SELECT count(*) FROM (SELECT pg_notify('remuda_insert', q.queue)
                              FROM (SELECT DISTINCT queue FROM rescued WHERE state = 'available') q) w) AS woken,
       (SELECT count(*) FROM (SELECT pg_notify('remuda_done', r.id::text) FROM rescued r
                              WHERE r.awaited AND r.state = 'failed') n) AS notified
