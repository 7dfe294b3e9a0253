-- The ends of nodes that could not start because their queue is full (max_depth).
CREATE OR REPLACE FUNCTION remuda.wf_queue_full(nodes text[], message text)
RETURNS remuda.wf_done[] LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY(SELECT ROW(x, NULL, 'failed', jsonb_build_object('err', jsonb_build_object(
                     'code', 'QUEUE_FULL', 'message', message, 'data', NULL)), NULL, NULL)::remuda.wf_done
                 FROM unnest(nodes) x)
$$;
