-- remuda schema, version 6: unique keys are scoped by kind, and optionally by queue, as in
-- River and Oban (version 3 made them global: a `ping` job's key blocked an `other` job with
-- the same key). `unique_queue` is NULL unless the job asked to be unique per queue; the index
-- compares it as '' then. Existing keys move to the new index as they are: a key held by two
-- kinds was impossible before, so the new, finer index cannot conflict.
ALTER TABLE remuda.jobs ADD COLUMN unique_queue text;

CREATE UNIQUE INDEX jobs_unique_scope_idx
    ON remuda.jobs (kind, (COALESCE(unique_queue, '')), unique_key)
    WHERE unique_key IS NOT NULL AND state = ANY (unique_states);

DROP INDEX remuda.jobs_unique_idx;
