-- remuda schema, version 10: the job table's indexes for schedules and retention, built
-- without blocking enqueues and claims (outside a transaction, CONCURRENTLY; an interrupted
-- build is dropped and made again by the next `migrate`).
--
-- One job per schedule and fire time, whoever fires it. Jobs without a schedule are not in
-- the index and pay nothing for it.
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS jobs_schedule_fire_idx
    ON remuda.jobs (schedule, fire_at) WHERE schedule IS NOT NULL;
--
-- Retention walks finished jobs of one state, oldest first. Only final rows are in it: a
-- job enters it once, when it finishes.
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_finished_idx
    ON remuda.jobs (state, finished_at)
    WHERE state IN ('completed', 'failed', 'cancelled', 'expired');
