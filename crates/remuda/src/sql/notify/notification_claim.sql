-- Claim up to $1 due notifications of channels $5 for dispatcher $3: each starts an attempt
-- (counted now, so a sender that dies uses it up) and holds a lease of $2 ms, written as its
-- next_attempt_at: a row neither marked sent nor given a later attempt by then is due again
-- (its sender died between claim and mark), and is sent again with the same id. A row that
-- has used up its $4 attempts that way (no outcome was ever written for them: its senders
-- died each time) is dead instead of being sent once more. SKIP LOCKED: dispatchers never
-- wait for one another (see remuda.notifications_due).
WITH due AS (
    SELECT unnest(ARRAY(SELECT remuda.notifications_due($1::int, $5::text[]))) AS id
), exhausted AS (
    UPDATE remuda.notifications n
    SET state = 'dead', finished_at = now(), claimed_by = NULL,
        last_error = 'no outcome was written for its last attempt (its sender died)'
                     || COALESCE('; the error before: ' || n.last_error, '')
    FROM due
    WHERE n.id = due.id AND n.attempts >= $4::int
)
UPDATE remuda.notifications n
SET attempts = n.attempts + 1,
    next_attempt_at = now() + $2::bigint * interval '1 millisecond',
    claimed_by = $3
FROM due
WHERE n.id = due.id AND n.attempts < $4::int
RETURNING n.id, n.channel, n.target, n.body::text AS body, n.attempts
