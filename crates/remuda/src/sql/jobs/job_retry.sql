-- Run job $1 again, now, if it is not running or waiting to run (remuda.revive_jobs): a
-- final job gets one more attempt if it used them all (its error history is kept), a
-- scheduled one stops waiting; a completed one only when $2 (force) is true (its result is
-- then dropped). Its recorded steps are kept (the new attempt resumes after the last one)
-- unless $3 (fresh) is true: then they are dropped with the retry, in the same statement,
-- and it runs again from its first step. Returns the state it had (no row: no such job),
-- whether it was made available now (changed), the run it was left to (run_refused: a
-- workflow's job runs again through its run) and whether another job holds its unique key
-- now (key_taken).
WITH revived AS (
    SELECT r.old_state, r.revived, r.left_to_run, r.key_taken
    FROM remuda.revive_jobs(
        ARRAY[$1::bigint], NULL,
        CASE WHEN $2::bool THEN '{scheduled,failed,cancelled,expired,completed}'
             ELSE '{scheduled,failed,cancelled,expired}' END::remuda.job_state[],
        false, NULL, false) r
), forgotten AS (
    DELETE FROM remuda.steps s
    WHERE $3::bool AND s.job_id = $1 AND (SELECT bool_or(v.revived) FROM revived v)
)
SELECT v.old_state::text AS old_state, v.revived::int::bigint AS changed,
       v.left_to_run AS run_refused, v.key_taken
FROM revived v
