-- Whether a job of run `job_run` (NULL: a plain job) may be acted on by a caller acting
-- for run `caller_run` (NULL: an operator acting on jobs). The one rule of who acts on a
-- workflow's job: only its run (its stop, its retry), which advances its node; an
-- operator's cancel or retry of one job or many leaves it to the run. Inlined.
CREATE OR REPLACE FUNCTION remuda.of_run(job_run bigint, caller_run bigint)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT job_run IS NOT DISTINCT FROM caller_run
$$;
