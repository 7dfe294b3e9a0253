-- Verification mode's recorder: a row trigger on remuda.jobs, installed only while the mode
-- is on (remuda.set_history), that writes each state change of a job to remuda.history. A
-- change into running names the new claim (worker, token). A change out of running names the
-- claim its writer held: the outcome statements write the worker and token they were given
-- (the same values, when their guard holds), so an outcome accepted from a stale claim is
-- recorded under that claim and the checker sees it. Any other change names the claim the
-- job held before it.
CREATE OR REPLACE FUNCTION remuda.history_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- a job moved within the finished part (retention keeping it past its day) changes no state
    IF current_setting('remuda.moving_within', true) = 'on' THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        -- a job moved between the live and the finished part (remuda.finish_jobs, a revive)
        -- is deleted from one and inserted into the other in one statement: its deletion,
        -- recorded just before, becomes the one change of state it is
        UPDATE remuda.history h
        SET to_state = NEW.state::text,
            attempt = CASE WHEN NEW.state = 'running' THEN NEW.attempt ELSE h.attempt END,
            worker_id = CASE WHEN NEW.state = 'running' OR h.from_state = 'running'
                             THEN COALESCE(NEW.worker_id, h.worker_id) ELSE h.worker_id END,
            token = CASE WHEN NEW.state = 'running' OR h.from_state = 'running'
                         THEN NEW.started_at ELSE h.token END
        WHERE h.seq = (SELECT max(x.seq) FROM remuda.history x WHERE x.job_id = NEW.id)
          AND h.to_state IS NULL AND h.xid = pg_current_xact_id();
        IF FOUND THEN
            RETURN NULL;
        END IF;
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
