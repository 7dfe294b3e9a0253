-- Runs that should have moved and did not (the checker): a running run whose nodes have all
-- ended (a run's end is decided in the same transaction as its last node's), and a sleep or
-- signal timeout due more than $1 milliseconds ago whose node still runs.
SELECT w.id AS run_id, NULL::text AS node, 'running, but every node has ended' AS what
FROM remuda.workflows w
WHERE w.state = 'running'
  AND NOT EXISTS (SELECT 1 FROM remuda.workflow_nodes n
                  WHERE n.workflow_id = w.id AND n.state IN ('pending', 'running'))
UNION ALL
SELECT n.workflow_id, n.node,
       'its timer was due at ' || n.wake_at::text || ' and has not fired'
FROM remuda.workflow_nodes n
JOIN remuda.workflows w ON w.id = n.workflow_id AND w.state = 'running'
WHERE n.state = 'running' AND n.wake_at IS NOT NULL
  AND n.wake_at < now() - make_interval(secs => $1::bigint / 1000.0)
ORDER BY 1, 2
