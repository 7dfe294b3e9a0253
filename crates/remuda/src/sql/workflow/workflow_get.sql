-- One run: what `remuda workflow status` shows besides its nodes.
SELECT id, name, state::text AS state, input, output, error, parent_id, parent_node,
       created_at, finished_at, group_key
FROM remuda.workflows WHERE id = $1
