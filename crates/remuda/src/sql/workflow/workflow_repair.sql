-- The recovery step for up to $1 runs: advancement that was not written (see
-- remuda.workflow_repair).
SELECT remuda.workflow_repair($1) AS repaired
