-- The compiled definition run $1 was started with (to start a new run of it).
SELECT definition FROM remuda.workflows WHERE id = $1
