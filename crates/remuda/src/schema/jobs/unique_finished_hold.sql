-- The keys held past a job's end: a row trigger on the finished part (only for rows with a
-- unique key, by its WHEN clause, so other jobs pay nothing). A job that arrives there in one
-- of its unique states (however it came: remuda.finish_jobs, the lean lane, a row moved by
-- a user's own UPDATE) holds its key in remuda.unique_finished; a job that leaves it (a
-- revive moves it back, a delete, a prune) frees it. Dropping a whole day's partition fires
-- no trigger: retention frees those keys itself. A move within the finished part (to or from
-- its default partition: remuda.finished_days, remuda.finished_days_drop) keeps the key.
CREATE OR REPLACE FUNCTION remuda.unique_finished_hold() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('remuda.moving_within', true) = 'on' THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO remuda.unique_finished (kind, scope, key, job_id, finished_at)
        VALUES (NEW.kind, COALESCE(NEW.unique_queue, ''), NEW.unique_key, NEW.id, COALESCE(NEW.finished_at, now()))
        -- (held already by another job: that job keeps it)
        ON CONFLICT ON CONSTRAINT unique_finished_pkey DO NOTHING;
    ELSE
        DELETE FROM remuda.unique_finished h WHERE h.job_id = OLD.id;
    END IF;
    RETURN NULL;
END
$$;
