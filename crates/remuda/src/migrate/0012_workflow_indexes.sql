-- remuda schema, version 12: the job table's index for workflows, built without blocking
-- enqueues and claims (outside a transaction, CONCURRENTLY).
--
-- A run's jobs: a map's elements in order, the jobs a cancel stops, what retention keeps.
-- Plain jobs (no workflow) are not in it and pay nothing for it.
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_workflow_idx
    ON remuda.jobs (workflow_id, (workflow ->> 'node'), ((workflow ->> 'index')::integer))
    WHERE workflow_id IS NOT NULL;
--
-- The running nodes, for the recovery duty's look at their jobs.
CREATE INDEX CONCURRENTLY IF NOT EXISTS workflow_nodes_running_idx
    ON remuda.workflow_nodes (workflow_id) WHERE state = 'running';
