-- Mark notifications $1 delivered. Returns each one's delivery latency: from the commit of
-- the final state it announces (the row's creation) to now, in milliseconds. A row another
-- dispatcher claimed again after this one's lease ran out is marked too: it was delivered.
-- `state::text` on purpose, under sql::NOTIFICATION_SENT_PLAN (no sequential scan): compared
-- as the enum, the state implies notifications_due_idx's predicate, and a plan made on the
-- new database's empty outbox walked that whole index for every mark, filtering each pending
-- row by the ids (3.4 ms a mark of 32 with 15 000 rows pending). As text, only the primary
-- key can find the rows.
UPDATE remuda.notifications
SET state = 'sent', sent_at = now(), finished_at = now(), claimed_by = NULL
WHERE id = ANY($1::bigint[]) AND state::text = 'pending'
RETURNING (extract(epoch FROM now() - created_at) * 1000)::float8 AS latency_ms
