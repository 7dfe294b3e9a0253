-- remuda schema, version 5: a cheaper path in for bulk enqueues.
--
-- * Job ids come from a sequence that hands each session 1 000 ids at a time instead of one:
--   every nextval() had taken the sequence's buffer lock and logged every 32nd value
--   (COPY of 100 000 jobs: 1.16 s before, 1.10 s after). Ids stay unique and increase within
--   a session; across sessions they follow the order in which sessions took their blocks, so
--   ids may have gaps and may not follow commit order (they never did across concurrent
--   transactions). Claims order by (priority, run_at, id), run_at first.
-- * The insert trigger reads the statement's new rows once, grouped by queue, instead of
--   twice (one DISTINCT for admission control, one for notifications), and looks for queues
--   with a max_depth only when some queue has one.

ALTER TABLE remuda.jobs ALTER COLUMN id SET CACHE 1000;

CREATE OR REPLACE FUNCTION remuda.notify_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    q record;
    depth bigint;
    queues text[];
    wake text[];
BEGIN
    SELECT array_agg(g.queue), array_agg(g.queue) FILTER (WHERE g.available)
    INTO queues, wake
    FROM (SELECT n.queue, bool_or(n.state = 'available') AS available
          FROM new_jobs n GROUP BY n.queue) g;
    IF EXISTS (SELECT 1 FROM remuda.queues s WHERE s.max_depth IS NOT NULL) THEN
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
    PERFORM pg_notify('remuda_insert', w) FROM unnest(wake) AS w;
    RETURN NULL;
END
$$;
