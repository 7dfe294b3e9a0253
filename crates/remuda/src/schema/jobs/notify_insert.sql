-- The job table's statement trigger: one notification per insert statement and queue (not per
-- row), on `remuda_insert`, which workers LISTEN on to claim from the named queue. A
-- transition table keeps it one call per statement for COPY and multi-row inserts alike.
--
-- Admission control rides on it: a queue with max_depth is counted under a lock that
-- serialises its enqueues, new rows included, and the statement fails with SQLSTATE RQ001
-- when it would go over. The statement's rows are read once, grouped by queue, and queues
-- with a max_depth are looked for only when some queue has one. So is fair share: the new
-- available jobs of a queue with it are given their start tags (remuda.fair_tag_jobs).
CREATE OR REPLACE FUNCTION remuda.notify_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    q record;
    depth bigint;
    queues text[];
    wake text[];
    depth_limits boolean;
    fair boolean;
BEGIN
    SELECT array_agg(g.queue), array_agg(g.queue) FILTER (WHERE g.available)
    INTO queues, wake
    FROM (SELECT n.queue, bool_or(n.state = 'available') AS available
          FROM new_jobs n GROUP BY n.queue) g;
    -- the queues' settings that act on an insert, read once (a plain enqueue pays this look)
    SELECT coalesce(bool_or(s.max_depth IS NOT NULL), false),
           coalesce(bool_or(s.fairness = 'group' AND s.name = ANY(wake)), false)
    INTO depth_limits, fair
    FROM remuda.queues s WHERE s.max_depth IS NOT NULL OR s.fairness IS NOT NULL;
    -- (a revive, moving a finished job back, is not an enqueue: see remuda.revive_jobs)
    IF current_setting('remuda.reviving', true) IS DISTINCT FROM 'on' AND depth_limits THEN
        FOR q IN
            SELECT s.name, s.max_depth
            FROM remuda.queues s
            WHERE s.max_depth IS NOT NULL AND s.name = ANY(queues)
            ORDER BY s.name  -- one lock order for every statement: no deadlock between two
        LOOP
            PERFORM pg_advisory_xact_lock(hashtextextended('remuda.depth:' || q.name, 0));
            SELECT count(*) INTO depth FROM remuda.jobs j
            WHERE j.queue = q.name AND j.state IN ('available', 'scheduled');
            IF depth > q.max_depth THEN
                RAISE EXCEPTION 'queue % is full: % jobs would be waiting, over its max_depth of %', q.name, depth, q.max_depth
                    USING ERRCODE = 'RQ001',
                          HINT = 'retry later, or raise the limit with: remuda queue set ' || q.name || ' --max-depth N';
            END IF;
        END LOOP;
    END IF;
    -- the new available jobs of queues with fair share wait with their start tags (once the
    -- function is there: an upgrade applies this one before the migration it needs); a
    -- revive's are given theirs by the seam, as every job that waits again
    IF fair AND current_setting('remuda.reviving', true) IS DISTINCT FROM 'on' AND to_regprocedure('remuda.fair_tag_jobs(bigint[])') IS NOT NULL THEN
        PERFORM remuda.fair_tag_jobs(ARRAY(SELECT n.id FROM new_jobs n WHERE n.state = 'available'));
    END IF;
    PERFORM pg_notify('remuda_insert', w) FROM unnest(wake) AS w;
    RETURN NULL;
END
$$;
