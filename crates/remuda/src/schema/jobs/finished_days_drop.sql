-- Retention by the day: the oldest day partition of the finished part whose every job is past
-- its age goes whole (detached and dropped) instead of being deleted row by row; one day a
-- call, each call its own transaction, so the finished part's lock is held for one day's
-- detach and drop at a time. A day goes once it ended a day ago or more (the shortest age
-- kept whole; a shorter one is pruned row by row, sql/jobs/prune.sql). Its jobs whose age is
-- longer than the day's (their queue's own retention for their state, else `defaults_ms` for
-- that state; -1 for ever) and the jobs of a workflow run that still exists are kept: copied
-- aside first, then moved to the default partition (`jobs_finished_kept`), which prune.sql
-- walks row by row.
-- The day is share-locked first (a revive or delete of one of its jobs waits, or this call
-- gives up), and everything that reads its rows is done before the finished part is locked:
-- the kept jobs copied aside, the counts taken, the keys and steps of the jobs that go freed (a
-- dropped table fires no trigger), their deletion recorded in verification mode. Only the
-- detach, the insert of the kept jobs and the drop hold the finished part's lock, each
-- waiting for it at most `lock_timeout_ms`: a day that cannot have its locks now is left for
-- the next call (`busy`, and nothing it did stays).
-- Only for the leader `leader` at term `term` when it is given (the lease row share-locked).
-- Returns the day dropped (or found busy), with how many jobs of each final state went and
-- how many stayed; nothing when no day is due.
CREATE OR REPLACE FUNCTION remuda.finished_days_drop(
    states remuda.job_state[], defaults_ms bigint[], leader text, term bigint, lock_timeout_ms integer)
RETURNS TABLE (day date, state remuda.job_state, jobs bigint, kept bigint, busy boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    part record;
    waited text := current_setting('lock_timeout');
    n_kept bigint;
    lower_at timestamptz;
    upper_at timestamptz;
BEGIN
    IF finished_days_drop.leader IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM remuda.leader l
        WHERE l.name = 'default' AND l.leader_id = finished_days_drop.leader
          AND l.term = finished_days_drop.term AND l.expires_at > now()
        FOR SHARE) THEN
        RETURN;
    END IF;
    SELECT c.relname AS name, to_date(right(c.relname, 8), 'YYYYMMDD') AS d INTO part
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'remuda.jobs_finished'::regclass AND c.relname ~ '^jobs_finished_[0-9]{8}$'
      AND (to_date(right(c.relname, 8), 'YYYYMMDD') + 1)::timestamp AT TIME ZONE 'UTC' <= now() - interval '1 day'
    ORDER BY 2 LIMIT 1;
    IF part.name IS NULL THEN
        RETURN;
    END IF;
    lower_at := part.d::timestamp AT TIME ZONE 'UTC';
    upper_at := (part.d + 1)::timestamp AT TIME ZONE 'UTC';
    BEGIN
        PERFORM set_config('lock_timeout', finished_days_drop.lock_timeout_ms || 'ms', true);
        EXECUTE format('LOCK TABLE remuda.%I IN SHARE MODE', part.name);
        -- the jobs kept past their day: their (state, queue) pairs found by skipping through
        -- the listing index, each pair's age looked up once, its young rows read by range
        DROP TABLE IF EXISTS pg_temp.remuda_kept;
        EXECUTE format($q$
            CREATE TEMP TABLE remuda_kept ON COMMIT DROP AS
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
            SELECT x.* FROM ages a
            JOIN remuda.%1$I x ON x.state = a.state AND x.queue = a.queue
             AND x.finished_at >= CASE WHEN a.ms < 0 THEN '-infinity'::timestamptz
                                       ELSE now() - a.ms * interval '1 millisecond' END
            UNION
            SELECT x.* FROM remuda.%1$I x
            WHERE x.workflow_id IS NOT NULL
              AND EXISTS (SELECT 1 FROM remuda.workflows w WHERE w.id = x.workflow_id)
        $q$, part.name) USING finished_days_drop.states, finished_days_drop.defaults_ms;
        ANALYZE pg_temp.remuda_kept;
        DROP TABLE IF EXISTS pg_temp.remuda_gone;
        SELECT count(*) INTO n_kept FROM pg_temp.remuda_kept;
        -- what goes, counted by state (all the day's jobs but the kept ones); its keys (found
        -- from the keys held that day) and steps (from the steps there are) freed, found by
        -- the day's id index; its deletion recorded in verification mode
        DROP TABLE IF EXISTS pg_temp.remuda_gone;
        EXECUTE format('CREATE TEMP TABLE remuda_gone ON COMMIT DROP AS
                        SELECT a.state, a.n - COALESCE(k.n, 0) AS n
                        FROM (SELECT x.state, count(*) AS n FROM remuda.%I x GROUP BY x.state) a
                        LEFT JOIN (SELECT k.state, count(*) AS n FROM pg_temp.remuda_kept k GROUP BY k.state) k
                          ON k.state = a.state', part.name);
        EXECUTE format('DELETE FROM remuda.unique_finished h
                        WHERE h.finished_at >= $1 AND h.finished_at < $2
                          AND EXISTS (SELECT 1 FROM remuda.%I x WHERE x.id = h.job_id)
                          AND NOT EXISTS (SELECT 1 FROM pg_temp.remuda_kept k WHERE k.id = h.job_id)', part.name)
            USING lower_at, upper_at;
        IF EXISTS (SELECT 1 FROM remuda.steps) THEN
            EXECUTE format('DELETE FROM remuda.steps s
                            WHERE EXISTS (SELECT 1 FROM remuda.%I x WHERE x.id = s.job_id)
                              AND NOT EXISTS (SELECT 1 FROM pg_temp.remuda_kept k WHERE k.id = s.job_id)', part.name);
        END IF;
        IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'jobs_history' AND tgrelid = 'remuda.jobs'::regclass) THEN
            EXECUTE format('INSERT INTO remuda.history (job_id, attempt, from_state, to_state, worker_id, token)
                            SELECT x.id, x.attempt, x.state::text, NULL, x.worker_id, x.started_at FROM remuda.%I x
                            WHERE NOT EXISTS (SELECT 1 FROM pg_temp.remuda_kept k WHERE k.id = x.id)', part.name);
        END IF;
        EXECUTE format('ALTER TABLE remuda.jobs_finished DETACH PARTITION remuda.%I', part.name);
        -- (a move within the finished part, not a change of state: verification mode records
        -- nothing of it, see remuda.history_record)
        PERFORM set_config('remuda.moving_within', 'on', true);
        INSERT INTO remuda.jobs_finished_kept SELECT * FROM pg_temp.remuda_kept;
        PERFORM set_config('remuda.moving_within', '', true);
        EXECUTE format('DROP TABLE remuda.%I', part.name);
        PERFORM set_config('lock_timeout', waited, true);
        RETURN QUERY
        SELECT part.d, g.state, g.n, n_kept, false FROM pg_temp.remuda_gone g WHERE g.n > 0;
        IF NOT FOUND THEN
            RETURN QUERY SELECT part.d, NULL::remuda.job_state, 0::bigint, n_kept, false;
        END IF;
    EXCEPTION WHEN lock_not_available THEN
        -- busy now: the day goes at a later call (what this one freed is given back)
        PERFORM set_config('lock_timeout', waited, true);
        RETURN QUERY SELECT part.d, NULL::remuda.job_state, 0::bigint, 0::bigint, true;
    END;
END
$$;
