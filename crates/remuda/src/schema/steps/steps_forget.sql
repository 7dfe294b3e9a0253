-- The job table's delete trigger: the steps of the jobs a statement deleted go with them
-- (retention, `remuda delete`, a run's pruning, a user's own DELETE). A statement trigger,
-- so one call per statement however many jobs it deleted; when no job has steps at all it
-- reads nothing but the empty table's first page. The steps are found by primary key from
-- an id array, never by a join the planner could make a scan of the whole table.
-- Its setting keeps the planner to the primary key whatever the table held when a session
-- first planned it.
CREATE OR REPLACE FUNCTION remuda.steps_forget() RETURNS trigger LANGUAGE plpgsql
SET enable_seqscan = off AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM remuda.steps) THEN
        DELETE FROM remuda.steps s WHERE s.job_id = ANY (ARRAY(SELECT g.id FROM gone_jobs g));
    END IF;
    RETURN NULL;
END
$$;
