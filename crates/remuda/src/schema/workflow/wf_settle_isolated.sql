-- wf_settle for a duty (`source`: timers, repair) that advances many runs in one
-- statement, run `w_id` (locked) in a subtransaction of its own: a run that cannot advance
-- for a reason that is not a conflict (remuda.is_transient) is set aside, so that it
-- leaves the duty's batch and holds back no other run. It fails with ADVANCE_FAILED (its
-- jobs cancelled, as a cancel does) and the failure is kept in remuda.failures; if even
-- stopping it fails, that is recorded too ('run N (stop)') and the duties pass over the run
-- from then on (wf_unstoppable).
CREATE OR REPLACE FUNCTION remuda.wf_settle_isolated(source text, w_id bigint, finished remuda.wf_done[], candidates text[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    err_state text;
    err_message text;
BEGIN
    BEGIN
        PERFORM remuda.wf_settle(w_id, finished, candidates);
        RETURN;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS err_state = RETURNED_SQLSTATE, err_message = MESSAGE_TEXT;
        IF remuda.is_transient(err_state) THEN RAISE; END IF;
    END;
    PERFORM remuda.record_failure(source, 'run ' || w_id, err_state, err_message);
    BEGIN
        PERFORM remuda.wf_stop(w_id, 'failed', jsonb_build_object('code', 'ADVANCE_FAILED',
            'message', format('the run could not advance (%s): %s', source, err_message)));
    EXCEPTION WHEN OTHERS THEN
        IF remuda.is_transient(SQLSTATE) THEN RAISE; END IF;
        PERFORM remuda.record_failure(source, 'run ' || w_id || ' (stop)', SQLSTATE, SQLERRM);
    END;
END
$$;
