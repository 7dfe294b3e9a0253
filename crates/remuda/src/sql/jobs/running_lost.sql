-- Which of the jobs $1 this worker ($2) runs are no longer its own: cancelled, rescued, or
-- otherwise moved on. Found by primary key; the worker stops those executors.
SELECT id FROM remuda.jobs
WHERE id = ANY($1::bigint[])
  AND (state::text <> 'running' OR worker_id IS DISTINCT FROM $2)
