-- The rows of jobs `ids`, locked FOR UPDATE in id order (the order every statement that
-- locks many jobs takes them, so two never deadlock on each other), as they are once
-- locked: a state read here is the newest. With `skip_locked`, a row another transaction
-- holds is passed over instead of waited for.
-- A job that moved between the live and the finished part while its lock was waited for
-- (it ended, or was revived) is gone from where the lock found it: it is looked for again,
-- in a statement of its own whose snapshot sees where it went.
CREATE OR REPLACE FUNCTION remuda.lock_jobs(ids bigint[], skip_locked boolean)
RETURNS remuda.jobs[] LANGUAGE plpgsql AS $$
DECLARE
    found remuda.jobs[];
    missing bigint[];
BEGIN
    IF skip_locked THEN
        RETURN ARRAY(SELECT x FROM remuda.jobs x WHERE x.id = ANY(ids) ORDER BY x.id FOR UPDATE SKIP LOCKED);
    END IF;
    FOR round IN 1..3 LOOP
        -- every round locks the whole set again in id order (the rows held already cost
        -- nothing), so that no lock is taken out of order
        found := ARRAY(SELECT x FROM remuda.jobs x WHERE x.id = ANY(ids) ORDER BY x.id FOR UPDATE);
        missing := ARRAY(SELECT m FROM unnest(ids) m
                         WHERE m <> ALL (ARRAY(SELECT f.id FROM unnest(found) f)));
        EXIT WHEN cardinality(missing) = 0
               OR NOT EXISTS (SELECT 1 FROM remuda.jobs x WHERE x.id = ANY(missing));
    END LOOP;
    RETURN found;
END
$$;
