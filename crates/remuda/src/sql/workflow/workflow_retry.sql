-- Retry run $1 (see remuda.workflow_retry): the state it had, NULL when there is no such run.
SELECT remuda.workflow_retry($1) AS old_state
