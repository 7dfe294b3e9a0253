-- Claim from queue $1 within a cap on running jobs (the queue's max_running, the cluster's)
-- and the queue-wide rate limit, under the lock of claim_lock.sql, for worker $5 (named $6,
-- with capabilities $7: routing as in claim.sql): at most $4 (free slots), no more than the
-- caps and the tokens allow. The common shape of a limited queue, without claim_limited.sql's
-- turns of keys and per-group buckets: the rows are walked, locked and updated as the plain
-- claim does (claim.sql: jobs_available_idx in order, then the locked rows by their place),
-- where claim_limited.sql finds them again by primary key and sorts them twice.
-- Measured with EXPLAIN ANALYZE on 100 000 available jobs, 2 000 claimed: 19.7 ms through
-- claim_limited.sql, 12.5-13.6 ms here, 9.8 ms for the plain claim (the difference is
-- setting `counted` and entering jobs_counted_running_idx). A queue that took a key limit, a rate per kind or
-- key, or fair share since the worker read its settings claims nothing here (the worker re-reads them on
-- `remuda_queue` and then uses claim_limited.sql).
-- The jobs claimed are flagged `counted`, which is how the counts find them.
WITH cfg AS (
    SELECT q.max_running, q.rate_limit, q.rate_period_ms, coalesce(q.rate_burst, q.rate_limit) AS rate_burst,
           c.max_running AS cluster_max,
           coalesce(q.paused, false)
             OR q.key_limit IS NOT NULL
             OR q.fairness IS NOT NULL
             OR (q.rate_limit IS NOT NULL AND q.rate_per <> 'queue') AS closed
    FROM remuda.cluster c LEFT JOIN remuda.queues q ON q.name = $1
), bucket AS (
    SELECT CASE WHEN cfg.rate_limit IS NULL THEN NULL
                ELSE least(cfg.rate_burst::float8,
                           coalesce(b.tokens, cfg.rate_burst::float8)
                           + extract(epoch FROM statement_timestamp() - coalesce(b.refreshed_at, statement_timestamp())) * 1000.0
                             * cfg.rate_limit / cfg.rate_period_ms) END AS tokens
    FROM cfg LEFT JOIN remuda.rate_buckets b ON b.scope = jsonb_build_array($1::text)::text
), quota AS (
    SELECT CASE WHEN cfg.closed THEN 0 ELSE greatest(0, least($4::bigint,
             coalesce(cfg.max_running
                      - (SELECT count(*) FROM remuda.jobs_live r
                         WHERE r.state = 'running' AND r.counted AND r.queue = $1), $4::bigint),
             CASE WHEN cfg.cluster_max IS NULL THEN $4::bigint
                  ELSE cfg.cluster_max - (SELECT count(*) FROM remuda.jobs_live r
                                          WHERE r.state = 'running' AND r.counted) END,
             coalesce(floor(bucket.tokens)::bigint, $4::bigint))) END AS n
    FROM cfg, bucket
), claimed AS (
    -- the one writer of a start (remuda.start_jobs), the jobs flagged counted
    SELECT s.* FROM remuda.start_jobs(ARRAY(
        SELECT ctid
        FROM remuda.jobs_live
        WHERE state = 'available'
          AND queue = $1
          AND kind = ANY($2::text[])
          AND (target_worker IS NULL OR target_worker = $6)
          AND (requires IS NULL OR requires <@ $7::text[])
          AND (expires_at IS NULL OR expires_at > statement_timestamp() OR started_at IS NOT NULL)
        ORDER BY priority, run_at, id
        LIMIT (SELECT n FROM quota)
        FOR UPDATE SKIP LOCKED
    ), $5, $2::text[], $3::int[], true) s
), tick AS (
    INSERT INTO remuda.rate_buckets AS b (scope, tokens, refreshed_at)
    SELECT jsonb_build_array($1::text)::text, bucket.tokens - (SELECT count(*) FROM claimed), statement_timestamp()
    FROM bucket WHERE bucket.tokens IS NOT NULL AND EXISTS (SELECT 1 FROM claimed)
    ON CONFLICT (scope) DO UPDATE SET tokens = EXCLUDED.tokens, refreshed_at = EXCLUDED.refreshed_at
)
SELECT c.id, c.tid, c.kind, c.attempt, c.max_attempts, c.timeout_ms, c.args, c.started_at, c.flags, c.workflow, c.run_at,
       c.traceparent, c.tracestate, c.group_key, c.concurrency_key, 0::bigint AS turn
FROM claimed c
