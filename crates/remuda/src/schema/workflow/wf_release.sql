-- Release the jobs wf_hold held in run `w_id`: each due again when it was (available if
-- that moment has passed), its start deadline moved by the time it was held, through the
-- finalization seam, which wakes the workers of their queues. Returns how many it released.
CREATE OR REPLACE FUNCTION remuda.wf_release(w_id bigint)
RETURNS integer LANGUAGE sql AS $$
    WITH released AS (
        UPDATE remuda.jobs_live j
        SET state = CASE WHEN (j.workflow ->> 'held_run_at')::timestamptz <= now()
                         THEN 'available' ELSE 'scheduled' END::remuda.job_state,
            run_at = greatest((j.workflow ->> 'held_run_at')::timestamptz, now()),
            expires_at = j.expires_at
                + greatest(now() - COALESCE((j.workflow ->> 'held_at')::timestamptz, now()), interval '0'),
            workflow = j.workflow - 'held_run_at' - 'held_at'
        WHERE j.workflow_id = w_id AND j.state = 'scheduled' AND j.workflow ? 'held_run_at'
        RETURNING j.id, j.queue, j.kind, j.flags, j.counted, j.state, j.attempt
    )
    SELECT COALESCE(remuda.transitioned(array_agg(ROW(r.id, r.queue, r.kind, r.flags, r.counted,
               'scheduled', r.state, r.attempt)::remuda.transition)), 0)
    FROM released r
$$;
