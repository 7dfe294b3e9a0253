-- Hold the jobs of run `w_id` (paused) that have not started: available or scheduled, they
-- become scheduled at the end of time (remuda.wf_held_at), so that no claim and no
-- promotion takes them; the moment each was due, and the moment it was held, are kept in its
-- `workflow` document (`held_run_at`, `held_at`) for wf_release, which moves its start
-- deadline (`expires_at`) by the time it was held: the deadline waits with the job, and the
-- expirer passes held jobs over (expire.sql). A job a worker claimed already runs to its
-- end. Returns how many it held.
CREATE OR REPLACE FUNCTION remuda.wf_hold(w_id bigint)
RETURNS bigint LANGUAGE sql AS $$
    WITH held AS (
        UPDATE remuda.jobs_live j
        SET state = 'scheduled', run_at = remuda.wf_held_at(),
            workflow = j.workflow || jsonb_build_object('held_run_at', j.run_at, 'held_at', now())
        WHERE j.workflow_id = w_id AND j.state IN ('available', 'scheduled')
          AND NOT j.workflow ? 'held_run_at'
        RETURNING 1
    )
    SELECT count(*) FROM held
$$;
