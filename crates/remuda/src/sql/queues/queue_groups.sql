-- The groups of queue $1 that have a weight set, jobs waiting or running, or starts in the last
-- two minutes: weight, running and waiting (available) jobs, and starts over the last minute
-- (this minute's count plus the part of the previous minute's still within it). The group ''
-- is the jobs without a group.
WITH stored AS (
    SELECT g.name, g.weight,
           CASE WHEN g.window_at > now() - interval '1 minute'
                THEN g.starts + g.starts_before * (60 - extract(epoch FROM now() - g.window_at)) / 60
                WHEN g.window_at > now() - interval '2 minutes'
                THEN g.starts * (120 - extract(epoch FROM now() - g.window_at)) / 60
                ELSE 0 END AS recent
    FROM remuda.queue_groups g WHERE g.queue = $1
), waiting AS (
    SELECT coalesce(j.group_key, '') AS name, count(*) AS n
    FROM remuda.jobs_live j WHERE j.state = 'available' AND j.queue = $1 GROUP BY 1
), running AS (
    SELECT coalesce(j.group_key, '') AS name, count(*) AS n
    FROM remuda.jobs_live j WHERE j.state = 'running' AND j.queue = $1 GROUP BY 1
), names AS (
    SELECT name FROM stored WHERE weight <> 1 OR recent > 0
    UNION SELECT name FROM waiting
    UNION SELECT name FROM running
)
SELECT n.name, coalesce(s.weight, 1) AS weight, coalesce(r.n, 0) AS running, coalesce(w.n, 0) AS waiting,
       round(coalesce(s.recent, 0))::bigint AS starts_last_minute
FROM names n
LEFT JOIN stored s ON s.name = n.name
LEFT JOIN waiting w ON w.name = n.name
LEFT JOIN running r ON r.name = n.name
ORDER BY n.name
