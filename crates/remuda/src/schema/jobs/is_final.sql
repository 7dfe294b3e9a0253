-- Whether a state is final: the job will not run again unless an operator retries it.
CREATE OR REPLACE FUNCTION remuda.is_final(state remuda.job_state)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT state IN ('completed', 'failed', 'cancelled', 'expired')
$$;
