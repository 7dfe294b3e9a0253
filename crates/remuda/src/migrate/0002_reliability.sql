-- remuda schema, version 2: crash-loop quarantine.
--
-- lost_streak counts the attempts in a row that ended with their worker lost (the rescuer
-- adds one; any other outcome, and an operator's retry, sets it back to 0). A column, not a
-- scan of the error history: one integer in a row the write touches anyway.
ALTER TABLE remuda.jobs ADD COLUMN lost_streak integer NOT NULL DEFAULT 0;
--
-- Each worker records how many attempts in a row may end with its death (WORKER_LOST) before
-- the rescuer stops handing the job to another worker and fails it with CRASH_LOOP. It is the
-- dead worker's own setting that applies, as with rescue_after_ms.
ALTER TABLE remuda.workers
    ADD COLUMN crash_loop_limit integer NOT NULL DEFAULT 3 CHECK (crash_loop_limit >= 1);
