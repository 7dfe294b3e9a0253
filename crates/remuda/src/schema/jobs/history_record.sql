-- Verification mode's recorder: a row trigger on remuda.jobs, installed only while the mode
-- is on (remuda.set_history), that writes each state change of a job to remuda.history. A
-- change into running names the new claim (worker, token). A change out of running names the
-- claim its writer held: the outcome statements write the worker and token they were given
-- (the same values, when their guard holds), so an outcome accepted from a stale claim is
-- recorded under that claim and the checker sees it. Any other change names the claim the
-- job held before it.
CREATE OR REPLACE FUNCTION remuda.history_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO remuda.history (job_id, attempt, from_state, to_state, worker_id, token)
        VALUES (NEW.id, NEW.attempt, NULL, NEW.state::text, NEW.worker_id, NEW.started_at);
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO remuda.history (job_id, attempt, from_state, to_state, worker_id, token)
        VALUES (OLD.id, OLD.attempt, OLD.state::text, NULL, OLD.worker_id, OLD.started_at);
    ELSIF OLD.state IS DISTINCT FROM NEW.state OR OLD.started_at IS DISTINCT FROM NEW.started_at THEN
        INSERT INTO remuda.history (job_id, attempt, from_state, to_state, worker_id, token)
        VALUES (NEW.id,
                CASE WHEN NEW.state = 'running' THEN NEW.attempt ELSE OLD.attempt END,
                OLD.state::text, NEW.state::text,
                CASE WHEN NEW.state = 'running' OR OLD.state = 'running'
                     THEN COALESCE(NEW.worker_id, OLD.worker_id) ELSE OLD.worker_id END,
                CASE WHEN NEW.state = 'running' OR OLD.state = 'running'
                     THEN NEW.started_at ELSE OLD.started_at END);
    END IF;
    RETURN NULL;
END
$$;
