-- Forget the dead workers $1 whose jobs have all been rescued (a job skipped because it was
-- locked keeps its worker's row until the next round rescues it).
DELETE FROM remuda.workers w
WHERE w.id = ANY($1::text[])
  AND w.heartbeat_at = '-infinity'  -- not one that has registered again since
  AND NOT EXISTS (SELECT 1 FROM remuda.jobs_live j WHERE j.state = 'running' AND j.worker_id = w.id)
