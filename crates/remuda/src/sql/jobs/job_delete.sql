-- Delete each of the jobs $1 that is not running (a running job is cancelled first, so its
-- worker stops it); a workflow node's job is kept while its run exists (runs are deleted with
-- their jobs by retention). Rows another transaction holds are left. Returns the ids deleted.
-- A unique job's key is free once it is gone.
WITH target AS (
    SELECT x.id FROM remuda.jobs x
    WHERE x.id = ANY($1::bigint[]) AND x.state <> 'running' AND x.workflow_id IS NULL
    FOR UPDATE SKIP LOCKED
), deleted AS (
    DELETE FROM remuda.jobs j USING target t WHERE j.id = t.id RETURNING j.id
)
SELECT ARRAY(SELECT id FROM deleted) AS deleted
