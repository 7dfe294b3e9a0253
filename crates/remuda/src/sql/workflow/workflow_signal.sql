-- Deliver signal $2 with payload $3 to run $1: the nodes it completed, -1 when the run has
-- ended, NULL when there is no such run.
SELECT remuda.workflow_signal($1, $2, $3::jsonb) AS completed
