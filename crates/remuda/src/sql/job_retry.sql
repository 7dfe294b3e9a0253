-- Run a job that is not running again, now, through the finalization seam (which wakes its
-- queue): a final job gets one more attempt if it used them
-- all (its error history is kept), a scheduled one stops waiting. Returns the state it had
-- and whether it was made available now (changed). A job never claimed keeps max_attempts NULL
-- (the worker's default for its kind); an expired job's deadline is lifted, or it would expire again.
-- The last run's start and worker are cleared (its errors keep who ran each attempt). A
-- completed job is run again only when $2 (force) is true: its result is then dropped. A
-- workflow's job is left to its run (remuda.of_run): run_refused names the run.
WITH target AS (
    SELECT id, state AS old_state, workflow_id FROM remuda.jobs WHERE id = $1 FOR UPDATE
), retried AS (
    UPDATE remuda.jobs j
    SET state = 'available', run_at = now(), started_at = NULL, finished_at = NULL, result = NULL,
        worker_id = NULL, expires_at = NULL, lost_streak = 0,
        max_attempts = CASE WHEN j.max_attempts IS NULL THEN NULL
                            ELSE GREATEST(j.max_attempts, j.attempt + 1) END
    FROM target t
    WHERE j.id = t.id AND t.old_state <> 'running' AND t.old_state <> 'available'
      AND (t.old_state <> 'completed' OR $2::bool) AND remuda.of_run(t.workflow_id, NULL)
    RETURNING j.id, j.queue, j.kind, j.flags, j.counted, t.old_state, j.attempt
)
SELECT t.old_state::text AS old_state,
       (SELECT count(*) FROM retried) AS changed,
       CASE WHEN NOT remuda.of_run(t.workflow_id, NULL) THEN t.workflow_id END AS run_refused,
       (SELECT remuda.transitioned(array_agg(ROW(r.id, r.queue, r.kind, r.flags, r.counted,
                                                 r.old_state, 'available', r.attempt)::remuda.transition))
        FROM retried r) AS seam
FROM target t
