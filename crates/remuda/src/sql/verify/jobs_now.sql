-- Each job's state now, and for a running one whether its worker has been silent past its own
-- rescue_after plus $1 milliseconds of slack (or is gone): the checker's view of the tables.
-- Silence counts from the moment the server last began to take writes at the earliest, as
-- the rescuer counts it (mark_dead.sql).
SELECT j.id, j.state::text AS state,
       j.state::text = 'running' AND NOT EXISTS (
           SELECT 1 FROM remuda.workers w
           WHERE w.id = j.worker_id
             AND w.heartbeat_at > '-infinity'
             AND greatest(w.heartbeat_at, pg_postmaster_start_time(),
                          (SELECT max(a.backend_start) FROM pg_stat_activity a
                           WHERE a.backend_type = 'walwriter'))
                 > now() - (w.rescue_after_ms + $1::bigint) * interval '1 millisecond'
       ) AS abandoned
FROM remuda.jobs j
