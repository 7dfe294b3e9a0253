-- What a pending node does now: 'wait', 'run', 'skip:dependency' or 'skip:condition'.
-- The nodes only its conditions look at (`read_only`) are read, never joined: they must have
-- ended, and their state is the condition's to judge, not a failed dependency.
-- join all: every dependency completed (or, with allow_failed_deps, every one final; else a
-- failed one skips it at once). any / quorum count the nodes of `join_on` (its waits_for):
-- it runs as soon as 1 / min_success of them completed, and skips once that cannot happen
-- (or, with allow_failed_deps, runs once all are final); its other dependencies (the nodes
-- it takes args or context from and does not wait for) must be final first, as for all, and
-- so must every node it reads (wf_reads) before it runs or is skipped by a condition.
CREATE OR REPLACE FUNCTION remuda.wf_decide(n remuda.workflow_nodes)
RETURNS text LANGUAGE plpgsql STABLE AS $$
DECLARE
    total integer := cardinality(n.deps);
    bad integer := n.deps_done - n.deps_ok;
    join_kind text := COALESCE(n.spec ->> 'join', 'all');
    allow boolean := COALESCE((n.spec ->> 'allow_failed_deps')::boolean, false);
    read_only text[] := ARRAY(SELECT jsonb_array_elements_text(COALESCE(n.spec -> 'read_only', '[]')));
    need integer;
    join_on text[];
    done_on integer;
    ok_on integer;
    req_done integer;
    req_ok integer;
    req_read integer;
BEGIN
    IF join_kind = 'all' THEN
        IF bad > 0 AND NOT allow AND (cardinality(read_only) = 0 OR EXISTS (
                SELECT 1 FROM remuda.workflow_nodes d
                WHERE d.workflow_id = n.workflow_id AND d.node = ANY(n.deps)
                  AND d.node <> ALL(read_only)
                  AND d.state IN ('failed', 'skipped', 'cancelled') AND NOT d.held)) THEN
            RETURN 'skip:dependency';
        END IF;
        IF n.deps_done < total THEN RETURN 'wait'; END IF;
    ELSE
        join_on := ARRAY(SELECT jsonb_array_elements_text(n.spec -> 'join_on'));
        SELECT count(*) FILTER (WHERE d.node = ANY(join_on) AND d.state IN ('completed', 'failed', 'skipped', 'cancelled') AND NOT d.held),
               count(*) FILTER (WHERE d.node = ANY(join_on) AND d.state = 'completed'),
               count(*) FILTER (WHERE d.node <> ALL(join_on) AND d.state IN ('completed', 'failed', 'skipped', 'cancelled') AND NOT d.held),
               count(*) FILTER (WHERE d.node <> ALL(join_on) AND d.state = 'completed'),
               count(*) FILTER (WHERE d.node <> ALL(join_on) AND d.node = ANY(read_only)
                                  AND d.state IN ('failed', 'skipped', 'cancelled') AND NOT d.held)
        INTO done_on, ok_on, req_done, req_ok, req_read
        FROM remuda.workflow_nodes d
        WHERE d.workflow_id = n.workflow_id AND d.node = ANY(n.deps);
        IF req_done - req_read > req_ok AND NOT allow THEN RETURN 'skip:dependency'; END IF;
        need := CASE WHEN join_kind = 'any' THEN 1 ELSE (n.spec ->> 'min_success')::integer END;
        IF ok_on < need THEN
            IF cardinality(join_on) - (done_on - ok_on) >= need THEN RETURN 'wait'; END IF;
            IF NOT allow THEN RETURN 'skip:dependency'; END IF;
            IF done_on < cardinality(join_on) THEN RETURN 'wait'; END IF;
        END IF;
        IF req_done < total - cardinality(join_on) THEN RETURN 'wait'; END IF;
        -- enough of join_on completed, but what the node reads (its conditions, args,
        -- context, map) is decided only once each of those nodes has ended
        IF EXISTS (SELECT 1 FROM remuda.workflow_nodes d
                   WHERE d.workflow_id = n.workflow_id AND d.node = ANY(remuda.wf_reads(n.spec))
                     AND (d.state IN ('pending', 'running') OR d.held)) THEN
            RETURN 'wait';
        END IF;
    END IF;
    IF n.spec ? 'run_if' AND NOT remuda.wf_condition(n.workflow_id, n.spec -> 'run_if') THEN
        RETURN 'skip:condition';
    END IF;
    IF n.spec ? 'skip_if' AND remuda.wf_condition(n.workflow_id, n.spec -> 'skip_if') THEN
        RETURN 'skip:condition';
    END IF;
    RETURN 'run';
END
$$;
