-- When the next timer is due (NULL: none), for the duty to sleep until then. Volatile, so
-- that beside workflow_timers() in one statement it sees what that one just ended.
CREATE OR REPLACE FUNCTION remuda.workflow_next_timer()
RETURNS timestamptz LANGUAGE sql VOLATILE AS $$
    SELECT least((SELECT min(n.wake_at) FROM remuda.workflow_nodes n
                  WHERE n.state = 'running' AND n.wake_at IS NOT NULL),
                 (SELECT min(w.deadline_at) FROM remuda.workflows w
                  WHERE w.deadline_at IS NOT NULL AND w.state IN ('running', 'paused')))
$$;
