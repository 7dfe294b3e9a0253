-- Start: the one transition of available jobs to `running`, written by the limited claims
-- (sql/jobs/claim_capped.sql, claim_limited.sql); the plain claim, the hot path, writes a
-- copy of it inline (sql/jobs/claim.sql says why, and a test holds the two alike). The
-- caller picks the jobs and locks them, and passes their places (`places`, the ctids of the
-- locked versions, as a claim's FOR UPDATE returns them: found again by a TID scan, never an
-- index descent per job), or their ids (`ids`, for a claim that picks by id: looked up here,
-- in this function's own snapshot, which sees the versions the caller locked). Each job
-- started takes one more attempt, the worker `worker` and the claim's time (with the
-- attempt, the token that guards every later write about this run), and its default
-- attempts when it was enqueued without any (`defaults`, parallel to `kinds`). A job formed
-- from many enqueues (debounced, throttled, batched) holds its key only until it starts: a
-- retry or release of it never meets the next job of its key. With `count_them` (a claim
-- under a cap or a key limit), the jobs are flagged `counted`, which is how the counts of running
-- jobs find them. A job's fair-share tag is cleared (a retry or release of it waits with a
-- new one: remuda.fair_tag_jobs).
-- The claim's time is when the claim's statement began (`statement_timestamp()`), never the
-- transaction's start (`now()`): a limited claim's transaction first waits for its queue's
-- lock (claim_lock.sql), and jobs enqueued during that wait were stamped as started before
-- they were created. Every time a claim writes or compares is that moment.
-- Returns the jobs started, as the worker runs them.
DROP FUNCTION IF EXISTS remuda.start_jobs(tid[], text, text[], integer[], boolean);
-- (the result of versions before a task was told its group: replaced by this one)
DROP FUNCTION IF EXISTS remuda.start_jobs(tid[], text, text[], integer[], boolean, bigint[]);
CREATE OR REPLACE FUNCTION remuda.start_jobs(
    places tid[], worker text, kinds text[], defaults integer[], count_them boolean,
    ids bigint[] DEFAULT NULL)
RETURNS TABLE (id bigint, tid tid, kind text, attempt integer, max_attempts integer,
               timeout_ms bigint, args jsonb, started_at timestamptz, flags integer,
               workflow jsonb, run_at timestamptz, concurrency_key text, traceparent text,
               tracestate text, group_key text)
LANGUAGE plpgsql
SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
BEGIN
    IF ids IS NOT NULL THEN
        places := ARRAY(SELECT l.ctid FROM remuda.jobs_live l WHERE l.id = ANY(ids));
    END IF;
    RETURN QUERY
    UPDATE remuda.jobs_live j
    SET state = 'running',
        attempt = j.attempt + 1,
        worker_id = worker,
        started_at = statement_timestamp(),
        unique_key = CASE WHEN j.formed IS NULL THEN j.unique_key END,
        counted = j.counted OR count_them,
        fair_tag = NULL,
        max_attempts = COALESCE(j.max_attempts, defaults[array_position(kinds, j.kind)])
    WHERE j.ctid = ANY(places)
    RETURNING j.id, j.ctid, j.kind, j.attempt, j.max_attempts, j.timeout_ms, j.args, j.started_at,
              j.flags, j.workflow, j.run_at, j.concurrency_key, j.traceparent, j.tracestate, j.group_key;
END
$$;
