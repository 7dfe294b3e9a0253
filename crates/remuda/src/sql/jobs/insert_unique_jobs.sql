-- Insert jobs of which some are unique, in one statement: a job whose unique key ($16) is held
-- by a job of the same kind (and, when $18 names it, the same queue) in one of that job's
-- unique states ($17, an array literal per job) is not inserted, nor is the second of two
-- with one key in the batch. Rows come back in input
-- order (id, key, kind and queue scope of each inserted row: the key's whole scope, which the
-- caller compares to tell the inserted jobs from the duplicates); the caller finds the duplicates' ids with
-- unique_lookup.sql. Jobs without a key ($16 NULL) are always inserted. $1 … $15 are the
-- columns of insert_jobs.sql.
INSERT INTO remuda.jobs_live (state, queue, kind, priority, max_attempts, run_at, expires_at, timeout_ms, args,
                         unique_key, unique_states, unique_queue, concurrency_key, target_worker, requires,
                         notify, flags, group_key, traceparent, tracestate)
SELECT CASE WHEN u.run_at > now() THEN 'scheduled'::remuda.job_state ELSE 'available'::remuda.job_state END,
       u.queue, u.kind, u.priority, u.max_attempts, COALESCE(u.run_at, now()), u.expires_at, u.timeout_ms, u.args,
       u.unique_key, u.unique_states::remuda.job_state[], u.unique_queue, u.concurrency_key, u.target_worker,
       NULLIF(u.requires, '')::text[], u.notify, CASE WHEN u.notify IS NULL THEN 0 ELSE 4 END, u.group_key,
       u.traceparent, u.tracestate
FROM unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::timestamptz[], $6::timestamptz[], $7::bigint[], $8::jsonb[],
            $9::text[], $10::text[], $11::text[], $12::jsonb[], $13::text[], $14::text[], $15::text[],
            $16::text[], $17::text[], $18::text[])
    AS u(queue, kind, priority, max_attempts, run_at, expires_at, timeout_ms, args, concurrency_key, target_worker,
         requires, notify, group_key, traceparent, tracestate, unique_key, unique_states, unique_queue)
-- a key held past its job's end (remuda.unique_finished) makes a duplicate too
WHERE u.unique_key IS NULL OR NOT EXISTS (
    SELECT 1 FROM remuda.unique_finished f
    WHERE f.kind = u.kind AND f.scope = COALESCE(u.unique_queue, '') AND f.key = u.unique_key)
ON CONFLICT (kind, (COALESCE(unique_queue, '')), unique_key)
    WHERE unique_key IS NOT NULL AND state = ANY (unique_states) DO NOTHING
RETURNING id, unique_key, kind, COALESCE(unique_queue, '') AS unique_scope
