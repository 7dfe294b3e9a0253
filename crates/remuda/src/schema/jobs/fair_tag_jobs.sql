-- Fair share's start tags (start-time fair queueing): each of the jobs `ids` that is
-- available in a queue with fair share on (fairness 'group') and has no tag is given the tag
-- at which its group's turn to start it comes, as it becomes available (enqueued, promoted,
-- retried, released, revived: every attempt waits as a new arrival, its tag cleared as it
-- starts by remuda.start_jobs). Each priority of the queue is a schedule of its own: a
-- group's jobs at a priority are tagged in run_at, id order from the group's next tag there,
-- the latest of the priority's clock (the tag it last started, remuda.fair_clocks: a group
-- back from idle neither lost nor saved up a share), the group's virtual time (the tag
-- after its last start: one turn past the clock at most) and the tag after its last
-- waiting job at that priority; each next job 1 / weight after. The jobs
-- without a group are the group ''. A fair claim takes jobs by priority, then tag
-- (sql/jobs/claim_limited.sql), so every group, the jobs without one included, gets its
-- share of each priority's starts by weight whatever the others' backlogs.
--
-- A group's turns are taken under its lock (queue and group), held until the transaction
-- ends, and read after it: two transactions enqueueing for one group at once would
-- otherwise both follow on from the same last tag and share its turns. The lock is never
-- waited for (an enqueue that waited would hold back whatever ran in its transaction, the
-- promotion and the completions included): jobs of a group whose lock another transaction
-- holds are left without a tag, as are jobs another transaction has locked, and the next
-- claim that looks through the whole queue (within a poll interval: fair_tag_queue.sql)
-- tags them once it can. Jobs of other queues, no longer available or tagged already are
-- passed over. Returns how many it tagged.
-- (the form that could wait for the lock: replaced by this one)
DROP FUNCTION IF EXISTS remuda.fair_tag_jobs(bigint[], boolean);
CREATE OR REPLACE FUNCTION remuda.fair_tag_jobs(ids bigint[])
RETURNS bigint LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
    pair record;
    passed text[] := '{}';
    tagged bigint;
BEGIN
    FOR pair IN
        SELECT DISTINCT j.queue, coalesce(j.group_key, '') AS grp
        FROM remuda.jobs_live j
        WHERE j.id = ANY(ids) AND j.state::text = 'available' AND j.fair_tag IS NULL
          AND j.queue IN (SELECT q.name FROM remuda.queues q WHERE q.fairness = 'group')
        ORDER BY 1, 2  -- one lock order for every caller
    LOOP
        IF NOT pg_try_advisory_xact_lock(hashtextextended('remuda.fair:' || pair.queue || E'\n' || pair.grp, 0)) THEN
            passed := passed || (pair.queue || E'\n' || pair.grp);
        END IF;
    END LOOP;
    IF pair IS NULL THEN
        RETURN 0;
    END IF;
    -- (a new snapshot, taken after the locks: the tags of the group's enqueues that held the
    -- lock before are seen; each step materialised, so that a group's last tag is looked up
    -- once per group and priority, not per job. Each job finds its group's base by its
    -- group's place in one ordered array, never by a join of the jobs with the groups: the
    -- planner, which cannot tell how many ids it is given, joined them by a nested loop,
    -- every job against every group, and 100 000 jobs over 1 000 groups took 10 s to tag)
    WITH fresh AS MATERIALIZED (
        SELECT j.id, j.queue, coalesce(j.group_key, '') AS grp, j.priority, j.run_at
        FROM remuda.jobs_live j
        WHERE j.id = ANY(ids) AND j.state::text = 'available' AND j.fair_tag IS NULL
          AND j.queue IN (SELECT q.name FROM remuda.queues q WHERE q.fairness = 'group')
          AND j.queue || E'\n' || coalesce(j.group_key, '') <> ALL(passed)
        FOR UPDATE OF j SKIP LOCKED
    ), ranked AS MATERIALIZED (
        -- each job's group (and priority) by its place among them, and its place in the group
        SELECT f.id,
               dense_rank() OVER (ORDER BY f.queue, f.grp, f.priority) AS k,
               row_number() OVER (PARTITION BY f.queue, f.grp, f.priority ORDER BY f.run_at, f.id) AS n
        FROM fresh f
    ), bases AS MATERIALIZED (
        -- each group's (and priority's) next tag and weight, in the same order
        SELECT array_agg(b.base ORDER BY b.queue, b.grp, b.priority) AS base,
               array_agg(b.weight ORDER BY b.queue, b.grp, b.priority) AS weight
        FROM (
            SELECT f.queue, f.grp, f.priority, w.weight,
                   -- (the virtual time counts one turn at most past the priority's clock: it
                   -- moves with starts at every priority, each of whose clocks runs at its
                   -- own pace)
                   greatest(coalesce(c.clock, 0),
                            least(coalesce(g.vtime, 0), coalesce(c.clock, 0) + 1 / w.weight),
                            coalesce(last.tag + 1 / w.weight, 0)) AS base
            FROM (SELECT DISTINCT queue, grp, priority FROM fresh) f
            LEFT JOIN remuda.fair_clocks c ON c.queue = f.queue AND c.priority = f.priority
            LEFT JOIN remuda.queue_groups g ON g.queue = f.queue AND g.name = f.grp
            CROSS JOIN LATERAL (SELECT coalesce(g.weight, 1) AS weight) w
            -- (the last tag of the group's waiting jobs at the priority: one descent of
            -- jobs_fair_group_idx)
            LEFT JOIN LATERAL (
                SELECT l.fair_tag AS tag FROM remuda.jobs_live l
                WHERE l.state = 'available' AND l.fair_tag IS NOT NULL
                  AND l.queue = f.queue AND coalesce(l.group_key, '') = f.grp AND l.priority = f.priority
                ORDER BY l.fair_tag DESC LIMIT 1) last ON true
        ) b
    ), written AS (
        UPDATE remuda.jobs_live j
        SET fair_tag = b.base[r.k] + (r.n - 1) / b.weight[r.k]
        FROM ranked r CROSS JOIN bases b
        WHERE j.id = r.id
        RETURNING 1
    )
    SELECT count(*) INTO tagged FROM written;
    RETURN tagged;
END
$$;
