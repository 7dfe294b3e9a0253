-- Verification mode's history of runs and nodes, each in the order it was written (node NULL:
-- the run itself; see migration 20).
SELECT run_id, node, from_state, to_state
FROM remuda.run_history
ORDER BY run_id, node NULLS FIRST, seq
