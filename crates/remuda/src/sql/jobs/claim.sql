-- Claim up to $4 available jobs of queue $1 whose kind this worker runs ($2), in priority order,
-- and start them for worker $5 (named $6, with capabilities $7), in one round trip.
-- The rows are picked by an ARRAY(...) subquery, evaluated once (LIMIT ... FOR UPDATE SKIP
-- LOCKED walks jobs_available_idx in order), and started by the one writer of a start,
-- remuda.start_jobs, which finds them again by their place (`ctid = ANY(...)`, a TID scan:
-- the locked versions cannot move before it updates them; by primary key instead, each row
-- cost an index descent, ~1.5 µs a job here). A row that another transaction updated after
-- this statement's snapshot (a `wait` marking an available job, say) is locked in its new
-- version, which this snapshot cannot see: the TID scan skips it, its lock ends with this
-- statement, and the next claim takes it.
-- Run under sql::CLAIM_PLAN (no sequential scan): the picking walks the index even on a table
-- whose statistics saw it empty (a worker started before its jobs came).
-- The claim returns the place of the version it wrote (`tid`): the completer's hint; and
-- started_at, the claim's token: with the attempt it guards every later write about this run
-- (the attempt alone repeats after a snooze or a release gives it back).
-- max_attempts left NULL by an untyped enqueue takes this worker's default for the kind ($3,
-- parallel to $2).
SELECT s.id, s.tid, s.kind, s.attempt, s.max_attempts, s.timeout_ms, s.args, s.started_at, s.flags,
       s.workflow, s.run_at, s.traceparent, s.tracestate
FROM remuda.start_jobs(ARRAY(
    SELECT ctid
    FROM remuda.jobs_live
    WHERE state = 'available'
      AND queue = $1
      AND kind = ANY($2::text[])
      -- routing: a job for another worker, or needing a capability this one lacks, is passed by
      AND (target_worker IS NULL OR target_worker = $6)
      AND (requires IS NULL OR requires <@ $7::text[])
      -- a queue that became paused, limited or fair since this worker read its settings claims
      -- nothing here (the worker uses claim_limited.sql once it has read them): two probes
      -- of one-row lookups per claim, not per job
      AND NOT EXISTS (SELECT 1 FROM remuda.queues q WHERE q.name = $1
                      AND (q.paused OR q.max_running IS NOT NULL OR q.key_limit IS NOT NULL
                           OR q.rate_limit IS NOT NULL OR q.fairness IS NOT NULL))
      AND (SELECT c.max_running FROM remuda.cluster c) IS NULL
      -- past its deadline to start: left to the expirer, unless it has started before
      AND (expires_at IS NULL OR expires_at > now() OR started_at IS NOT NULL)
    ORDER BY priority, run_at, id
    LIMIT $4
    FOR UPDATE SKIP LOCKED
), $5, $2::text[], $3::int[], false) s
