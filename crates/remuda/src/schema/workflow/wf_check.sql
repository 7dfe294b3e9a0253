-- Refuse a compiled definition that could not run as written (SQLSTATE 22023, the reason
-- and the node named): what `remuda workflow compile` checks, again for definitions that
-- reach remuda.start_workflow from any language. Node ids unique; each type known; deps
-- naming earlier nodes (the compiled order is topological, so no cycle); dependents the
-- nodes that depend on it; what a node reads (wf_reads) and waits for (join_on) among its
-- deps; a task's or map's kind and queue valid names; the notify target valid; the same
-- for each inline sub-workflow; `output` and `success` naming its nodes. `at` prefixes the
-- messages ('' at the top).
CREATE OR REPLACE FUNCTION remuda.wf_check(def jsonb, at text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    hint CONSTANT text := 'pass what `remuda workflow compile SPEC` prints for the spec file (TOML or JSON)';
    name text := at || 'workflow ' || COALESCE(def ->> 'name', '?');
    node jsonb;
    pos integer;
    id text;
    seen text[] := '{}';
    ids text[];
    problem text;
BEGIN
    IF jsonb_typeof(def) IS DISTINCT FROM 'object' OR jsonb_typeof(def -> 'name') IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION '%the workflow definition must be a JSON object with a name', at
            USING ERRCODE = 'invalid_parameter_value', HINT = hint;
    END IF;
    IF jsonb_typeof(def -> 'nodes') IS DISTINCT FROM 'array' OR jsonb_array_length(def -> 'nodes') = 0
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(def -> 'nodes') n
                  WHERE jsonb_typeof(n -> 'id') IS DISTINCT FROM 'string'
                     OR jsonb_typeof(n -> 'type') IS DISTINCT FROM 'string'
                     OR jsonb_typeof(n -> 'deps') IS DISTINCT FROM 'array'
                     OR jsonb_typeof(n -> 'dependents') IS DISTINCT FROM 'array') THEN
        RAISE EXCEPTION '%: the definition is not compiled (its nodes must be a list, each with id, type, deps and dependents)',
            name USING ERRCODE = 'invalid_parameter_value', HINT = hint;
    END IF;
    ids := ARRAY(SELECT n ->> 'id' FROM jsonb_array_elements(def -> 'nodes') n);
    FOR node, pos IN SELECT n, i FROM jsonb_array_elements(def -> 'nodes') WITH ORDINALITY AS e(n, i) LOOP
        id := node ->> 'id';
        problem := CASE
            WHEN id = '' OR id = ANY(seen) THEN 'the node id is empty or used twice'
            WHEN node ->> 'type' NOT IN ('task', 'map', 'sleep', 'signal', 'workflow') THEN
                format('type %s is not task, map, sleep, signal or workflow', node ->> 'type')
            WHEN EXISTS (SELECT 1 FROM jsonb_array_elements_text(node -> 'deps') d WHERE d <> ALL(seen)) THEN
                format('deps %s name a node that does not exist or does not come before it (a cycle)', node -> 'deps')
            WHEN ARRAY(SELECT d FROM jsonb_array_elements_text(node -> 'dependents') d ORDER BY d)
                 IS DISTINCT FROM ARRAY(SELECT o ->> 'id' FROM jsonb_array_elements(def -> 'nodes') o
                                        WHERE o -> 'deps' ? id ORDER BY o ->> 'id') THEN
                format('dependents %s are not the nodes that depend on it', node -> 'dependents')
            WHEN EXISTS (SELECT 1 FROM unnest(remuda.wf_reads(node)) r WHERE NOT node -> 'deps' ? r)
              OR EXISTS (SELECT 1 FROM jsonb_array_elements_text(COALESCE(node -> 'join_on', '[]')) r
                         WHERE NOT node -> 'deps' ? r) THEN
                'a node it waits for or reads is not among its deps'
            WHEN node ? 'read_only' AND (jsonb_typeof(node -> 'read_only') IS DISTINCT FROM 'array'
                 OR EXISTS (SELECT 1 FROM jsonb_array_elements(node -> 'read_only') r
                            WHERE jsonb_typeof(r) IS DISTINCT FROM 'string'
                               OR NOT node -> 'deps' ? (r #>> '{}')
                               OR (r #>> '{}') <> ALL(ARRAY(SELECT c FROM (VALUES (node -> 'run_if' ->> 'node'), (node -> 'skip_if' ->> 'node')) v(c) WHERE c IS NOT NULL)))) THEN
                'read_only must list nodes among its deps that its conditions look at'
            WHEN node ->> 'type' IN ('task', 'map') AND jsonb_typeof(node -> 'kind') IS DISTINCT FROM 'string' THEN
                'it has no kind'
        END;
        IF problem IS NOT NULL THEN
            RAISE EXCEPTION '%: node %: %', name, COALESCE(id, '?'), problem
                USING ERRCODE = 'invalid_parameter_value', HINT = hint;
        END IF;
        IF node ->> 'type' IN ('task', 'map') THEN
            PERFORM remuda.check_name('kind', node ->> 'kind', format('%s node %s', name, id));
            IF node ? 'queue' THEN
                PERFORM remuda.check_name('queue', node ->> 'queue', format('%s node %s', name, id));
            END IF;
        ELSIF node ->> 'type' = 'workflow' THEN
            PERFORM remuda.wf_check(node -> 'workflow', format('%s node %s: ', name, id));
        END IF;
        seen := seen || id;
    END LOOP;
    IF def ? 'output' AND NOT COALESCE(def ->> 'output' = ANY(ids), false) THEN
        RAISE EXCEPTION '%: output % names no node of the workflow', name, def -> 'output'
            USING ERRCODE = 'invalid_parameter_value', HINT = hint;
    END IF;
    IF def ? 'success' AND (jsonb_typeof(def -> 'success') IS DISTINCT FROM 'array'
        OR EXISTS (SELECT 1 FROM jsonb_array_elements(def -> 'success') c
                   WHERE jsonb_typeof(c) IS DISTINCT FROM 'array'
                      OR EXISTS (SELECT 1 FROM jsonb_array_elements(c) x
                                 WHERE NOT COALESCE(x #>> '{}' = ANY(ids), false)))) THEN
        RAISE EXCEPTION '%: success % is not a list of lists of its node ids', name, def -> 'success'
            USING ERRCODE = 'invalid_parameter_value', HINT = hint;
    END IF;
    IF def ? 'notify' AND def -> 'notify' <> 'null' THEN
        PERFORM remuda.notify_target(def -> 'notify', name);
    END IF;
END
$$;
