-- remuda schema, version 3: unique jobs.
--
-- A job may carry a unique key and the states in which it counts as a duplicate. The
-- partial unique index enforces it (an enqueue of a duplicate finds the existing row through
-- ON CONFLICT, no lock taken). Rows without a key are not in the index, so jobs that do not
-- ask for uniqueness pay nothing for it: the predicate stops at `unique_key IS NOT NULL`.
ALTER TABLE remuda.jobs
    ADD COLUMN unique_key text,
    ADD COLUMN unique_states remuda.job_state[];

CREATE UNIQUE INDEX jobs_unique_idx ON remuda.jobs (unique_key)
    WHERE unique_key IS NOT NULL AND state = ANY (unique_states);
