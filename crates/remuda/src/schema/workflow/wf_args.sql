-- A node's args: its own (any JSON), or with args_from (then an object) each of those names
-- set to the upstream's tagged result ("$input": the run's input).
CREATE OR REPLACE FUNCTION remuda.wf_args(w_id bigint, input jsonb, spec jsonb)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN spec ? 'args_from' THEN COALESCE(spec -> 'args', '{}'::jsonb) || COALESCE((
        SELECT jsonb_object_agg(a.key, CASE WHEN a.value #>> '{}' = '$input' THEN input
            ELSE (SELECT n.result FROM remuda.workflow_nodes n
                  WHERE n.workflow_id = w_id AND n.node = a.value #>> '{}') END)
        FROM jsonb_each(spec -> 'args_from') a), '{}'::jsonb)
        ELSE COALESCE(spec -> 'args', '{}'::jsonb) END
$$;
