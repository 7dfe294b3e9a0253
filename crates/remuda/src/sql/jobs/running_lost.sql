-- Which of the runs this worker ($4) has of jobs $1 (attempts $2, claim times $3) are no
-- longer its own: the job was cancelled, rescued, deleted, or has moved on to another run.
-- Found by primary key; the worker stops exactly those runs, so an answer that arrives after
-- a run ended cannot stop a later run of the same job.
SELECT u.id, u.attempt, u.started_at
FROM unnest($1::bigint[], $2::int[], $3::timestamptz[]) AS u(id, attempt, started_at)
LEFT JOIN remuda.jobs_live j ON j.id = u.id
WHERE j.id IS NULL
   OR j.state::text <> 'running'
   OR j.worker_id IS DISTINCT FROM $4
   OR j.attempt <> u.attempt
   OR j.started_at IS DISTINCT FROM u.started_at
