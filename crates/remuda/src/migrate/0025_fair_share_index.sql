-- remuda schema, version 25: the job table's index for fair share, built without blocking
-- enqueues and claims (outside a transaction, CONCURRENTLY).
--
-- The fair claim walks the distinct groups of a queue's waiting jobs and takes each group's
-- next jobs in priority order; only jobs with a group are in this index, so the others pay
-- nothing for it.
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_grouped_available_idx
    ON remuda.jobs (queue, group_key, priority, run_at, id)
    WHERE state = 'available' AND group_key IS NOT NULL;
