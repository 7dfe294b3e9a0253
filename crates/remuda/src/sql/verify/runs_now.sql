-- Each run's state now and each node's (node NULL: the run): the checker's view of the tables.
SELECT id AS run_id, NULL::text AS node, state::text AS state FROM remuda.workflows
UNION ALL
SELECT workflow_id, node, state::text FROM remuda.workflow_nodes
