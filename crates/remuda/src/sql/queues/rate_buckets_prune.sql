-- Delete the rate-limit token buckets that are full again (not refreshed for as long as
-- their queue's rate takes to refill its burst, at least a period: a missing bucket counts
-- as full) or whose queue has no rate limit
-- any more, and those whose scope is not a JSON array (an older format, or written by
-- hand: no claim reads them). Only for the leader $1 at term $2.
WITH lease AS (
    SELECT 1 FROM remuda.leader
    WHERE name = 'default' AND leader_id = $1 AND term = $2 AND expires_at > now()
    FOR SHARE
), deleted AS (
    DELETE FROM remuda.rate_buckets b
    WHERE EXISTS (SELECT 1 FROM lease)
      AND NOT EXISTS (
          SELECT 1 FROM remuda.queues q
          WHERE b.scope LIKE '[%]'
            AND q.name = (CASE WHEN b.scope LIKE '[%]' THEN b.scope::jsonb ->> 0 END)
            AND q.rate_limit IS NOT NULL
            -- (in milliseconds as a float: a long period times a large burst is past any
            -- timestamp)
            AND extract(epoch FROM now() - b.refreshed_at) * 1000.0
                <= q.rate_period_ms * greatest(1.0, coalesce(q.rate_burst, q.rate_limit)::float8 / q.rate_limit))
    RETURNING 1
)
SELECT count(*) AS deleted FROM deleted
