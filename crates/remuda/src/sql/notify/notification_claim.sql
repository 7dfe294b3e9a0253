-- Claim up to $1 due notifications of channels $5 for dispatcher $3: each starts an attempt
-- (counted now, so a sender that dies uses it up) and holds a lease of $2 ms, written as its
-- next_attempt_at: a row neither marked sent nor given a later attempt by then is due again
-- (its sender died between claim and mark), and is sent again with the same id. A row that
-- has used up its $4 attempts that way (no outcome was ever written for them: its senders
-- died each time) is dead instead of being sent once more. SKIP LOCKED: dispatchers never
-- wait for one another (see remuda.notifications_due_places). The rows are written where the
-- walk locked them (a TID scan of the places), under sql::CLAIM_PLAN: no plan
-- that reads the outbox, whatever it held when the connection planned the statement.
WITH due AS MATERIALIZED (
    SELECT ARRAY(SELECT remuda.notifications_due_places($1::int, $5::text[])) AS places
), exhausted AS (
    UPDATE remuda.notifications n
    SET state = 'dead', finished_at = now(), claimed_by = NULL,
        last_error = 'no outcome was written for its last attempt (its sender died)'
                     || COALESCE('; the error before: ' || n.last_error, '')
    WHERE n.ctid = ANY((SELECT d.places FROM due d)::tid[]) AND n.attempts >= $4::int
)
UPDATE remuda.notifications n
SET attempts = n.attempts + 1,
    next_attempt_at = now() + $2::bigint * interval '1 millisecond',
    claimed_by = $3
WHERE n.ctid = ANY((SELECT d.places FROM due d)::tid[]) AND n.attempts < $4::int
RETURNING n.id, n.channel, n.target, n.body::text AS body, n.attempts
