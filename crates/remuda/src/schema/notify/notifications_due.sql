-- The ids of up to `wanted` due notifications of the `channels` a dispatcher can send,
-- locked: what the claim of workers before notifications_due_places took (kept for them
-- during a rolling upgrade). The rows are those notifications_due_places locks.
CREATE OR REPLACE FUNCTION remuda.notifications_due(wanted integer, channels text[])
RETURNS SETOF bigint LANGUAGE sql VOLATILE
SET enable_seqscan = off AS $$
    SELECT n.id FROM remuda.notifications n
    WHERE n.ctid = ANY(ARRAY(SELECT remuda.notifications_due_places(wanted, channels)))
$$;
