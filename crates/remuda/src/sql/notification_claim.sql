-- Claim up to $1 due notifications for dispatcher $3: each starts an attempt (counted now, so
-- a sender that dies uses it up) and holds a lease of $2 ms, written as its next_attempt_at:
-- a row neither marked sent nor given a later attempt by then is due again (its sender
-- died between claim and mark), and is sent again with the same id. SKIP LOCKED: dispatchers
-- never wait for one another (see remuda.notifications_due).
UPDATE remuda.notifications n
SET attempts = n.attempts + 1,
    next_attempt_at = now() + $2::bigint * interval '1 millisecond',
    claimed_by = $3
WHERE n.id = ANY(ARRAY(SELECT remuda.notifications_due($1::int)))
RETURNING n.id, n.channel, n.target, n.body::text AS body, n.attempts
