-- A batch that has just become available (full, or closed by an item it had no room for):
-- it waits with its fair-share tag where the queue has fair share (once the function is
-- there: an upgrade applies this one before the migration it needs), and its queue's
-- workers are woken.
CREATE OR REPLACE FUNCTION remuda.batch_ready(job bigint, queue text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF to_regprocedure('remuda.fair_tag_jobs(bigint[])') IS NOT NULL THEN
        PERFORM remuda.fair_tag_jobs(ARRAY[job]);
    END IF;
    PERFORM pg_notify('remuda_insert', batch_ready.queue);
END
$$;
