-- Switches verification mode on or off for this database: on, the recorder's trigger is put
-- on remuda.jobs (remuda.history_record); off, it is dropped and the job path is as it was.
-- Returns whether it is on. The history already recorded stays until deleted.
CREATE OR REPLACE FUNCTION remuda.set_history(enabled boolean) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF enabled THEN
        IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'jobs_history'
                       AND tgrelid = 'remuda.jobs'::regclass) THEN
            CREATE TRIGGER jobs_history AFTER INSERT OR UPDATE OR DELETE ON remuda.jobs
                FOR EACH ROW EXECUTE FUNCTION remuda.history_record();
        END IF;
    ELSE
        DROP TRIGGER IF EXISTS jobs_history ON remuda.jobs;
    END IF;
    RETURN enabled;
END
$$;
