-- Record a batch of steps, each for the run that holds its job: step $2[i] of job $1[i] with
-- output $3[i] (JSON text, kept as given), for attempt $4[i] claimed at $5[i] by worker $6 —
-- the fencing token every write about a run carries. The jobs' rows are share-locked, in id
-- order, while the steps are written, so a rescue, cancel or release of a run either
-- committed before (its step is refused) or waits until the step is in (and the next attempt
-- finds it). One statement and one commit for the steps of many jobs at once, as the
-- completer writes outcomes. Returns, for each input row in order (n): `held` (its run
-- still holds the job) and the output recorded under its name: its own, or the first one
-- when the name was recorded already (a step is recorded once).
-- Run under sql::CLAIM_PLAN: the jobs and the recorded steps are found by primary key, never
-- by a scan of either table, whatever they held when the connection planned it.
WITH input AS (
    SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::int[], $5::timestamptz[])
        WITH ORDINALITY AS i(job_id, name, output, attempt, started_at, n)
), held AS (
    SELECT j.id, j.attempt, j.started_at FROM remuda.jobs_live j
    WHERE j.id = ANY ($1::bigint[]) AND j.state = 'running' AND j.worker_id = $6
    ORDER BY j.id
    FOR SHARE
), stored AS (
    INSERT INTO remuda.steps (job_id, name, attempt, output)
    SELECT i.job_id, i.name, i.attempt, i.output::json
    FROM input i
    JOIN held h ON h.id = i.job_id AND h.attempt = i.attempt AND h.started_at = i.started_at
    ORDER BY i.n
    ON CONFLICT (job_id, name) DO NOTHING
    RETURNING job_id, name, output::text AS output
)
-- (the rows stored are joined, not looked up row by row: a lookup scans the CTE, and a
-- batch of 500 steps compared 250 000 pairs)
SELECT i.n, h.id IS NOT NULL AS held,
       COALESCE(s.output,
                (SELECT x.output::text FROM remuda.steps x WHERE x.job_id = i.job_id AND x.name = i.name)) AS output
FROM input i
LEFT JOIN held h ON h.id = i.job_id AND h.attempt = i.attempt AND h.started_at = i.started_at
LEFT JOIN stored s ON s.job_id = i.job_id AND s.name = i.name
ORDER BY i.n
