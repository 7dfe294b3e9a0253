-- remuda schema, version 21: durable steps.
--
-- A task may record the result of a step of its work (`JobContext::step`, `remuda.step` in
-- Python, `remuda step NAME -- CMD` in a command task). A later attempt of the same job finds
-- the step here and returns its output instead of running it again, so a retry after a crash
-- resumes after the last completed step. A step is written only for the run that holds the
-- job (its worker, attempt and claim time), so a stale worker's step is never stored.
--
-- A table of its own, keyed by job and name, rather than a column of remuda.jobs: the claim
-- and completion statements of every job never read or write it, and a job that records no
-- step costs nothing. No foreign key: its triggers on remuda.jobs would be checked on every
-- update of the hot path. A job's steps go with it instead through a statement trigger on
-- delete (schema/steps/steps_forget.sql), whichever statement deletes it.
CREATE TABLE remuda.steps (
    job_id   bigint NOT NULL,
    name     text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    -- the attempt that recorded it
    attempt  integer NOT NULL,
    at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- what the step returned, as JSON text exactly as the task gave it (json, not jsonb:
    -- key order, spacing and numbers are kept)
    output   json NOT NULL,
    PRIMARY KEY (job_id, name)
);

CREATE TRIGGER jobs_steps_forget
    AFTER DELETE ON remuda.jobs
    REFERENCING OLD TABLE AS gone_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION remuda.steps_forget();
