-- Make dead notification $1 due now with its attempts anew, and wake the dispatchers.
-- Returns whether it did, and the state the row was in (NULL: no such notification).
WITH revived AS (
    UPDATE remuda.notifications
    SET state = 'pending', attempts = 0, next_attempt_at = now(), finished_at = NULL
    WHERE id = $1 AND state = 'dead'
    RETURNING id
)
SELECT EXISTS (SELECT 1 FROM revived) AS revived,
       (SELECT state::text FROM remuda.notifications WHERE id = $1) AS state,
       (SELECT pg_notify('remuda_outbox', '') FROM revived) IS NULL AS woke
