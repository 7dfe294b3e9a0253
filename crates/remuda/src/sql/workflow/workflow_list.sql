-- Runs in state $1 and of definition $2 (each NULL for all), newest first, up to $3, with
-- their nodes' counts per state. Sub-workflows are listed too (parent_id says whose).
SELECT w.id, w.name, w.state::text AS state, w.parent_id, w.created_at, w.finished_at,
       (SELECT jsonb_object_agg(c.state, c.n) FROM (
            SELECT n.state::text AS state, count(*) AS n FROM remuda.workflow_nodes n
            WHERE n.workflow_id = w.id GROUP BY n.state) c) AS nodes
FROM remuda.workflows w
WHERE ($1::text IS NULL OR w.state::text = $1) AND ($2::text IS NULL OR w.name = $2)
ORDER BY w.created_at DESC, w.id DESC
LIMIT $3
