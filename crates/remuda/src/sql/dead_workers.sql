-- Workers silent for longer than their own rescue_after: presumed dead. Cheap (the workers
-- table is small), so the rescuer runs it every round and scans jobs only when it finds some.
SELECT id FROM remuda.workers
WHERE heartbeat_at < now() - rescue_after_ms * interval '1 millisecond'
