-- How many jobs in final state $1 prune.sql would delete with default age $2 ms (a dry run).
SELECT count(*) AS doomed
FROM remuda.jobs j
LEFT JOIN remuda.queues q ON q.name = j.queue
WHERE j.state IN ('completed', 'failed', 'cancelled', 'expired')
  AND j.state = $1::text::remuda.job_state
  AND remuda.retention_ms(j.state, q, $2) >= 0
  AND j.finished_at < now() - make_interval(secs => remuda.retention_ms(j.state, q, $2) / 1000.0)
  AND (j.workflow_id IS NULL
       OR NOT EXISTS (SELECT 1 FROM remuda.workflows w WHERE w.id = j.workflow_id))
