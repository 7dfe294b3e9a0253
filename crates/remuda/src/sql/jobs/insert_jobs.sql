-- Insert any number of jobs in one statement from parallel arrays (one element per job).
-- Rows due now start `available`; rows with a future run_at start `scheduled`.
-- The statement trigger jobs_notify_insert sends one notification per queue. A job with
-- notification targets ($12) gets flag bit 4, so its final state goes through the seam. $13: the
-- jobs' groups (fair share); $14, $15 their trace contexts.
INSERT INTO remuda.jobs_live (state, queue, kind, priority, max_attempts, run_at, expires_at, timeout_ms, args, concurrency_key,
                         target_worker, requires, notify, flags, group_key,
                         traceparent, tracestate)
SELECT CASE WHEN u.run_at > now() THEN 'scheduled'::remuda.job_state ELSE 'available'::remuda.job_state END,
       u.queue, u.kind, u.priority, u.max_attempts, COALESCE(u.run_at, now()), u.expires_at, u.timeout_ms, u.args,
       u.concurrency_key, u.target_worker, NULLIF(u.requires, '')::text[], u.notify,
       CASE WHEN u.notify IS NULL THEN 0 ELSE 4 END, u.group_key, u.traceparent, u.tracestate
FROM unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::timestamptz[], $6::timestamptz[], $7::bigint[], $8::jsonb[],
            $9::text[], $10::text[], $11::text[], $12::jsonb[], $13::text[],
            $14::text[], $15::text[])
    AS u(queue, kind, priority, max_attempts, run_at, expires_at, timeout_ms, args, concurrency_key, target_worker,
         requires, notify, group_key, traceparent, tracestate)
RETURNING id
