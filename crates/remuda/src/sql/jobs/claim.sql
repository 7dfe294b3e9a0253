-- Claim up to $4 available jobs of queue $1 whose kind this worker runs ($2), in priority order,
-- and start them for worker $5 (named $6, with capabilities $7), in one round trip; found by
-- the queue's order, or ($8) by each kind's (the two walks are InitPlans: only the one the
-- CASE takes runs).
-- The start is remuda.start_jobs's (schema/jobs/start_jobs.sql), which the limited claims
-- call; this, the hot path, writes its own copy of it inline: through the function every
-- row passed through its result store, 1 µs a job more (a drain of 300 000 jobs, three runs
-- each). The test `the_plain_claim_starts_jobs_as_the_one_writer_does` holds the two alike.
-- The rows are picked by an ARRAY(...) subquery, evaluated once (LIMIT ... FOR UPDATE SKIP
-- LOCKED walks jobs_available_idx in order), and then found again by their place
-- (`ctid = ANY(...)`, a TID scan: the locked versions cannot move before this statement
-- updates them; by primary key instead, each row cost an index descent, ~1.5 µs a job here).
-- A row that another transaction updated after this statement's snapshot (a `wait` marking an
-- available job, say) is locked in its new version, which this snapshot cannot see: the TID
-- scan skips it, its lock ends with this statement, and the next claim takes it.
-- No other condition on the updated rows: with `state = 'available'` added, a generic plan
-- made on a table whose statistics saw few available jobs walked all of jobs_available_idx
-- instead (2 000 jobs/s at 100 000 jobs on a 2 000 000-row backlog).
-- Run under sql::CLAIM_PLAN (no sequential scan): the TID scan is then the only way to the
-- locked rows. Planned on an empty or small table without it (a worker started before its
-- jobs came), the update was a sequential scan of the table filtered by the array, kept for
-- every claim as the table grew.
-- The claim returns the place of the version it wrote (`tid`): the completer's hint; and
-- started_at, the claim's token: with the attempt it guards every later write about this run
-- (the attempt alone repeats after a snooze or a release gives it back).
-- max_attempts left NULL by an untyped enqueue takes this worker's default for the kind ($3,
-- parallel to $2), looked up with array_position.
UPDATE remuda.jobs_live j
SET state = 'running',
    attempt = j.attempt + 1,
    worker_id = $5,
    started_at = statement_timestamp(),
    unique_key = CASE WHEN j.formed IS NULL THEN j.unique_key END,
    fair_tag = NULL,
    max_attempts = COALESCE(j.max_attempts, ($3::int[])[array_position($2::text[], j.kind)])
WHERE j.ctid = ANY(CASE WHEN NOT $8::boolean THEN ARRAY(
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
      AND (expires_at IS NULL OR expires_at > statement_timestamp() OR started_at IS NOT NULL)
    ORDER BY priority, run_at, id
    LIMIT $4
    FOR UPDATE SKIP LOCKED
) ELSE ARRAY(
    -- $8, the walk by kind: the head of the queue is mostly of kinds this worker does not
    -- run (see claim_head.sql), which the walk above reads and passes over in every claim.
    -- Each kind's first $4 jobs by jobs_available_kind_idx, in the same order, locked as they
    -- are walked (so that jobs another worker holds are passed over for the next ones, as
    -- above), and the first $4 of them all. A worker of one kind locks what it takes; with
    -- more kinds, the jobs locked beyond the $4 taken are passed over by other workers until
    -- this statement ends.
    SELECT w.ctid
    FROM unnest($2::text[]) AS k(kind)
    CROSS JOIN LATERAL (
        SELECT ctid, priority, run_at, id
        FROM remuda.jobs_live
        WHERE state = 'available'
          AND queue = $1
          -- (the range says nothing more: it makes the walk's plan jobs_available_kind_idx,
          -- whose index condition it is, whatever the statistics. Taken while the queue held
          -- one kind, they made any kind look like all the jobs, and the walk went through
          -- jobs_available_idx, reading every job of the other kinds: 75-88 ms a claim of
          -- 2 000 behind 100 000 of them, against 16-22)
          AND kind = k.kind AND kind BETWEEN k.kind AND k.kind
          AND (target_worker IS NULL OR target_worker = $6)
          AND (requires IS NULL OR requires <@ $7::text[])
          AND NOT EXISTS (SELECT 1 FROM remuda.queues q WHERE q.name = $1
                          AND (q.paused OR q.max_running IS NOT NULL OR q.key_limit IS NOT NULL
                               OR q.rate_limit IS NOT NULL OR q.fairness IS NOT NULL))
          AND (SELECT c.max_running FROM remuda.cluster c) IS NULL
          AND (expires_at IS NULL OR expires_at > statement_timestamp() OR started_at IS NOT NULL)
        ORDER BY priority, run_at, id
        LIMIT $4
        FOR UPDATE SKIP LOCKED
    ) w
    ORDER BY w.priority, w.run_at, w.id
    LIMIT $4
) END)
RETURNING j.id, j.ctid AS tid, j.kind, j.attempt, j.max_attempts, j.timeout_ms, j.args, j.started_at, j.flags, j.workflow, j.run_at,
          j.traceparent, j.tracestate, j.group_key
