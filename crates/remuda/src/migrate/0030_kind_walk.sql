-- remuda schema, version 30: the waiting jobs of a queue by kind, for a claim whose kinds
-- are not at the head of the queue.
--
-- The plain claim walks a queue's waiting jobs in order (jobs_available_idx) and passes over
-- those of kinds the worker does not run: behind 100 000 waiting jobs of a kind no worker
-- runs (another language's worker is away, a kind retired), every claim read all of them
-- first, and the drain behind them ran at a third of its speed. A worker that finds the head
-- of its queue mostly of other kinds walks this index instead, its kinds one by one in the
-- same order (see claim.sql). Built without blocking enqueues and claims (outside a
-- transaction, CONCURRENTLY); a claim's started rows never enter it.
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_available_kind_idx
    ON remuda.jobs_live (queue, kind, priority, run_at, id)
    WHERE state = 'available';
