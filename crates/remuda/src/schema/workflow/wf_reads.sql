-- The nodes whose results or states a node's spec reads: its conditions' nodes, its
-- args_from and context_from nodes, the node its map goes over. A node is not decided
-- while one of them has not ended.
CREATE OR REPLACE FUNCTION remuda.wf_reads(spec jsonb)
RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY(SELECT DISTINCT x FROM (
        SELECT spec -> 'run_if' ->> 'node'
        UNION ALL SELECT spec -> 'skip_if' ->> 'node'
        UNION ALL SELECT e.value FROM jsonb_each_text(COALESCE(spec -> 'args_from', '{}')) e
                  WHERE e.value <> '$input'
        UNION ALL SELECT jsonb_array_elements_text(COALESCE(spec -> 'context_from', '[]'))
        UNION ALL SELECT spec -> 'map' ->> 'over') r(x)
    WHERE x IS NOT NULL)
$$;
