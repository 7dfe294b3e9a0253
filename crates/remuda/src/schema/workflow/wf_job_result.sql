-- A final job's tagged result: its own, or one made from its last error (a job rescued on
-- its last attempt, or expired, has none).
CREATE OR REPLACE FUNCTION remuda.wf_job_result(s remuda.job_state, result jsonb, errors jsonb)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT COALESCE(result, CASE WHEN s = 'completed' THEN '{"ok": null}'::jsonb
        ELSE jsonb_build_object('err', jsonb_build_object(
            'code', COALESCE(errors -> -1 ->> 'code', upper(s::text)),
            'message', COALESCE(errors -> -1 ->> 'message', 'the job ended ' || s::text),
            'data', errors -> -1 -> 'data')) END)
$$;
