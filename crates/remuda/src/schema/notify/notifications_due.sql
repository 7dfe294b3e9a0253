-- Up to `wanted` due notifications of the `channels` a dispatcher can send, oldest due
-- first, locked (SKIP LOCKED: dispatchers never wait for one another): the dispatcher's
-- claim (notification_claim.sql) takes them. The due
-- rows are walked in notifications_due_idx order and the walk stops at `wanted`; the
-- settings keep the planner from reading every due row into a bitmap and sorting them,
-- which it chose on a table without statistics (20 000 due rows: each claim of 32 read all
-- of them, 110 deliveries/s).
CREATE OR REPLACE FUNCTION remuda.notifications_due(wanted integer, channels text[])
RETURNS SETOF bigint LANGUAGE sql VOLATILE
SET enable_bitmapscan = off SET enable_seqscan = off SET enable_sort = off AS $$
    SELECT d.id FROM remuda.notifications d
    WHERE d.state = 'pending' AND d.next_attempt_at <= now() AND d.channel = ANY(channels)
    ORDER BY d.next_attempt_at, d.id
    LIMIT wanted
    FOR UPDATE SKIP LOCKED
$$;
