-- The job of kind `kind` that holds unique key `key` in queue scope `scope` ('' for the kind
-- alone) in one of its unique states, if any: the job a duplicate enqueue returns. A live
-- job holds its key in the live part's unique index; a finished one in remuda.unique_finished.
CREATE OR REPLACE FUNCTION remuda.unique_holder(kind text, scope text, key text)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT COALESCE(
        (SELECT h.id FROM remuda.jobs_live h
         WHERE h.kind = unique_holder.kind AND COALESCE(h.unique_queue, '') = COALESCE(unique_holder.scope, '')
           AND h.unique_key = unique_holder.key AND h.unique_key IS NOT NULL AND h.state = ANY (h.unique_states)),
        remuda.unique_finished_holder(unique_holder.kind, unique_holder.scope, unique_holder.key))
$$;
