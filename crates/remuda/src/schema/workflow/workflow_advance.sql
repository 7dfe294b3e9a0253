-- The seam's hook: the node jobs that reached a final state advance their runs, each run
-- locked in id order. A map element counts on its node, which ends with its last element.
-- A node job given back to wait (a retry, a snooze, a rescue) while its run is paused is
-- held with the run's others (wf_hold).
CREATE OR REPLACE FUNCTION remuda.workflow_advance(changed remuda.transition[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    w record;
    ended remuda.wf_done[];
    given_back bigint[];
BEGIN
    -- (the runs looked up only when such a job is among the rows: most statements have none)
    -- (no DISTINCT: `x.id = ANY` below takes each run once; asked for distinct rows in order,
    -- with sorts off, the planner walks the whole of jobs_workflow_idx instead of the
    -- primary key)
    given_back := ARRAY(SELECT j.workflow_id FROM remuda.jobs j
                        WHERE j.id = ANY(ARRAY(SELECT c.id FROM unnest(changed) c
                                               WHERE c.flags & 2 <> 0
                                                 AND c.new_state IN ('available', 'scheduled'))));
    IF cardinality(given_back) > 0 THEN
        -- each run's state read under its lock: a resume (or pause) in flight is waited for
        PERFORM remuda.wf_hold(r.id)
        FROM (SELECT x.id, x.state FROM remuda.workflows x
              WHERE x.id = ANY(given_back) ORDER BY x.id FOR UPDATE) r
        WHERE r.state = 'paused';
    END IF;
    FOR w IN
        -- the rows by primary key from an id array (their new state is the row's own), read
        -- apart from their grouping: joined to the array, with the run's order wanted, the
        -- planner may walk every node job of jobs_workflow_idx for each row (measured: 5 s
        -- for 2 000 rows); grouped in the same query, with sorts off, it walks the whole index
        -- once, filtering every workflow job the table holds by the array (measured: 140 ms
        -- of a 5 000-element batch of a 10 000-element map). A map element's result is not
        -- read here: the element is only counted, and its node's result read once at its end.
        WITH ended_jobs AS MATERIALIZED (
            SELECT j.workflow_id,
                   ROW(j.workflow ->> 'node', (j.workflow ->> 'index')::integer,
                       remuda.wf_node_state(j.state),
                       CASE WHEN j.workflow ? 'index' THEN NULL
                            ELSE remuda.wf_job_result(j.state, j.result, j.errors) END,
                       j.id, NULL)::remuda.wf_done AS d
            FROM remuda.jobs j
            WHERE j.id = ANY(ARRAY(SELECT c.id FROM unnest(changed) c
                                   WHERE c.flags & 2 <> 0 AND remuda.is_final(c.new_state)))
        )
        SELECT e.workflow_id AS id, array_agg(e.d) AS done
        FROM ended_jobs e
        WHERE e.workflow_id IS NOT NULL
        GROUP BY e.workflow_id
        ORDER BY e.workflow_id
    LOOP
        PERFORM 1 FROM remuda.workflows WHERE id = w.id AND state IN ('running', 'paused') FOR UPDATE;
        CONTINUE WHEN NOT FOUND;
        -- a task node ends with its current job: wf_settle passes over an end whose job is
        -- not the node's
        ended := ARRAY(SELECT d FROM unnest(w.done) d WHERE d.idx IS NULL);
        -- map elements
        WITH counted AS (
            UPDATE remuda.workflow_nodes n
            SET children_done = n.children_done + x.done, children_ok = n.children_ok + x.ok
            FROM (SELECT d.node, count(*) AS done, count(*) FILTER (WHERE d.state = 'completed') AS ok
                  FROM unnest(w.done) d WHERE d.idx IS NOT NULL GROUP BY d.node) x
            WHERE n.workflow_id = w.id AND n.node = x.node AND n.state = 'running' AND n.type = 'map'
            RETURNING n.node, n.children_done, n.children_ok, n.children_total
        )
        SELECT ended || COALESCE(array_agg(ROW(c.node, NULL,
                   CASE WHEN c.children_ok >= c.children_total THEN 'completed' ELSE 'failed' END,
                   NULL, NULL, NULL)::remuda.wf_done), '{}')
        INTO ended
        FROM counted c WHERE c.children_done >= c.children_total;
        -- a map's result: its elements', read once they are all written
        SELECT array_agg(CASE WHEN d.result IS NULL AND d.idx IS NULL AND d.job_id IS NULL
                              THEN ROW(d.node, NULL, d.state, remuda.wf_map_result(w.id, d.node), NULL, NULL)::remuda.wf_done
                              ELSE d END)
        INTO ended FROM unnest(ended) d;
        PERFORM remuda.wf_settle(w.id, COALESCE(ended, '{}'), '{}');
    END LOOP;
END
$$;
