-- remuda schema, version 2: crash-loop quarantine.
--
-- Each worker records how many attempts in a row may end with its death (WORKER_LOST) before
-- the rescuer stops handing the job to another worker and fails it with CRASH_LOOP. It is the
-- dead worker's own setting that applies, as with rescue_after_ms.
ALTER TABLE remuda.workers
    ADD COLUMN crash_loop_limit integer NOT NULL DEFAULT 3 CHECK (crash_loop_limit >= 1);
