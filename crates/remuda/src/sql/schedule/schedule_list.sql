-- Every schedule ($1 NULL), or the one named $1, with all it shows.
SELECT name, kind, args, queue, priority, max_attempts, pattern, tz, catch_up, catch_up_limit,
       overlap, next_run_at, last_run_at, last_job_id, runs, skipped, last_skipped_at,
       last_skip_reason, paused, created_at, updated_at, group_key
FROM remuda.schedules
WHERE $1::text IS NULL OR name = $1
ORDER BY name
