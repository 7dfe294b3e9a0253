-- Retention by the day: each day partition of the finished part whose every job is past its
-- age goes whole (detached and dropped), instead of being deleted row by row. A day goes
-- once it ended a day ago or more (the shortest age kept whole; a shorter one is pruned row
-- by row, sql/jobs/prune.sql). Its jobs whose age is longer than the day's (their queue's
-- own retention for their state, else `defaults_ms` for that state; -1 for ever) and the
-- jobs of a workflow run that still exists are kept: moved to the default partition
-- (`jobs_finished_kept`), which prune.sql walks row by row. The keys and steps of the jobs
-- that go are freed first (a dropped table fires no trigger), found by index, and in
-- verification mode their deletion is recorded; only the detach, the move of the kept jobs
-- and the drop hold the finished part's lock, each waiting for it at most `lock_timeout_ms`
-- (a day that cannot have it now goes at the next run).
-- Only for the leader `leader` at term `term` when it is given (the lease row share-locked).
-- Returns each day dropped, with how many jobs of each final state went and how many stayed.
CREATE OR REPLACE FUNCTION remuda.finished_days_drop(
    states remuda.job_state[], defaults_ms bigint[], leader text, term bigint, lock_timeout_ms integer)
RETURNS TABLE (day date, state remuda.job_state, jobs bigint, kept bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    part record;
    lower_at timestamptz;
    upper_at timestamptz;
    keep bigint[];
    counts record;
    waited text := current_setting('lock_timeout');
BEGIN
    IF finished_days_drop.leader IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM remuda.leader l
        WHERE l.name = 'default' AND l.leader_id = finished_days_drop.leader
          AND l.term = finished_days_drop.term AND l.expires_at > now()
        FOR SHARE) THEN
        RETURN;
    END IF;
    FOR part IN
        SELECT c.relname AS name, to_date(right(c.relname, 8), 'YYYYMMDD') AS d
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'remuda.jobs_finished'::regclass AND c.relname ~ '^jobs_finished_[0-9]{8}$'
        ORDER BY 2
    LOOP
        lower_at := part.d::timestamp AT TIME ZONE 'UTC';
        upper_at := (part.d + 1)::timestamp AT TIME ZONE 'UTC';
        EXIT WHEN upper_at > now() - interval '1 day';
        -- the jobs kept past their day: their (state, queue) pairs found by skipping through
        -- the listing index, each pair's age looked up once, its young rows read by range
        EXECUTE format($q$
            WITH RECURSIVE pairs(state, queue) AS (
                (SELECT x.state, x.queue FROM remuda.%1$I x ORDER BY x.state, x.queue LIMIT 1)
                UNION ALL
                SELECT n.state, n.queue FROM pairs f
                CROSS JOIN LATERAL (SELECT x.state, x.queue FROM remuda.%1$I x
                                    WHERE (x.state, x.queue) > (f.state, f.queue)
                                    ORDER BY x.state, x.queue LIMIT 1) n
            ), ages AS (
                SELECT p.state, p.queue,
                       remuda.retention_ms(p.state, q, COALESCE(d.ms, -1)) AS ms
                FROM pairs p
                LEFT JOIN remuda.queues q ON q.name = p.queue
                LEFT JOIN unnest($1::remuda.job_state[], $2::bigint[]) AS d(state, ms) ON d.state = p.state
            )
            SELECT ARRAY(
                SELECT x.id FROM ages a
                JOIN remuda.%1$I x ON x.state = a.state AND x.queue = a.queue
                 AND x.finished_at >= CASE WHEN a.ms < 0 THEN '-infinity'::timestamptz
                                           ELSE now() - a.ms * interval '1 millisecond' END
                UNION
                SELECT x.id FROM remuda.%1$I x
                WHERE x.workflow_id IS NOT NULL
                  AND EXISTS (SELECT 1 FROM remuda.workflows w WHERE w.id = x.workflow_id))
        $q$, part.name) INTO keep USING finished_days_drop.states, finished_days_drop.defaults_ms;
        EXECUTE format('SELECT array_agg(c.s ORDER BY c.s) AS states, array_agg(c.n ORDER BY c.s) AS jobs FROM (SELECT x.state AS s, count(*) AS n FROM remuda.%I x WHERE x.id <> ALL ($1) GROUP BY x.state) c',
                       part.name) INTO counts USING keep;
        BEGIN
            DELETE FROM remuda.unique_finished h
            WHERE h.finished_at >= lower_at AND h.finished_at < upper_at AND h.job_id <> ALL (keep);
            IF EXISTS (SELECT 1 FROM remuda.steps) THEN
                EXECUTE format('DELETE FROM remuda.steps s WHERE EXISTS (SELECT 1 FROM remuda.%I x WHERE x.id = s.job_id) AND s.job_id <> ALL ($1)',
                               part.name) USING keep;
            END IF;
            IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'jobs_history' AND tgrelid = 'remuda.jobs'::regclass) THEN
                EXECUTE format('INSERT INTO remuda.history (job_id, attempt, from_state, to_state, worker_id, token) '
                               'SELECT x.id, x.attempt, x.state::text, NULL, x.worker_id, x.started_at FROM remuda.%I x WHERE x.id <> ALL ($1)',
                               part.name) USING keep;
            END IF;
            PERFORM set_config('lock_timeout', finished_days_drop.lock_timeout_ms || 'ms', true);
            EXECUTE format('ALTER TABLE remuda.jobs_finished DETACH PARTITION remuda.%I', part.name);
            EXECUTE format('INSERT INTO remuda.jobs_finished_kept SELECT * FROM remuda.%I x WHERE x.id = ANY ($1)', part.name)
                USING keep;
            EXECUTE format('DROP TABLE remuda.%I', part.name);
            PERFORM set_config('lock_timeout', waited, true);
        EXCEPTION WHEN lock_not_available THEN
            -- busy now: the day goes at the next run (what this one freed is given back)
            PERFORM set_config('lock_timeout', waited, true);
            CONTINUE;
        END;
        RETURN QUERY
        SELECT part.d, c.s, c.n, cardinality(keep)::bigint
        FROM unnest(COALESCE(counts.states, '{}'::remuda.job_state[]), COALESCE(counts.jobs, '{}'::bigint[])) AS c(s, n);
    END LOOP;
END
$$;
