-- The nodes of run $1 in topological order, with the nodes each waits for, their error and, for a map, its elements'
-- counts per job state.
SELECT n.node, n.position, n.type, n.deps, n.state::text AS state, n.reason, n.job_id, n.attempt, n.result,
       remuda.wf_error(n.result) AS error, n.child_id, n.started_at, n.finished_at,
       CASE WHEN n.type = 'map' THEN (
           SELECT jsonb_object_agg(c.state, c.n) FROM (
               SELECT j.state::text AS state, count(*) AS n FROM remuda.jobs j
               WHERE j.workflow_id = n.workflow_id AND j.workflow ->> 'node' = n.node
                 AND j.workflow ? 'index'
               GROUP BY j.state) c) END AS children
FROM remuda.workflow_nodes n
WHERE n.workflow_id = $1
ORDER BY n.position
