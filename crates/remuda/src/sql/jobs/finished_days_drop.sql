-- Drop the oldest day of the finished part whose every job is past its age
-- (remuda.finished_days_drop): final states $1 with their default ages $2 in ms, for the
-- leader $3 at term $4 (NULL: an operator's prune), waiting at most $5 ms for each lock.
-- Returns the day with how many jobs of each state went and how many were kept past it, or
-- the day found busy; nothing when no day is due.
SELECT d.day::text AS day, d.state::text AS state, d.jobs, d.kept, d.busy
FROM remuda.finished_days_drop($1::text[]::remuda.job_state[], $2::bigint[], $3::text, $4::bigint, $5::int) d
