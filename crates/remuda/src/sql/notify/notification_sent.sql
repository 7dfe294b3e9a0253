-- Mark notifications $1 delivered. Returns each one's delivery latency: from the commit of
-- the final state it announces (the row's creation) to now, in milliseconds. A row another
-- dispatcher claimed again after this one's lease ran out is marked too: it was delivered.
UPDATE remuda.notifications
SET state = 'sent', sent_at = now(), finished_at = now(), claimed_by = NULL
WHERE id = ANY($1::bigint[]) AND state = 'pending'
RETURNING (extract(epoch FROM now() - created_at) * 1000)::float8 AS latency_ms
