-- Cancel run $1 (see remuda.workflow_cancel): the state it had, NULL when there is no such run.
SELECT remuda.workflow_cancel($1) AS old_state
