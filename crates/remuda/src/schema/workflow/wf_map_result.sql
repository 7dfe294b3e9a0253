-- The result of map node `node_id`, tagged as every node's is: `{"ok": [each element's
-- value, in order]}` when every element completed; else `{"err": {"code": the first failed
-- element's code, "message": how many failed and the first one's message, "data": [each
-- element's tagged result, in order]}}`, so nothing an element returned is lost.
CREATE OR REPLACE FUNCTION remuda.wf_map_result(w_id bigint, node_id text)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    WITH elements AS (
        SELECT (j.workflow ->> 'index')::integer AS i,
               remuda.wf_job_result(j.state, j.result, j.errors) AS r
        FROM remuda.jobs j
        WHERE j.workflow_id = w_id AND j.workflow ->> 'node' = node_id AND j.workflow ? 'index'
    ), first_failed AS (
        SELECT e.i, e.r -> 'err' AS err FROM elements e WHERE e.r ? 'err' ORDER BY e.i LIMIT 1
    )
    SELECT CASE
        WHEN NOT EXISTS (SELECT 1 FROM first_failed) THEN jsonb_build_object('ok',
            COALESCE((SELECT jsonb_agg(e.r -> 'ok' ORDER BY e.i) FROM elements e), '[]'::jsonb))
        ELSE (SELECT jsonb_build_object('err', jsonb_build_object(
                  'code', f.err ->> 'code',
                  'message', format('%s of %s elements failed; element %s: %s',
                                    (SELECT count(*) FROM elements e WHERE e.r ? 'err'),
                                    (SELECT count(*) FROM elements), f.i, f.err ->> 'message'),
                  'data', (SELECT jsonb_agg(e.r ORDER BY e.i) FROM elements e)))
              FROM first_failed f)
    END
$$;
