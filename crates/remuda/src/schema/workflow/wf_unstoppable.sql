-- Whether run `w_id` could not even be stopped by a duty (wf_settle_isolated recorded it in
-- remuda.failures): the duties pass over it from then on, so that it cannot fill their
-- batch on every tick and hold back the runs behind it. An operator sees it there.
CREATE OR REPLACE FUNCTION remuda.wf_unstoppable(w_id bigint)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM remuda.failures f
                   WHERE f.source IN ('workflow_timers', 'workflow_repair')
                     AND f.subject = 'run ' || w_id || ' (stop)')
$$;
