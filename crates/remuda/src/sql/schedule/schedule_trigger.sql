-- Fire schedule $1 now, outside its pattern: a job with fire_at = now(), counted as a run;
-- next_run_at is left as it is. Returns the job's id (none when there is no such schedule).
WITH s AS (
    SELECT name, kind, args, queue, priority, max_attempts, group_key
    FROM remuda.schedules WHERE name = $1
    FOR UPDATE
), fired AS (
    INSERT INTO remuda.jobs_live (kind, args, queue, priority, max_attempts, group_key, schedule, fire_at)
    SELECT kind, args, queue, priority, max_attempts, group_key, name, now() FROM s
    ON CONFLICT (schedule, fire_at) WHERE schedule IS NOT NULL DO NOTHING
    RETURNING id, fire_at
), counted AS (
    UPDATE remuda.schedules t
    SET runs = t.runs + 1, last_run_at = f.fire_at, last_job_id = f.id
    FROM fired f
    WHERE t.name = $1
    RETURNING 1
)
SELECT f.id, (SELECT count(*) FROM counted) AS counted FROM fired f
