-- Where the rows of jobs `ids` are now (their TIDs, in the same order; NULL for a job that is
-- not there), each found by primary key and locked first, in id order, so that nothing moves
-- them before remuda.write_outcomes writes them there: a row updated meanwhile (a waiter
-- marking it, a cancel) is waited for and its newest version is the one found. Unlocked, a
-- place read before such an update named a version the write no longer sees, and the
-- outcome was dropped as if stale.
-- Its settings leave the planner the primary key, whatever the table held when a connection
-- planned it: planned on a small table, a scan of the table per id would be kept as the table
-- grew. One plan for every call (a generic one): under `plan_cache_mode = auto`, which the
-- general lane's small batches run under, PostgreSQL planned it again at each call (28 µs a
-- call instead of 7).
CREATE OR REPLACE FUNCTION remuda.job_places(ids bigint[])
RETURNS tid[] LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off SET enable_bitmapscan = off SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    PERFORM 1 FROM remuda.jobs_live j WHERE j.id = ANY(ids) ORDER BY j.id FOR NO KEY UPDATE;
    -- (a query of its own: its snapshot is taken after the locks, so it sees the versions
    -- they hold)
    RETURN ARRAY(SELECT (SELECT j.ctid FROM remuda.jobs_live j WHERE j.id = u.id)
                 FROM unnest(ids) WITH ORDINALITY AS u(id, i)
                 ORDER BY u.i);
END
$$;
