-- Verification mode's history, job by job in the order it was written (see migration 20).
SELECT job_id, attempt, from_state, to_state, worker_id, token
FROM remuda.history
ORDER BY job_id, seq
