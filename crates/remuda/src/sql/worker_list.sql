-- Live workers with the number of jobs each is running.
SELECT w.id, w.name, w.host, w.pid, w.queues, w.kinds, w.concurrency, w.started_at, w.heartbeat_at,
       (SELECT count(*) FROM remuda.jobs j WHERE j.state = 'running' AND j.worker_id = w.id) AS running
FROM remuda.workers w
ORDER BY w.started_at, w.id
