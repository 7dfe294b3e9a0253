-- Insert jobs of which some are unique (sql/jobs/insert_unique_jobs.sql, the client's unique
-- path): a job whose unique key is held by a job of the same kind (and, when it is unique per
-- queue, the same queue) in one of that job's unique states is not inserted, nor is the
-- second of two with one key in the batch. Rows come back in input order: id, key, kind and
-- queue scope of each job inserted. Jobs without a key are always inserted.
-- A key held past its job's end is in remuda.unique_finished, not in the live part's unique
-- index, so it is checked twice: before the insert, and after it in a statement of its own,
-- whose snapshot sees what committed while the insert waited. The insert waits for a job
-- that holds the key and is being moved to the finished part (its index entry is being
-- deleted); once that move commits the insert goes ahead, and only the second check sees the
-- hold the move wrote: the jobs it finds are taken out again, and are duplicates.
CREATE OR REPLACE FUNCTION remuda.insert_unique_jobs(
    in_queues text[], in_kinds text[], in_priorities integer[], in_max_attempts integer[], in_run_ats timestamptz[],
    in_expires timestamptz[], in_timeouts bigint[], in_args jsonb[], in_concurrency_keys text[],
    in_target_workers text[], in_requires text[], in_notify jsonb[], in_group_keys text[], in_traceparents text[],
    in_tracestates text[], in_unique_keys text[], in_unique_states text[], in_unique_queues text[])
RETURNS TABLE (id bigint, unique_key text, kind text, unique_scope text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    made bigint[];
    taken bigint[];
BEGIN
    WITH inserted AS (
        INSERT INTO remuda.jobs_live AS j (state, queue, kind, priority, max_attempts, run_at, expires_at, timeout_ms, args,
                                 unique_key, unique_states, unique_queue, concurrency_key, target_worker, requires,
                                 notify, flags, group_key, traceparent, tracestate)
        SELECT CASE WHEN u.run_at > now() THEN 'scheduled'::remuda.job_state ELSE 'available'::remuda.job_state END,
               u.queue, u.kind, u.priority, u.max_attempts, COALESCE(u.run_at, now()), u.expires_at, u.timeout_ms, u.args,
               u.unique_key, u.unique_states::remuda.job_state[], u.unique_queue, u.concurrency_key, u.target_worker,
               NULLIF(u.requires, '')::text[], u.notify, CASE WHEN u.notify IS NULL THEN 0 ELSE 4 END, u.group_key,
               u.traceparent, u.tracestate
        FROM unnest(in_queues, in_kinds, in_priorities, in_max_attempts, in_run_ats, in_expires, in_timeouts,
                    in_args, in_concurrency_keys, in_target_workers, in_requires, in_notify, in_group_keys,
                    in_traceparents, in_tracestates, in_unique_keys, in_unique_states, in_unique_queues)
            AS u(queue, kind, priority, max_attempts, run_at, expires_at, timeout_ms, args, concurrency_key, target_worker,
                 requires, notify, group_key, traceparent, tracestate, unique_key, unique_states, unique_queue)
        -- a key held past its job's end (remuda.unique_finished) makes a duplicate too
        WHERE u.unique_key IS NULL OR NOT EXISTS (
            SELECT 1 FROM remuda.unique_finished f
            WHERE f.kind = u.kind AND f.scope = COALESCE(u.unique_queue, '') AND f.key = u.unique_key)
        ON CONFLICT (kind, (COALESCE(unique_queue, '')), unique_key)
            WHERE unique_key IS NOT NULL AND state = ANY (unique_states) DO NOTHING
        RETURNING j.id
    )
    SELECT array_agg(i.id) INTO made FROM inserted i;
    WITH gone AS (
        DELETE FROM remuda.jobs_live j
        WHERE j.id = ANY (made) AND j.unique_key IS NOT NULL
          AND EXISTS (SELECT 1 FROM remuda.unique_finished f
                      WHERE f.kind = j.kind AND f.scope = COALESCE(j.unique_queue, '')
                        AND f.key = j.unique_key AND f.job_id <> j.id)
        RETURNING j.id
    )
    SELECT array_agg(g.id) INTO taken FROM gone g;
    RETURN QUERY
    SELECT j.id, j.unique_key, j.kind, COALESCE(j.unique_queue, '')
    FROM unnest(made) WITH ORDINALITY AS m(id, n)
    JOIN remuda.jobs_live j ON j.id = m.id
    WHERE m.id <> ALL (COALESCE(taken, '{}'))
    ORDER BY m.n;
END
$$;
