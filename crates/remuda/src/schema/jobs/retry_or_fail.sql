-- Retry or fail, decided here and only here, for every attempt that ended in an error that
-- may be retried (a task's retryable error, a lost worker): the next attempt is due after
-- delay_ms (scheduled, or available at once when 0) if the job has attempts left, else the
-- job fails. A plain SQL expression, inlined into the statements that use it.
CREATE OR REPLACE FUNCTION remuda.retry_or_fail(attempt integer, max_attempts integer, delay_ms bigint)
RETURNS remuda.job_state LANGUAGE sql STABLE AS $$
    SELECT (CASE WHEN attempt >= COALESCE(max_attempts, 1) THEN 'failed'
                 WHEN delay_ms > 0 THEN 'scheduled'
                 ELSE 'available' END)::remuda.job_state
$$;
