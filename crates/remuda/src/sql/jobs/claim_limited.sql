-- Claim from queue $1 within its limits, under the lock of claim_lock.sql, for worker $5
-- (named $6, with capabilities $7: routing as in claim.sql):
-- at most $4 (free slots), and no more than max_running minus its running jobs, the
-- cluster's cap minus all running jobs, and the rate limit's tokens allow (one bucket for the
-- queue, or with rate_per 'kind' / 'key' one per kind or concurrency key of the queue; each
-- holds rate_burst tokens at most, else rate_limit). With a key_limit,
-- each concurrency key gets at most key_limit running jobs, and keys take turns: the first
-- waiting job of every key comes before the second of any, walking the keys from the cursor
-- $8 (the last key this worker served) so no tenant starves another. Under a cap or a key
-- limit the jobs claimed are flagged `counted`, which is how the counts find them
-- (jobs_counted_running_idx); a queue without either (fair share, rates) counts nothing
-- (an index entry a job), so a cap or key limit set later counts the jobs started after it.
-- Jobs without a key in a key-limited queue are not limited by key; they are found among the
-- first 1 000 waiting jobs of the queue.
-- With fair share (fairness 'group') the groups take the place of the keys' turns: start-time
-- fair queueing. Every job of the queue waits with its start tag, given as it became
-- available (remuda.fair_tag_jobs: its group's turn, 1 / weight after the group's last, and
-- not before its priority's clock), the jobs without a group as the group ''; the claim
-- walks the tags in order, priority first (jobs_fair_idx), as the plain claim walks its
-- index. Each priority's clock moves to the last tag it started, and each group's virtual
-- time to the tag after its last start, in remuda.fair_clocks and remuda.queue_groups, in
-- this statement. Key limits, caps and
-- rates hold as without it. A job that waits without a tag (fair share turned on, or a way
-- to wait that gives none) is tagged before a deep claim (fair_tag_queue.sql).
WITH RECURSIVE cfg AS (
    SELECT q.max_running, q.key_limit, q.rate_limit, q.rate_period_ms, coalesce(q.rate_per, 'queue') AS rate_per,
           coalesce(q.rate_burst, q.rate_limit) AS rate_burst,
           c.max_running AS cluster_max, coalesce(q.paused, false) AS paused,
           coalesce(q.fairness = 'group', false) AS fair
    FROM remuda.cluster c LEFT JOIN remuda.queues q ON q.name = $1
), counts AS (
    -- (each counted only when a cap reads it: a walk of the running jobs' index, ~1 ms a claim)
    SELECT CASE WHEN (SELECT max_running FROM cfg) IS NULL THEN 0
                ELSE (SELECT count(*) FROM remuda.jobs_live r WHERE r.state = 'running' AND r.counted AND r.queue = $1) END AS in_queue,
           CASE WHEN (SELECT cluster_max FROM cfg) IS NULL THEN 0
                ELSE (SELECT count(*) FROM remuda.jobs_live r WHERE r.state = 'running' AND r.counted) END AS in_cluster
), bucket AS (
    SELECT CASE WHEN cfg.rate_limit IS NULL OR cfg.rate_per <> 'queue' THEN NULL
                ELSE least(cfg.rate_burst::float8,
                           coalesce(b.tokens, cfg.rate_burst::float8)
                           + extract(epoch FROM statement_timestamp() - coalesce(b.refreshed_at, statement_timestamp())) * 1000.0
                             * cfg.rate_limit / cfg.rate_period_ms) END AS tokens
    FROM cfg LEFT JOIN remuda.rate_buckets b ON b.scope = jsonb_build_array($1::text)::text
), quota AS (
    SELECT CASE WHEN cfg.paused THEN 0 ELSE greatest(0, least($4::bigint,
                             coalesce(cfg.max_running - counts.in_queue, $4::bigint),
                             coalesce(cfg.cluster_max - counts.in_cluster, $4::bigint),
                             coalesce(floor(bucket.tokens)::bigint, $4::bigint))) END AS n,
           cfg.key_limit, cfg.rate_per, cfg.rate_limit, cfg.rate_burst, cfg.rate_period_ms, cfg.fair
    FROM cfg, counts, bucket
), after_cursor(key) AS (
    -- (each next key found by an ordered walk taking its first entry, never min(): planned
    -- on statistics that said many keys follow, min() became a bitmap scan of every key
    -- after it, for each key, and one claim over 1 000 keys took 14 s)
    SELECT (SELECT a.concurrency_key FROM remuda.jobs_live a
            WHERE a.state = 'available' AND a.queue = $1 AND a.concurrency_key > $8
            ORDER BY a.concurrency_key LIMIT 1)
    WHERE (SELECT key_limit IS NOT NULL AND NOT fair FROM quota)
    UNION ALL
    SELECT (SELECT a.concurrency_key FROM remuda.jobs_live a
            WHERE a.state = 'available' AND a.queue = $1 AND a.concurrency_key > k.key
            ORDER BY a.concurrency_key LIMIT 1)
    FROM after_cursor k WHERE k.key IS NOT NULL
), from_start(key) AS (
    SELECT (SELECT a.concurrency_key FROM remuda.jobs_live a
            WHERE a.state = 'available' AND a.queue = $1 AND a.concurrency_key IS NOT NULL
            ORDER BY a.concurrency_key LIMIT 1)
    WHERE (SELECT key_limit IS NOT NULL AND NOT fair FROM quota)
    UNION ALL
    SELECT (SELECT a.concurrency_key FROM remuda.jobs_live a
            WHERE a.state = 'available' AND a.queue = $1 AND a.concurrency_key > k.key
            ORDER BY a.concurrency_key LIMIT 1)
    FROM from_start k WHERE k.key IS NOT NULL AND k.key <= $8
), key_room AS (
    -- keys with waiting jobs, from the cursor round to it, with their running jobs; keys at
    -- their limit are passed over (they would take no turn)
    SELECT w.key, w.ord, (SELECT count(*) FROM remuda.jobs_live r
                          WHERE r.state = 'running' AND r.counted AND r.queue = $1
                            AND r.concurrency_key = w.key) AS running
    FROM (SELECT key, 1 AS ord FROM after_cursor WHERE key IS NOT NULL
          UNION ALL
          SELECT key, 2 AS ord FROM from_start WHERE key IS NOT NULL AND key <= $8) w
), keys AS (
    SELECT key, running, row_number() OVER () AS turn
    -- as many keys as the slots can fill (each up to key_limit jobs), and at least as many
    -- as slots up to 200, at most 1 000 in all: a claim of 2 000 slots at key_limit 2 serves
    -- 1 000 keys in one statement (at a fixed 200 keys it took 400 jobs a claim: 5 claims
    -- and 5 walks of the keys per 2 000 jobs), and a claim of 100 slots at key_limit 100
    -- still gives 100 keys a job each rather than one key all of them. Every key walked
    -- costs an index descent or two (about 12 µs): walking as many keys as slots (up to
    -- 1 000) took the drain of 1 000 keys × 2 from 0.74 to 0.64 of plain
    FROM (SELECT key, running FROM key_room WHERE running < (SELECT key_limit FROM quota)
          LIMIT least(1000, greatest(ceil($4::float8 / (SELECT key_limit FROM quota))::bigint,
                                     least(200, $4::bigint)))) open_keys
), keyed AS (
    -- up to key_limit waiting jobs per key (LIMIT takes no per-key value: the jobs over the
    -- key's room are dropped in `picked`)
    SELECT c.id, c.kind, c.concurrency_key, c.priority, c.run_at, ks.turn, ks.running AS key_running
    FROM keys ks
    CROSS JOIN LATERAL (
        SELECT j.id, j.kind, j.concurrency_key, j.priority, j.run_at FROM remuda.jobs_live j
        WHERE j.state = 'available' AND j.queue = $1 AND j.concurrency_key = ks.key
          AND j.kind = ANY($2::text[])
          AND (j.target_worker IS NULL OR j.target_worker = $6)
          AND (j.requires IS NULL OR j.requires <@ $7::text[])
          AND (j.expires_at IS NULL OR j.expires_at > statement_timestamp() OR j.started_at IS NOT NULL)
        ORDER BY j.priority, j.run_at, j.id
        LIMIT (SELECT key_limit FROM quota)
        FOR UPDATE OF j SKIP LOCKED) c
), unkeyed AS (
    -- with a key limit, the jobs without a key are looked for among the first 1 000 waiting
    -- jobs of the queue, not further, except in a deep claim ($9: the producer asks for one
    -- per queue at most once a poll interval), which walks the whole queue: where every job
    -- has a key the walk read the whole queue in every claim (measured, 100 000 keyed jobs:
    -- 15 of a claim's 24 ms), and without the deep claims a tenant with 1 000 jobs waiting
    -- ahead would keep the jobs without a key from ever being found
    SELECT j.id, j.kind, j.concurrency_key, j.priority, j.run_at
    FROM remuda.jobs_live j
    WHERE j.id = ANY(ARRAY(
        SELECT h.id FROM (
            SELECT w.id, w.concurrency_key FROM remuda.jobs_live w
            WHERE w.state = 'available' AND w.queue = $1
              AND w.kind = ANY($2::text[])
              AND (w.target_worker IS NULL OR w.target_worker = $6)
              AND (w.requires IS NULL OR w.requires <@ $7::text[])
              AND (w.expires_at IS NULL OR w.expires_at > statement_timestamp() OR w.started_at IS NOT NULL)
            ORDER BY w.priority, w.run_at, w.id
            -- with a rate per kind or key, look further than the quota: some groups may have
            -- no tokens
            LIMIT CASE WHEN (SELECT key_limit IS NULL AND (rate_limit IS NULL OR rate_per = 'queue') FROM quota)
                       THEN (SELECT n FROM quota)
                       WHEN $9::boolean AND (SELECT key_limit IS NOT NULL FROM quota) THEN NULL
                       ELSE 1000 END) h
        WHERE (SELECT key_limit FROM quota) IS NULL OR h.concurrency_key IS NULL
        LIMIT CASE WHEN (SELECT rate_limit IS NULL OR rate_per = 'queue' FROM quota)
                   THEN (SELECT n FROM quota) ELSE 1000 END))
      AND j.state = 'available'
      AND NOT (SELECT fair FROM quota)
    FOR UPDATE OF j SKIP LOCKED
), fair_full_keys(keys) AS (
    -- with a key limit, the queue's keys at their limit (from the running jobs): a group's
    -- jobs of those keys are passed over, so that its jobs of other keys start
    SELECT ARRAY(SELECT r.concurrency_key FROM remuda.jobs_live r
                 WHERE r.state = 'running' AND r.counted AND r.queue = $1
                   AND r.concurrency_key IS NOT NULL
                   AND (SELECT fair AND key_limit IS NOT NULL FROM quota)
                 GROUP BY r.concurrency_key
                 HAVING count(*) >= (SELECT key_limit FROM quota))
), fair_walk AS (
    -- fair share: the waiting jobs in the order of their start tags (priority first), walked
    -- in jobs_fair_idx as the plain claim walks the queue's index; twice as many with a key
    -- limit (some keys may be full), and further with a rate per kind or key (the first
    -- jobs' kinds or keys may have no tokens left), as `unkeyed` looks
    SELECT j.id, j.kind, j.concurrency_key, j.priority, j.run_at, coalesce(j.group_key, '') AS fgroup,
           j.fair_tag AS tag
    FROM remuda.jobs_live j
    WHERE (SELECT fair AND n > 0 FROM quota)
      AND j.state = 'available' AND j.queue = $1 AND j.fair_tag IS NOT NULL
      AND (j.concurrency_key IS NULL OR j.concurrency_key <> ALL ((SELECT keys FROM fair_full_keys)::text[]))
      AND j.kind = ANY($2::text[])
      AND (j.target_worker IS NULL OR j.target_worker = $6)
      AND (j.requires IS NULL OR j.requires <@ $7::text[])
      AND (j.expires_at IS NULL OR j.expires_at > statement_timestamp() OR j.started_at IS NOT NULL)
    ORDER BY j.priority, j.fair_tag, j.id
    LIMIT (SELECT CASE WHEN rate_limit IS NOT NULL AND rate_per <> 'queue' THEN n + 1000
                       WHEN key_limit IS NOT NULL THEN 2 * n ELSE n END FROM quota)
    FOR UPDATE OF j SKIP LOCKED
), fair_jobs AS (
    -- with their places in the walk's order
    SELECT f.*, row_number() OVER (ORDER BY f.priority, f.tag, f.id) AS place FROM fair_walk f
), fair_key_room AS (
    -- with a key limit, the running jobs of the keys among them
    SELECT k.key, (SELECT count(*) FROM remuda.jobs_live r
                   WHERE r.state = 'running' AND r.counted AND r.queue = $1
                     AND r.concurrency_key = k.key) AS running
    FROM (SELECT DISTINCT concurrency_key AS key FROM fair_jobs WHERE concurrency_key IS NOT NULL) k
    WHERE (SELECT key_limit FROM quota) IS NOT NULL
), fair_open AS (
    -- without a key limit, the jobs as walked; with one, those their keys have room for
    SELECT f.id, f.kind, f.concurrency_key, f.priority, f.run_at, f.fgroup, f.tag, f.place
    FROM fair_jobs f WHERE (SELECT key_limit FROM quota) IS NULL
    UNION ALL
    SELECT o.id, o.kind, o.concurrency_key, o.priority, o.run_at, o.fgroup, o.tag, o.place
    FROM (SELECT f.*, row_number() OVER (PARTITION BY f.concurrency_key ORDER BY f.place)
                        + coalesce(r.running, 0) AS key_round
          FROM fair_jobs f LEFT JOIN fair_key_room r ON r.key = f.concurrency_key
          WHERE (SELECT key_limit FROM quota) IS NOT NULL) o
    WHERE o.concurrency_key IS NULL OR o.key_round <= (SELECT key_limit FROM quota)
), candidates AS (
    SELECT c.*, CASE (SELECT rate_per FROM quota) WHEN 'kind' THEN c.kind
                                                  WHEN 'key' THEN coalesce(c.concurrency_key, '') END AS grp
    FROM (
        -- a key's next job takes the round after its running ones: keys with fewer running
        -- go first, then in turn from the cursor
        SELECT r.id, r.kind, r.concurrency_key, r.priority, r.run_at, (r.round + r.key_running)::float8 AS round,
               r.turn, NULL::text AS fgroup, NULL::float8 AS tag
        FROM (SELECT k.id, k.kind, k.concurrency_key, k.priority, k.run_at, k.key_running, k.turn,
                     row_number() OVER (PARTITION BY k.turn ORDER BY k.priority, k.run_at, k.id) AS round
              FROM keyed k) r
        WHERE r.round + r.key_running <= (SELECT key_limit FROM quota)
        UNION ALL
        SELECT u.id, u.kind, u.concurrency_key, u.priority, u.run_at, 1, 0, NULL, NULL FROM unkeyed u
        UNION ALL
        -- fair share: in the walk's order (priority, then the least tags)
        SELECT f.id, f.kind, f.concurrency_key, f.priority, f.run_at, f.place, 0, f.fgroup, f.tag
        FROM fair_open f) c
), group_tokens AS (
    -- rate per kind or key: the tokens of each group among the candidates
    SELECT g.grp,
           least(q.rate_burst::float8,
                 coalesce(b.tokens, q.rate_burst::float8)
                 + extract(epoch FROM statement_timestamp() - coalesce(b.refreshed_at, statement_timestamp())) * 1000.0
                   * q.rate_limit / q.rate_period_ms) AS tokens
    FROM (SELECT DISTINCT grp FROM candidates WHERE grp IS NOT NULL) g
    CROSS JOIN quota q
    LEFT JOIN remuda.rate_buckets b ON b.scope = jsonb_build_array($1::text, g.grp)::text
    WHERE q.rate_limit IS NOT NULL AND q.rate_per <> 'queue'
), picked AS (
    (SELECT g.id, g.grp, g.turn, g.fgroup, g.round, g.tag, g.priority FROM (
        -- without rates per kind or key, the candidates as they come
        SELECT c.* FROM candidates c
        WHERE (SELECT rate_limit IS NULL OR rate_per = 'queue' FROM quota)
        UNION ALL
        -- with them, as many of each group as its tokens allow
        SELECT r.id, r.kind, r.concurrency_key, r.priority, r.run_at, r.round, r.turn, r.fgroup, r.tag, r.grp FROM (
            SELECT c.*, row_number() OVER (PARTITION BY c.grp ORDER BY c.round, c.priority, c.run_at, c.id) AS nth
            FROM candidates c WHERE (SELECT rate_limit IS NOT NULL AND rate_per <> 'queue' FROM quota)) r
        LEFT JOIN group_tokens t ON t.grp = r.grp
        WHERE t.tokens IS NULL OR r.nth <= floor(t.tokens)) g
    WHERE NOT (SELECT fair AND key_limit IS NULL AND (rate_limit IS NULL OR rate_per = 'queue') FROM quota)
    ORDER BY g.round, g.turn, g.priority, g.run_at, g.id
    LIMIT (SELECT n FROM quota))
    UNION ALL
    -- fair share alone (no key limit, no rate per kind or key): the jobs as walked, whose
    -- walk took n (the candidates' sorts and windows, a third of such a claim, pass by)
    SELECT f.id, NULL, 0, f.fgroup, 0, f.tag, f.priority FROM fair_walk f
    WHERE (SELECT fair AND key_limit IS NULL AND (rate_limit IS NULL OR rate_per = 'queue') FROM quota)
), claimed AS (
    -- the one writer of a start (remuda.start_jobs), flagging them counted as above; the picked
    -- jobs, locked above, are passed by id and found in the function's own snapshot, which
    -- sees the versions locked here (this statement's may be older: one changed after it
    -- began would be passed over, yet charged to its group)
    SELECT s.* FROM remuda.start_jobs(NULL, $5, $2::text[], $3::int[],
                                      (SELECT max_running IS NOT NULL OR key_limit IS NOT NULL
                                              OR cluster_max IS NOT NULL FROM cfg),
                                      ARRAY(SELECT id FROM picked)) s
), tick AS (
    INSERT INTO remuda.rate_buckets AS b (scope, tokens, refreshed_at)
    -- a bucket is written only when it gave tokens: an idle queue's claims write nothing
    -- (the tokens follow from the stored value and its time either way)
    SELECT jsonb_build_array($1::text)::text, bucket.tokens - (SELECT count(*) FROM claimed), statement_timestamp()
    FROM bucket WHERE bucket.tokens IS NOT NULL AND EXISTS (SELECT 1 FROM claimed)
    UNION ALL
    SELECT jsonb_build_array($1::text, t.grp)::text, t.tokens - (SELECT count(*) FROM picked p WHERE p.grp = t.grp), statement_timestamp()
    FROM group_tokens t WHERE EXISTS (SELECT 1 FROM picked p WHERE p.grp = t.grp)
    ON CONFLICT (scope) DO UPDATE SET tokens = EXCLUDED.tokens, refreshed_at = EXCLUDED.refreshed_at
), charged AS (
    -- fair share: each group's virtual time moves on to the tag after the last it started
    -- (where its next job's tag follows on when it has none waiting), and its starts are
    -- counted by the minute (for `remuda queue groups`)
    INSERT INTO remuda.queue_groups AS g (queue, name, vtime, starts, window_at, updated_at)
    SELECT $1, p.fgroup, max(p.tag) + 1 / coalesce(min(s.weight), 1), count(*), statement_timestamp(), statement_timestamp()
    FROM picked p LEFT JOIN remuda.queue_groups s ON s.queue = $1 AND s.name = p.fgroup
    WHERE p.fgroup IS NOT NULL
    GROUP BY p.fgroup
    ON CONFLICT (queue, name) DO UPDATE
    SET vtime = greatest(g.vtime, EXCLUDED.vtime),
        starts = CASE WHEN g.window_at > statement_timestamp() - interval '1 minute' THEN g.starts + EXCLUDED.starts
                      ELSE EXCLUDED.starts END,
        starts_before = CASE WHEN g.window_at > statement_timestamp() - interval '1 minute' THEN g.starts_before
                             WHEN g.window_at > statement_timestamp() - interval '2 minutes' THEN g.starts ELSE 0 END,
        window_at = CASE WHEN g.window_at > statement_timestamp() - interval '1 minute' THEN g.window_at ELSE statement_timestamp() END,
        updated_at = statement_timestamp()
), clocked AS (
    -- and each priority's clock to the last tag it started
    INSERT INTO remuda.fair_clocks AS c (queue, priority, clock)
    SELECT $1, p.priority, max(p.tag) FROM picked p WHERE p.fgroup IS NOT NULL GROUP BY p.priority
    ON CONFLICT (queue, priority) DO UPDATE SET clock = greatest(c.clock, EXCLUDED.clock)
)
SELECT c.id, c.tid, c.kind, c.attempt, c.max_attempts, c.timeout_ms, c.args, c.started_at, c.flags, c.workflow, c.run_at,
       c.traceparent, c.tracestate, c.group_key, c.concurrency_key, p.turn
FROM claimed c JOIN picked p ON p.id = c.id
