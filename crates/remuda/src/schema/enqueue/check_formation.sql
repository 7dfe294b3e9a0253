-- Checks how a job asks to be formed from many enqueues (see enqueue_job.sql), with errors
-- that say what was wrong and what to give instead: one formation at most; debounce and
-- throttle need a unique key (or uniqueness by args) and set the unique states and the start
-- themselves; a debounce's cap is no shorter than the debounce; a batch needs batch_size and
-- batch_wait and takes no unique options or start; a debounced or batched job's start moves
-- with the enqueues that join it, so it takes no deadline (a throttled one may: its start is
-- known when it is enqueued).
DROP FUNCTION IF EXISTS remuda.check_formation(text, interval, interval, interval, boolean, text, integer, interval,
                                                boolean, boolean, boolean);
CREATE OR REPLACE FUNCTION remuda.check_formation(
    job text, debounce interval, debounce_max interval, throttle interval, throttle_latest boolean,
    batch_key text, batch_size integer, batch_wait interval, is_unique boolean, unique_shaped boolean,
    has_start boolean, has_deadline boolean)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    bad CONSTANT text := 'invalid_parameter_value';
    modes integer := (debounce IS NOT NULL)::int + (throttle IS NOT NULL)::int + (batch_key IS NOT NULL)::int;
BEGIN
    IF modes > 1 THEN
        RAISE EXCEPTION 'job %: debounce, throttle and batch_key are ways to form one job from many enqueues: give one of them', job
            USING ERRCODE = bad;
    END IF;
    IF debounce_max IS NOT NULL AND debounce IS NULL THEN
        RAISE EXCEPTION 'job %: debounce_max caps a debounce: give debounce too', job USING ERRCODE = bad;
    END IF;
    IF throttle_latest AND throttle IS NULL THEN
        RAISE EXCEPTION 'job %: throttle_latest is for a throttle: give throttle too', job USING ERRCODE = bad;
    END IF;
    IF (batch_size IS NOT NULL OR batch_wait IS NOT NULL) AND batch_key IS NULL THEN
        RAISE EXCEPTION 'job %: batch_size and batch_wait are for a batch: give batch_key too', job USING ERRCODE = bad;
    END IF;
    IF debounce IS NOT NULL OR throttle IS NOT NULL THEN
        IF NOT is_unique THEN
            RAISE EXCEPTION 'job %: a % job needs a unique key (or uniqueness by args): the key names the jobs it folds into one',
                job, CASE WHEN debounce IS NOT NULL THEN 'debounced' ELSE 'throttled' END
                USING ERRCODE = bad, HINT = 'add unique_key';
        END IF;
        IF unique_shaped THEN
            RAISE EXCEPTION 'job %: a % job holds its key while it waits, and only then: leave unique_states and unique_period out',
                job, CASE WHEN debounce IS NOT NULL THEN 'debounced' ELSE 'throttled' END USING ERRCODE = bad;
        END IF;
        IF has_start THEN
            RAISE EXCEPTION 'job %: a % job''s start is set by its %: leave run_at and delay out',
                job, CASE WHEN debounce IS NOT NULL THEN 'debounced' ELSE 'throttled' END,
                CASE WHEN debounce IS NOT NULL THEN 'debounce' ELSE 'throttle' END USING ERRCODE = bad;
        END IF;
    END IF;
    IF has_deadline AND (debounce IS NOT NULL OR batch_key IS NOT NULL) THEN
        RAISE EXCEPTION 'job %: a % job''s start moves with the enqueues that join it: it takes no deadline', job,
            CASE WHEN debounce IS NOT NULL THEN 'debounced' ELSE 'batched' END
            USING ERRCODE = bad, HINT = 'leave deadline out (debounce_max caps a debounce; batch_wait a batch)';
    END IF;
    IF debounce <= interval '0' OR debounce_max <= interval '0' OR throttle <= interval '0' THEN
        RAISE EXCEPTION 'job %: debounce, debounce_max and throttle must be more than zero', job USING ERRCODE = bad;
    END IF;
    IF debounce_max < debounce THEN
        RAISE EXCEPTION 'job %: debounce_max (%) is shorter than the debounce (%): every job would run debounce_max after its first enqueue, never debounced; give a debounce_max of at least the debounce',
            job, debounce_max, debounce USING ERRCODE = bad;
    END IF;
    IF batch_key IS NOT NULL THEN
        IF octet_length(batch_key) NOT BETWEEN 1 AND 1000 THEN
            RAISE EXCEPTION 'job %: the batch key must be 1 to 1000 bytes', job USING ERRCODE = bad;
        END IF;
        IF batch_size IS NULL OR batch_wait IS NULL THEN
            RAISE EXCEPTION 'job %: a batch needs batch_size (it runs when that many have joined) and batch_wait (or when that long has passed since the first)', job
                USING ERRCODE = bad, HINT = 'set batch_size and batch_wait on the task (or pass them)';
        END IF;
        IF batch_size < 1 OR batch_wait <= interval '0' THEN
            RAISE EXCEPTION 'job %: batch_size must be at least 1 and batch_wait more than zero', job USING ERRCODE = bad;
        END IF;
        IF is_unique OR has_start THEN
            RAISE EXCEPTION 'job %: a batch is keyed by its batch key and starts when full or after batch_wait: leave the unique options, run_at and delay out', job
                USING ERRCODE = bad;
        END IF;
    END IF;
END
$$;
