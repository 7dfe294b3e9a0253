-- remuda schema, version 10: the job table's indexes for schedules and retention, built
-- without blocking enqueues and claims (outside a transaction, CONCURRENTLY; an interrupted
-- build is dropped and made again by the next `migrate`).
--
-- One job per schedule and fire time, whoever fires it. Jobs without a schedule are not in
-- the index and pay nothing for it.
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS jobs_schedule_fire_idx
    ON remuda.jobs (schedule, fire_at) WHERE schedule IS NOT NULL;
--
-- Retention walks the finished jobs of one state and queue, oldest first, each queue up to
-- its own age (prune.sql). Only final rows are in it: a job enters it once, when it
-- finishes.
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_finished_idx
    ON remuda.jobs (state, queue, finished_at)
    WHERE state IN ('completed', 'failed', 'cancelled', 'expired');
--
-- Autovacuum for a queue. The job table's rows are updated two to three times each and then
-- deleted by retention: the default (vacuum at 20% dead rows) lets a table of ten million
-- rows carry two million dead ones, every claim walking past their index entries. Vacuum
-- after 1% (and 1 000 rows), analyse after 2% (the claim's plans depend on the counts per
-- state), count inserts too (a table only inserted into and pruned still needs its
-- visibility map), and throttle less. Small tables updated all the time (leases,
-- heartbeats, buckets, schedules) are vacuumed by row count, not share, and keep room for
-- in-page (HOT) updates.
ALTER TABLE remuda.jobs SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 1
);
ALTER TABLE remuda.workers SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 100, fillfactor = 70);
ALTER TABLE remuda.leader SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 100, fillfactor = 50);
ALTER TABLE remuda.rate_buckets SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 100, fillfactor = 70);
ALTER TABLE remuda.schedules SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 200, fillfactor = 70);
ALTER TABLE remuda.maintenance_runs SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 100, fillfactor = 50);
