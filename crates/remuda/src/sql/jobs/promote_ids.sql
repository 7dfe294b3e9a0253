-- A worker's own retries and snoozes due before the leader's next promotion ($1: their ids),
-- made available and their queues woken once due (see remuda.promote_jobs): a retry after
-- 100 ms runs after about 100 ms, not at the sweep's next tick.
SELECT remuda.promote_jobs($1::bigint[]) AS promoted
