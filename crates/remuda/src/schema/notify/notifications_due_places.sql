-- The places (TIDs) of up to `wanted` due notifications of the `channels` a dispatcher can
-- send, oldest due first, locked (SKIP LOCKED: dispatchers never wait for one another): the
-- dispatcher's claim (notification_claim.sql) writes them by place, one TID lookup each. The
-- due rows are walked in notifications_due_idx order and the walk stops at `wanted`; the
-- settings keep the planner from reading every due row into a bitmap and sorting them, which
-- it chose on a table without statistics (20 000 due rows: each claim of 32 read all of them,
-- 110 deliveries/s). The locked rows' places cannot move before the claim writes them.
-- Found again by id, the claim was planned on the empty outbox of a new database as a scan
-- of the whole outbox joined to the due ids, kept as the outbox grew: 5.5 ms a claim of 32
-- with 20 000 rows waiting, 4 000 deliveries/s.
CREATE OR REPLACE FUNCTION remuda.notifications_due_places(wanted integer, channels text[])
RETURNS SETOF tid LANGUAGE sql VOLATILE
SET enable_bitmapscan = off SET enable_seqscan = off SET enable_sort = off AS $$
    SELECT d.ctid FROM remuda.notifications d
    WHERE d.state = 'pending' AND d.next_attempt_at <= now() AND d.channel = ANY(channels)
    ORDER BY d.next_attempt_at, d.id
    LIMIT wanted
    FOR UPDATE SKIP LOCKED
$$;
