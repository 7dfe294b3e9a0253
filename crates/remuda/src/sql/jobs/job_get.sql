-- The jobs $1 (an array of ids; one for a lookup by id), newest first: every column the CLI
-- and the API show (how each was formed from many enqueues, when it was), and the steps it
-- recorded (a JSON array, in the order they were recorded).
SELECT id, kind, queue, state::text AS state, attempt, max_attempts, priority, run_at, created_at,
       started_at, finished_at, expires_at, timeout_ms, worker_id, args, result, errors,
       unique_key, concurrency_key, group_key, traceparent, tracestate, target_worker, requires, schedule, fire_at, workflow_id,
       workflow ->> 'node' AS workflow_node, (workflow ->> 'index')::integer AS workflow_index, formed,
       (SELECT COALESCE(json_agg(json_build_object('name', s.name, 'output', s.output,
                                                   'attempt', s.attempt, 'at', s.at)
                                 ORDER BY s.at, s.name), '[]')::text
        FROM remuda.steps s WHERE s.job_id = j.id) AS steps
FROM remuda.jobs j
WHERE id = ANY ($1::bigint[])
ORDER BY id DESC
