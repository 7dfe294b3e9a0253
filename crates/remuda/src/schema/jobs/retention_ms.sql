-- How long a job of final state `state` in queue `q` (a row of remuda.queues, NULL when the
-- queue has no settings) is kept, in milliseconds: the queue's own setting, else
-- `default_ms`; -1 for ever.
CREATE OR REPLACE FUNCTION remuda.retention_ms(state remuda.job_state, q remuda.queues, default_ms bigint)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT COALESCE(CASE state
                        WHEN 'completed' THEN q.retain_completed_ms
                        WHEN 'failed' THEN q.retain_failed_ms
                        WHEN 'cancelled' THEN q.retain_cancelled_ms
                        WHEN 'expired' THEN q.retain_expired_ms
                    END, default_ms)
$$;
