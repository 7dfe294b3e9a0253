-- Fire locked schedules: insert a job per fire time ($5 schedule names, $6 fire times;
-- a time already fired is not inserted again) and move each schedule $1 from next_run_at $2
-- (only if it still holds it) to $3, adding $4 skipped fire times (reason in the same
-- position of $7, NULL when none). Returns how many jobs were inserted and how many
-- schedules moved: fewer moved than given means the caller must roll back.
WITH fired AS (
    INSERT INTO remuda.jobs_live (kind, args, queue, priority, max_attempts, group_key, schedule, fire_at)
    SELECT s.kind, s.args, s.queue, s.priority, s.max_attempts, s.group_key, s.name, f.fire_at
    FROM unnest($5::text[], $6::timestamptz[]) AS f(name, fire_at)
    JOIN remuda.schedules s ON s.name = f.name
    ON CONFLICT (schedule, fire_at) WHERE schedule IS NOT NULL DO NOTHING
    RETURNING id, schedule, fire_at
), latest AS (
    SELECT DISTINCT ON (schedule) schedule, id, fire_at,
           count(*) OVER (PARTITION BY schedule) AS n
    FROM fired
    ORDER BY schedule, fire_at DESC
), moved AS (
    UPDATE remuda.schedules s
    SET next_run_at = d.new_next,
        runs = s.runs + COALESCE(l.n, 0),
        last_run_at = COALESCE(l.fire_at, s.last_run_at),
        last_job_id = COALESCE(l.id, s.last_job_id),
        skipped = s.skipped + d.skipped,
        last_skipped_at = CASE WHEN d.skipped > 0 THEN now() ELSE s.last_skipped_at END,
        last_skip_reason = COALESCE(d.reason, s.last_skip_reason)
    FROM unnest($1::text[], $2::timestamptz[], $3::timestamptz[], $4::bigint[], $7::text[])
             AS d(name, old_next, new_next, skipped, reason)
    LEFT JOIN latest l ON l.schedule = d.name
    WHERE s.name = d.name AND s.next_run_at = d.old_next
    RETURNING s.name
)
SELECT (SELECT count(*) FROM fired) AS fired, (SELECT count(*) FROM moved) AS moved
