-- remuda schema, version 20: the history of verification mode.
--
-- Off by default. Switched on per database (remuda.set_history(true), `remuda history on`),
-- a row trigger on remuda.jobs records every state change here, from the one place every
-- statement writes (the table itself): what the job went from and to, the attempt and the
-- claim (worker and its fencing token, started_at) the change belongs to, the transaction and
-- the time. Switched off, the trigger is dropped: the job path pays nothing. The checker
-- (remuda::verify) reads it beside the tables.
CREATE TABLE remuda.history (
    seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id     bigint NOT NULL,
    attempt    integer NOT NULL,
    -- NULL: the job was inserted; to_state NULL: it was deleted
    from_state text,
    to_state   text,
    -- the claim the change belongs to: the new one for a change into running, else the one
    -- the job held before it
    worker_id  text,
    token      timestamptz,
    xid        xid8 NOT NULL DEFAULT pg_current_xact_id(),
    at         timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX history_job_idx ON remuda.history (job_id, seq);

-- The same for workflow runs and their nodes: node NULL is the run itself.
CREATE TABLE remuda.run_history (
    seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id     bigint NOT NULL,
    node       text,
    from_state text,
    to_state   text,
    xid        xid8 NOT NULL DEFAULT pg_current_xact_id(),
    at         timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX run_history_run_idx ON remuda.run_history (run_id, node, seq);
