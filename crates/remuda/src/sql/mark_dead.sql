-- Declare dead the workers silent for longer than their own rescue_after (or already marked:
-- heartbeat_at = '-infinity'), and return them with the moment of the verdict. The mark is
-- what fences them: a dead worker's heartbeat (worker_heartbeat.sql) no longer succeeds, so it
-- learns it was declared dead and stops its jobs before registering again. Cheap (the workers
-- table is small), so the rescuer runs it every round and scans jobs only when it finds some.
UPDATE remuda.workers
SET heartbeat_at = '-infinity'
WHERE heartbeat_at < now() - rescue_after_ms * interval '1 millisecond'
RETURNING id, crash_loop_limit, now() AS marked_at
