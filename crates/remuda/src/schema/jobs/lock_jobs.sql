-- The rows of jobs `ids`, locked FOR UPDATE in id order (the order every statement that
-- locks many jobs takes them, so two never deadlock on each other), as they are once
-- locked: a state read here is the newest. With `skip_locked`, a row another transaction
-- holds is passed over instead of waited for.
CREATE OR REPLACE FUNCTION remuda.lock_jobs(ids bigint[], skip_locked boolean)
RETURNS remuda.jobs[] LANGUAGE plpgsql AS $$
BEGIN
    IF skip_locked THEN
        RETURN ARRAY(SELECT x FROM remuda.jobs x WHERE x.id = ANY(ids)
                     ORDER BY x.id FOR UPDATE SKIP LOCKED);
    END IF;
    RETURN ARRAY(SELECT x FROM remuda.jobs x WHERE x.id = ANY(ids) ORDER BY x.id FOR UPDATE);
END
$$;
