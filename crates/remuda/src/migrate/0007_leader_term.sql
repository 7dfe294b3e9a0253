-- remuda schema, version 7: the leader lease carries a fencing term, a number that grows at
-- every change of leader. The leader's writes (promotion, death verdicts, rescue, expiry)
-- lock the lease row as they run and check that it still names this leader at this term, so
-- two processes that both believe they lead (one cut off past its lease while the other was
-- elected) cannot both act: the stale one's statements find another term and do nothing, and
-- an election waits for a statement of the old leader in flight.
ALTER TABLE remuda.leader ADD COLUMN term bigint NOT NULL DEFAULT 1;
