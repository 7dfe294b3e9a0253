-- Make the final nodes `nodes` of run `w_id` (locked) run again: a map runs again only its
-- failed and cancelled elements (their jobs, in place, each with its attempts anew); a
-- sub-workflow that failed or was cancelled is retried (only its own failed nodes run
-- again); any other node goes back to pending, to start anew once decided. The counters of
-- every pending node are then counted again from their dependencies.
CREATE OR REPLACE FUNCTION remuda.wf_rerun(w_id bigint, nodes text[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    r remuda.workflow_nodes;
    children bigint[] := '{}';
    c bigint;
BEGIN
    FOR r IN SELECT * FROM remuda.workflow_nodes x
             WHERE x.workflow_id = w_id AND x.node = ANY(nodes)
               AND x.state IN ('completed', 'failed', 'skipped', 'cancelled')
             ORDER BY x.position
    LOOP
        IF r.type = 'map' AND r.children_total > 0 THEN
            PERFORM remuda.revive_jobs(
                ARRAY(SELECT j.id FROM remuda.jobs j
                      WHERE j.workflow_id = w_id AND j.workflow ->> 'node' = r.node AND j.workflow ? 'index'
                        AND j.state IN ('failed', 'cancelled', 'expired')),
                w_id, '{failed,cancelled,expired}', false, (r.spec ->> 'deadline_ms')::bigint, true);
            -- the elements' counts from their jobs (those cancelled with the run were never
            -- counted)
            UPDATE remuda.workflow_nodes n SET state = 'running', result = NULL, reason = NULL,
                held = false, finished_at = NULL, attempt = n.attempt + 1,
                children_done = c.done, children_ok = c.done
            FROM (SELECT count(*) FILTER (WHERE j.state = 'completed') AS done FROM remuda.jobs j
                  WHERE j.workflow_id = w_id AND j.workflow ->> 'node' = r.node AND j.workflow ? 'index') c
            WHERE n.workflow_id = w_id AND n.node = r.node;
        ELSIF r.type = 'workflow' AND r.child_id IS NOT NULL
              AND (SELECT x.state FROM remuda.workflows x WHERE x.id = r.child_id) IN ('failed', 'cancelled') THEN
            UPDATE remuda.workflow_nodes SET state = 'running', result = NULL, reason = NULL,
                held = false, finished_at = NULL, attempt = attempt + 1
            WHERE workflow_id = w_id AND node = r.node;
            children := children || r.child_id;
        ELSE
            UPDATE remuda.workflow_nodes SET state = 'pending', result = NULL, reason = NULL,
                held = false, finished_at = NULL, wake_at = NULL, child_id = NULL
            WHERE workflow_id = w_id AND node = r.node;
        END IF;
    END LOOP;
    -- the counts first: a retried child that ends at once advances this run
    UPDATE remuda.workflows w SET nodes_left = (
        SELECT count(*) FROM remuda.workflow_nodes x
        WHERE x.workflow_id = w_id AND x.state IN ('pending', 'running'))
    WHERE w.id = w_id;
    UPDATE remuda.workflow_nodes n SET deps_done = c.done, deps_ok = c.ok
    FROM (SELECT p.node,
                 count(*) FILTER (WHERE d.state IN ('completed', 'failed', 'skipped', 'cancelled')
                                  AND NOT d.held) AS done,
                 count(*) FILTER (WHERE d.state = 'completed') AS ok
          FROM remuda.workflow_nodes p
          CROSS JOIN unnest(p.deps) dep
          JOIN remuda.workflow_nodes d ON d.workflow_id = p.workflow_id AND d.node = dep
          WHERE p.workflow_id = w_id AND p.state = 'pending'
          GROUP BY p.node) c
    WHERE n.workflow_id = w_id AND n.node = c.node;
    FOREACH c IN ARRAY children LOOP
        PERFORM remuda.workflow_retry(c);
    END LOOP;
END
$$;
