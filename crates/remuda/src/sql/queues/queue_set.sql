-- Change the settings of queue $1 and tell the workers (`remuda_queue`). For each setting a
-- flag says whether to change it ($2 paused, $4 max_running, $6 key_limit, $8 rate (and $13
-- what it applies to, $24 its burst), $11 max_depth, $14 $16 $18 $20 the retention of completed, failed,
-- cancelled and expired jobs, $22 fairness: 'group' or NULL) and the value follows (NULL clears a limit, or takes the
-- workers' retention). Returns the settings as they are now.
WITH saved AS (
    INSERT INTO remuda.queues AS q (name, paused, max_running, key_limit, rate_limit, rate_period_ms, max_depth,
                                    rate_per, retain_completed_ms, retain_failed_ms,
                                    retain_cancelled_ms, retain_expired_ms, fairness, rate_burst)
    VALUES ($1, CASE WHEN $2::boolean THEN $3::boolean ELSE false END, CASE WHEN $4::boolean THEN $5::int END,
            CASE WHEN $6::boolean THEN $7::int END, CASE WHEN $8::boolean THEN $9::int END,
            CASE WHEN $8::boolean THEN $10::bigint END, CASE WHEN $11::boolean THEN $12::int END,
            CASE WHEN $8::boolean THEN $13::text ELSE 'queue' END,
            CASE WHEN $14::boolean THEN $15::bigint END, CASE WHEN $16::boolean THEN $17::bigint END,
            CASE WHEN $18::boolean THEN $19::bigint END, CASE WHEN $20::boolean THEN $21::bigint END,
            CASE WHEN $22::boolean THEN $23::text END, CASE WHEN $8::boolean THEN $24::int END)
    ON CONFLICT (name) DO UPDATE
    SET paused = CASE WHEN $2 THEN $3 ELSE q.paused END,
        max_running = CASE WHEN $4 THEN $5 ELSE q.max_running END,
        key_limit = CASE WHEN $6 THEN $7 ELSE q.key_limit END,
        rate_limit = CASE WHEN $8 THEN $9 ELSE q.rate_limit END,
        rate_period_ms = CASE WHEN $8 THEN $10 ELSE q.rate_period_ms END,
        rate_per = CASE WHEN $8 THEN $13 ELSE q.rate_per END,
        rate_burst = CASE WHEN $8 THEN $24 ELSE q.rate_burst END,
        max_depth = CASE WHEN $11 THEN $12 ELSE q.max_depth END,
        retain_completed_ms = CASE WHEN $14 THEN $15 ELSE q.retain_completed_ms END,
        retain_failed_ms = CASE WHEN $16 THEN $17 ELSE q.retain_failed_ms END,
        retain_cancelled_ms = CASE WHEN $18 THEN $19 ELSE q.retain_cancelled_ms END,
        retain_expired_ms = CASE WHEN $20 THEN $21 ELSE q.retain_expired_ms END,
        fairness = CASE WHEN $22 THEN $23 ELSE q.fairness END,
        updated_at = now()
    RETURNING q.*
)
SELECT s.name, s.paused, s.max_running, s.key_limit, s.rate_limit, s.rate_period_ms, s.rate_per, s.rate_burst, s.max_depth,
       s.retain_completed_ms, s.retain_failed_ms, s.retain_cancelled_ms, s.retain_expired_ms, s.fairness, s.updated_at,
       pg_notify('remuda_queue', s.name) IS NULL AS notified
FROM saved s
