-- The end of a node whose start was refused by the database (its job breaks a rule: a queue
-- or kind name, a notify target, args too large): NODE_START_FAILED with the reason.
CREATE OR REPLACE FUNCTION remuda.wf_start_failed(node text, reason text)
RETURNS remuda.wf_done LANGUAGE sql IMMUTABLE AS $$
    SELECT ROW(node, NULL, 'failed', jsonb_build_object('err', jsonb_build_object(
               'code', 'NODE_START_FAILED',
               'message', format('node %s could not start: %s', node, reason), 'data', NULL)),
               NULL, NULL)::remuda.wf_done
$$;
