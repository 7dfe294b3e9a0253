-- Resume run $1 (see remuda.workflow_resume): the state it had, NULL when there is no such run.
SELECT remuda.workflow_resume($1) AS old_state
