-- The jobs that hold the unique keys $1 (in their unique states): the existing jobs a
-- duplicate enqueue returns.
SELECT unique_key, id FROM remuda.jobs
WHERE unique_key = ANY($1::text[]) AND state = ANY (unique_states)
