-- The error of a node's result (`result -> 'err'`). A map's result stored before maps were
-- tagged is a bare list: its first failed element's.
CREATE OR REPLACE FUNCTION remuda.wf_error(result jsonb)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN jsonb_typeof(result) = 'array'
                THEN (SELECT e -> 'err' FROM jsonb_array_elements(result) e WHERE e ? 'err' LIMIT 1)
                ELSE result -> 'err' END
$$;
