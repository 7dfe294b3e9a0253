-- remuda schema, version 29: fair share as an ordered walk, the jobs without a group included.
--
-- The fair claim walked every group with jobs waiting (an index descent each, 55-60 ms per
-- 2 000 jobs over 1 000 groups), and looked for the jobs without a group among the first
-- 1 000 waiting jobs only, so behind a grouped backlog they got 2-4 % of the starts where
-- they were owed half. Now each job of a queue with fair share gets its start tag as it
-- becomes available (`fair_tag`: start-time fair queueing, remuda.fair_tag_jobs), the jobs
-- without a group as the group '' like any other, and the claim walks the tags in order
-- (priority first), as the plain claim walks its index. NULL for every job of a queue
-- without fair share: such jobs enter neither index. Built without blocking enqueues and
-- claims (outside a transaction, CONCURRENTLY); the waiting jobs of queues with fair share
-- on are tagged by their first claim after it (a claim that looks through the whole queue,
-- at most a poll interval away).
ALTER TABLE remuda.jobs ADD COLUMN IF NOT EXISTS fair_tag double precision;

-- each priority of a fair queue has its own clock (the tag it last started): a group that
-- comes to wait at a priority starts from that priority's clock, not from one that another
-- priority's starts moved on (`queues.fair_clock`, the one clock until now, is no longer read)
CREATE TABLE IF NOT EXISTS remuda.fair_clocks (
    queue     text NOT NULL,
    priority  integer NOT NULL,
    clock     double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, priority)
);

-- the claim's walk: a queue's tagged jobs, priority first, then by tag
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_fair_idx
    ON remuda.jobs_live (queue, priority, fair_tag, id)
    WHERE state = 'available' AND fair_tag IS NOT NULL;

-- a group's last tag at a priority, where its next job's tag there follows on (the jobs
-- without a group as '': one equality, whose order the planner reads from the index as it
-- cannot after IS NULL)
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_fair_group_idx
    ON remuda.jobs_live (queue, (coalesce(group_key, '')), priority, fair_tag)
    WHERE state = 'available' AND fair_tag IS NOT NULL;

-- the walk of each group's jobs it replaces (a fair claim of an earlier release, while one
-- still runs, finds its rows through the queue's index instead)
DROP INDEX CONCURRENTLY IF EXISTS remuda.jobs_grouped_available_idx;
