-- Cancel job $1 if it has not finished (remuda.cancel_jobs: a running job's worker is told
-- and stops it). Returns the state it had (no row: no such job), whether it was cancelled
-- now (changed), and the run it belongs to when it was left to that run (run_refused);
-- key_taken, false, as for a retry.
SELECT c.old_state::text AS old_state, c.cancelled::int::bigint AS changed,
       c.left_to_run AS run_refused, false AS key_taken
FROM remuda.cancel_jobs(ARRAY[$1::bigint], NULL, false, 'the job was cancelled') c
