-- Switches verification mode on or off for this database: on, the recorders' triggers are put
-- on remuda.jobs (remuda.history_record), remuda.workflows and remuda.workflow_nodes
-- (remuda.history_run_record); off, they are dropped and every path is as it was.
-- Returns whether it is on. The history already recorded stays until deleted.
CREATE OR REPLACE FUNCTION remuda.set_history(enabled boolean) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF enabled THEN
        IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'jobs_history'
                       AND tgrelid = 'remuda.jobs'::regclass) THEN
            CREATE TRIGGER jobs_history AFTER INSERT OR UPDATE OR DELETE ON remuda.jobs
                FOR EACH ROW EXECUTE FUNCTION remuda.history_record();
            CREATE TRIGGER workflows_history AFTER INSERT OR UPDATE OR DELETE ON remuda.workflows
                FOR EACH ROW EXECUTE FUNCTION remuda.history_run_record();
            CREATE TRIGGER workflow_nodes_history AFTER INSERT OR UPDATE OR DELETE ON remuda.workflow_nodes
                FOR EACH ROW EXECUTE FUNCTION remuda.history_run_record();
        END IF;
    ELSE
        DROP TRIGGER IF EXISTS jobs_history ON remuda.jobs;
        DROP TRIGGER IF EXISTS workflows_history ON remuda.workflows;
        DROP TRIGGER IF EXISTS workflow_nodes_history ON remuda.workflow_nodes;
    END IF;
    RETURN enabled;
END
$$;
