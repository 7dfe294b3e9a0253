-- The steps jobs $1 recorded, in the order each recorded them: what a later attempt replays,
-- read for the first step of each run (many runs' reads in one statement), and what
-- `remuda job ID` shows.
-- Run under sql::CLAIM_PLAN: found by primary key, never by a scan of every job's steps.
SELECT s.job_id, s.name, s.output::text AS output, s.attempt, s.at
FROM remuda.steps s
WHERE s.job_id = ANY ($1::bigint[])
ORDER BY s.job_id, s.at, s.name
