-- Decide the pending nodes `candidates` of run `wf` and start those that run. Returns the
-- nodes that ended at once (skipped, done as they started, or failed to start: QUEUE_FULL,
-- NODE_START_FAILED). A node that cannot start fails alone, never the end that decided it.
CREATE OR REPLACE FUNCTION remuda.wf_advance_nodes(wf remuda.workflows, candidates text[])
RETURNS remuda.wf_done[] LANGUAGE plpgsql AS $$
DECLARE
    n remuda.workflow_nodes;
    decision text;
    ended remuda.wf_done[] := '{}';
    tasks text[] := '{}';
    nested boolean := false;
    one text;
BEGIN
    -- The plain case in one statement, not a call of wf_decide per node (a fan-out of 1 000
    -- nodes made 1 000 calls): a task node that waits for all of its dependencies, has no
    -- condition, and none of whose dependencies ended other than completed, runs once they
    -- all have and waits until then, as wf_decide would say. The loop decides the others.
    tasks := ARRAY(SELECT x.node FROM remuda.workflow_nodes x
                   WHERE x.workflow_id = wf.id AND x.node = ANY(candidates) AND x.state = 'pending'
                     AND remuda.wf_plain_task(x) AND x.deps_done = cardinality(x.deps)
                   ORDER BY x.position);
    FOR n IN SELECT * FROM remuda.workflow_nodes x
             WHERE x.workflow_id = wf.id AND x.node = ANY(candidates) AND x.state = 'pending'
               AND NOT remuda.wf_plain_task(x)
             ORDER BY x.position
    LOOP
        -- a sub-workflow that ended as it started has advanced this run already: the rows
        -- read before it may be stale
        IF nested THEN
            SELECT * INTO n FROM remuda.workflow_nodes x
            WHERE x.workflow_id = wf.id AND x.node = n.node AND x.state = 'pending';
            CONTINUE WHEN NOT FOUND;
        END IF;
        decision := remuda.wf_decide(n);
        IF decision = 'wait' THEN
            CONTINUE;
        ELSIF decision LIKE 'skip:%' THEN
            ended := ended || ROW(n.node, NULL, 'skipped', NULL, NULL, substr(decision, 6))::remuda.wf_done;
        ELSIF n.type = 'task' THEN
            tasks := tasks || n.node;
        ELSE
            BEGIN
                ended := ended || remuda.wf_start_other(wf, n);
            EXCEPTION WHEN SQLSTATE 'RQ001' THEN
                ended := ended || remuda.wf_queue_full(ARRAY[n.node], SQLERRM);
            WHEN OTHERS THEN
                IF remuda.is_transient(SQLSTATE) THEN RAISE; END IF;
                ended := ended || remuda.wf_start_failed(n.node, SQLERRM);
            END;
            nested := nested OR n.type = 'workflow';
        END IF;
    END LOOP;
    IF cardinality(tasks) > 0 THEN
        -- a node whose queue is full fails (QUEUE_FULL, to retry with the run) rather than
        -- the completion that started it, which would be refused for ever
        BEGIN
            PERFORM remuda.wf_start_tasks(wf, tasks);
        EXCEPTION WHEN SQLSTATE 'RQ001' THEN
            ended := ended || remuda.wf_queue_full(tasks, SQLERRM);
        WHEN OTHERS THEN
            IF remuda.is_transient(SQLSTATE) THEN RAISE; END IF;
            -- one node's job was refused (bad data in its spec or its args): each on its
            -- own, so that only the nodes at fault fail, with NODE_START_FAILED
            FOREACH one IN ARRAY tasks LOOP
                BEGIN
                    PERFORM remuda.wf_start_tasks(wf, ARRAY[one]);
                EXCEPTION WHEN SQLSTATE 'RQ001' THEN
                    ended := ended || remuda.wf_queue_full(ARRAY[one], SQLERRM);
                WHEN OTHERS THEN
                    IF remuda.is_transient(SQLSTATE) THEN RAISE; END IF;
                    ended := ended || remuda.wf_start_failed(one, SQLERRM);
                END;
            END LOOP;
        END;
    END IF;
    RETURN ended;
END
$$;
