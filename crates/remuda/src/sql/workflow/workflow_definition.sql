-- The compiled definition run $1 was started with, and its group (to start a new run of it).
SELECT definition, group_key FROM remuda.workflows WHERE id = $1
