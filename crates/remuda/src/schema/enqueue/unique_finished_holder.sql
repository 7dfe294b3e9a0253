-- The finished job that holds unique key `key` of kind `kind` in queue scope `scope` ('' for
-- the kind alone) past its end (remuda.unique_finished), if any.
CREATE OR REPLACE FUNCTION remuda.unique_finished_holder(kind text, scope text, key text)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT f.job_id FROM remuda.unique_finished f
    WHERE f.kind = unique_finished_holder.kind AND f.scope = COALESCE(unique_finished_holder.scope, '')
      AND f.key = unique_finished_holder.key
$$;
