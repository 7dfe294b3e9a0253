-- The ids of the jobs of kind $1 that hold key $2, newest first, at most $3: live jobs
-- holding it as their unique, debounce or throttle key (as given, or with a unique period's
-- suffix `@n`) or as their batch key (stored `batch:` and the key), and finished jobs that
-- hold it still (a unique key kept past the end of its job: remuda.unique_finished). A
-- debounced, throttled or batched job holds its key only while it waits. Each part reads the
-- kind's entries of its key index (kind, scope, key: a key may be held in any scope), for an
-- operator's lookup; job_get.sql reads the jobs.
SELECT id FROM (
    SELECT j.id FROM remuda.jobs_live j
    WHERE j.kind = $1 AND j.unique_key IS NOT NULL AND j.state = ANY (j.unique_states)
      AND (j.unique_key = $2::text OR j.unique_key = 'batch:' || $2::text
           OR (starts_with(j.unique_key, $2::text || '@')
               AND substr(j.unique_key, length($2::text) + 2) ~ '^[0-9]+$'))
    UNION
    SELECT u.job_id FROM remuda.unique_finished u
    WHERE u.kind = $1 AND (u.key = $2::text
                           OR (starts_with(u.key, $2::text || '@')
                               AND substr(u.key, length($2::text) + 2) ~ '^[0-9]+$'))
) held
ORDER BY id DESC
LIMIT $3
