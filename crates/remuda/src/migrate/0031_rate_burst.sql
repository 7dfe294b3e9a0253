-- remuda schema, version 31: a rate limit's burst.
--
-- A queue's rate limit is a token bucket refilled at rate_limit tokens a rate period; it held
-- rate_limit tokens at most, so a queue idle for a period started rate_limit jobs at once. A
-- burst sets how many tokens it holds instead (the starts allowed at once; 1 spreads the
-- starts evenly over the period, as Inngest's throttle does by default); NULL keeps
-- rate_limit. A setting of the queue, read by the limited claims only: no job carries it.
ALTER TABLE remuda.queues ADD COLUMN IF NOT EXISTS rate_burst int;
ALTER TABLE remuda.queues DROP CONSTRAINT IF EXISTS queues_rate_burst_check;
ALTER TABLE remuda.queues ADD CONSTRAINT queues_rate_burst_check CHECK (rate_burst > 0);
