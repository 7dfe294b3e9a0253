-- Advance run `w_id` (locked by the caller): record the nodes `finished`, pass each end to
-- its dependents' counters, decide `candidates` and the dependents, and so on until nothing
-- more happens now; then end the run if nothing is left. A paused run records ends and
-- counts them but starts nothing (resume decides). With on_error = pause, a failure pauses
-- the run and is held from its dependents until resume runs the node again.
CREATE OR REPLACE FUNCTION remuda.wf_settle(w_id bigint, finished remuda.wf_done[], candidates text[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    wf remuda.workflows;
    ended_count integer;
    any_held boolean;
    by_node jsonb;
BEGIN
    SELECT * INTO wf FROM remuda.workflows WHERE id = w_id;
    IF NOT FOUND OR wf.state NOT IN ('running', 'paused') THEN RETURN; END IF;
    finished := COALESCE(finished, '{}');
    candidates := COALESCE(candidates, '{}');
    LOOP
        IF cardinality(finished) > 0 THEN
            -- the ends by node id, and the rows found by primary key from the ids: a join of
            -- the array with the table may be planned as a nested loop over both (O(n²):
            -- measured 160 ms for 1 000 ends)
            by_node := (SELECT jsonb_object_agg(d.node, jsonb_build_object(
                            'state', d.state, 'result', d.result, 'reason', d.reason, 'job', d.job_id))
                        FROM unnest(finished) d);
            -- the rows ended now, and from them, in the same statement, what their ends add
            -- to each dependent's counters (a failure held back adds nothing)
            WITH ended AS (
                UPDATE remuda.workflow_nodes n
                SET state = (by_node -> n.node ->> 'state')::remuda.node_state,
                    result = NULLIF(by_node -> n.node -> 'result', 'null'::jsonb),
                    reason = by_node -> n.node ->> 'reason',
                    finished_at = now(), wake_at = NULL,
                    held = (wf.on_error = 'pause'
                            AND by_node -> n.node ->> 'state' IN ('failed', 'cancelled')
                            AND by_node -> n.node ->> 'reason' IS DISTINCT FROM 'cancel')
                WHERE n.workflow_id = w_id
                  AND n.node = ANY(ARRAY(SELECT jsonb_object_keys(by_node)))
                  AND n.state IN ('pending', 'running')
                  -- an end that comes from a job must come from the node's current one
                  AND (by_node -> n.node -> 'job' = 'null'::jsonb
                       OR n.job_id = (by_node -> n.node ->> 'job')::bigint)
                RETURNING n.node, n.held, n.state, n.dependents
            ), added AS (
                SELECT dep, count(*) AS n, count(*) FILTER (WHERE e.state = 'completed') AS ok
                FROM ended e, unnest(e.dependents) dep
                WHERE NOT e.held
                GROUP BY dep
            )
            SELECT (SELECT count(*) FROM ended), (SELECT COALESCE(bool_or(e.held), false) FROM ended e),
                   (SELECT jsonb_object_agg(a.dep, jsonb_build_array(a.n, a.ok)) FROM added a)
            INTO ended_count, any_held, by_node;
            IF ended_count > 0 THEN
                UPDATE remuda.workflows SET nodes_left = nodes_left - ended_count,
                    state = CASE WHEN any_held AND state = 'running' THEN 'paused' ELSE state END
                WHERE id = w_id
                RETURNING * INTO wf;
                -- each dependent's counters in one statement (a row is written once in it),
                -- by primary key as above
                UPDATE remuda.workflow_nodes d
                SET deps_done = d.deps_done + (by_node -> d.node ->> 0)::integer,
                    deps_ok = d.deps_ok + (by_node -> d.node ->> 1)::integer
                WHERE d.workflow_id = w_id
                  AND d.node = ANY(ARRAY(SELECT jsonb_object_keys(COALESCE(by_node, '{}'))));
                candidates := candidates || ARRAY(SELECT jsonb_object_keys(COALESCE(by_node, '{}')));
            END IF;
        END IF;
        EXIT WHEN cardinality(candidates) = 0 OR wf.state <> 'running';
        finished := remuda.wf_advance_nodes(wf, candidates);
        candidates := '{}';
        EXIT WHEN cardinality(finished) = 0;
    END LOOP;
    IF wf.nodes_left = 0 AND NOT EXISTS (SELECT 1 FROM remuda.workflow_nodes h
                                         WHERE h.workflow_id = w_id AND h.held) THEN
        PERFORM remuda.wf_finish(w_id, NULL);
    END IF;
END
$$;
