-- Whether pending node `n` is decided by its counters alone (see wf_advance_nodes): a task
-- node joining all of its dependencies, without a condition, none of whose dependencies
-- ended other than completed so far. For it wf_decide says 'run' once every dependency has
-- completed and 'wait' before.
CREATE OR REPLACE FUNCTION remuda.wf_plain_task(n remuda.workflow_nodes)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT n.type = 'task' AND n.deps_ok = n.deps_done
       AND COALESCE(n.spec ->> 'join', 'all') = 'all'
       AND NOT (n.spec ? 'run_if' OR n.spec ? 'skip_if')
$$;
