-- The state a worker's outcome moves its running job to: `completed`, `failed` (an error not
-- to be retried), `retry` (an error to retry after delay_ms, if attempts remain) or `snooze`
-- (wait delay_ms; the attempt is given back). NULL for an unknown outcome, which the NOT
-- NULL state refuses as bad data.
CREATE OR REPLACE FUNCTION remuda.outcome_state(outcome text, attempt integer, max_attempts integer, delay_ms bigint)
RETURNS remuda.job_state LANGUAGE sql STABLE AS $$
    SELECT CASE outcome
               WHEN 'completed' THEN 'completed'::remuda.job_state
               WHEN 'failed' THEN 'failed'::remuda.job_state
               WHEN 'retry' THEN remuda.retry_or_fail(attempt, max_attempts, delay_ms)
               WHEN 'snooze' THEN (CASE WHEN delay_ms > 0 THEN 'scheduled' ELSE 'available' END)::remuda.job_state
           END
$$;
