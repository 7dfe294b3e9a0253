-- Delete the groups of fair queues that hold nothing a new row would not: weight 1, no start
-- for ten minutes, and a virtual time not ahead of its queue's clock (such a group starts again
-- from the clock either way; one ahead still owes the starts it took). Only for the leader $1
-- at term $2.
WITH lease AS (
    SELECT 1 FROM remuda.leader
    WHERE name = 'default' AND leader_id = $1 AND term = $2 AND expires_at > now()
    FOR SHARE
), deleted AS (
    DELETE FROM remuda.queue_groups g
    WHERE EXISTS (SELECT 1 FROM lease)
      AND g.weight = 1
      AND g.updated_at < now() - interval '10 minutes'
      AND g.vtime <= coalesce((SELECT max(c.clock) FROM remuda.fair_clocks c WHERE c.queue = g.queue), 0)
    RETURNING 1
)
SELECT count(*) AS deleted FROM deleted
