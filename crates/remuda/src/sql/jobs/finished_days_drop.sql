-- Drop the finished part's days whose every job is past its age (remuda.finished_days_drop):
-- final states $1 with their default ages $2 in ms, for the leader $3 at term $4 (NULL: an
-- operator's prune), waiting at most $5 ms for the finished part's lock. Returns each day
-- dropped with how many jobs of each state went and how many were kept past it.
SELECT d.day::text AS day, d.state::text AS state, d.jobs, d.kept
FROM remuda.finished_days_drop($1::text[]::remuda.job_state[], $2::bigint[], $3::text, $4::bigint, $5::int) d
