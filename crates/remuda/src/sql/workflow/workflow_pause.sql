-- Pause run $1 (see remuda.workflow_pause): the state it had, NULL when there is no such run.
SELECT remuda.workflow_pause($1) AS old_state
