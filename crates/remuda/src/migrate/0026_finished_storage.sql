-- remuda schema, version 26: finished jobs leave the live table.
--
-- Until now one table held every job in every state, so every index a feature added was paid
-- by every claim and completion, and retention deleted row by row behind the drain. Now
-- `remuda.jobs` is a parent partitioned by state with two parts:
--
-- * `remuda.jobs_live`: the jobs that can still run (scheduled, available, running, and any
--   state that is not final: the default partition), with the
--   indexes their claims, promotions and rescues need. It is the old table, renamed: its
--   indexes, identity and settings are kept; the finished jobs' index goes.
-- * `remuda.jobs_finished`: the jobs that ended (completed, failed, cancelled, expired),
--   partitioned by day of `finished_at` (UTC): append-only, each day a table of its own, so
--   retention drops whole days. Rows whose day has no partition yet (or no finished_at: a row
--   written by hand) land in `jobs_finished_kept`, the default partition, which also keeps
--   the rows retention must keep past their day (a running workflow's jobs).
--
-- Reads go to the parent, which finds a job wherever it is (one index probe per partition).
-- The statements that end a job move it in one statement (DELETE … RETURNING from the live
-- part feeding an INSERT into the finished part: `schema/jobs/finish_*`), never by an UPDATE
-- across the parts, which PostgreSQL would do as a row movement that turns any concurrent
-- lock of the row (a claim, a waiter's mark) into a serialization error. A revive moves it
-- back the same way.
--
-- A unique key held past the end of its job (unique states that include a final state) is
-- kept in `remuda.unique_finished`: a partitioned table cannot hold one unique index across
-- its parts. The live part's unique index holds the keys of live jobs as before.
--
-- Upgrade: this migration moves the finished rows once, in its transaction, holding the job
-- table meanwhile; stop the workers of earlier releases first (their statements name the old
-- table's layout). docs/operations.md gives the time measured for a million finished jobs.

-- functions whose signatures name the job table's row type are made again after this
-- migration (the type is the parent's now), as are all others (their records are cleared)
DROP FUNCTION IF EXISTS remuda.lock_jobs(bigint[], boolean);
DELETE FROM remuda.schema_functions;

-- verification mode, if on, is put back on the new parent at the end
CREATE TEMP TABLE remuda_history_was ON COMMIT DROP AS
SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'jobs_history'
                                          AND tgrelid = 'remuda.jobs'::regclass) AS was_on;
DROP TRIGGER IF EXISTS jobs_history ON remuda.jobs;
DROP TRIGGER IF EXISTS jobs_steps_forget ON remuda.jobs;
ALTER TABLE remuda.jobs RENAME TO jobs_live;
ALTER INDEX remuda.jobs_pkey RENAME TO jobs_live_pkey;
ALTER TRIGGER jobs_notify_insert ON remuda.jobs_live RENAME TO jobs_live_notify_insert;

-- ids from a plain sequence owned by the live part, where an identity column gave them: a
-- table with an identity column cannot become a partition on every PostgreSQL
DO $$
DECLARE
    last_id bigint;
    called boolean;
    blocks bigint;
BEGIN
    IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'remuda.jobs_live'::regclass
                                            AND attname = 'id' AND attidentity <> '') THEN
        EXECUTE format('SELECT last_value, is_called FROM %s', pg_get_serial_sequence('remuda.jobs_live', 'id'))
            INTO last_id, called;
        -- (ids still come in blocks per session, as many as before)
        SELECT s.seqcache INTO blocks FROM pg_sequence s
        WHERE s.seqrelid = pg_get_serial_sequence('remuda.jobs_live', 'id')::regclass;
        ALTER TABLE remuda.jobs_live ALTER COLUMN id DROP IDENTITY;
        EXECUTE format('CREATE SEQUENCE remuda.jobs_id_seq CACHE %s OWNED BY remuda.jobs_live.id', blocks);
        PERFORM setval('remuda.jobs_id_seq', last_id, called);
        ALTER TABLE remuda.jobs_live ALTER COLUMN id SET DEFAULT nextval('remuda.jobs_id_seq');
    END IF;
END
$$;

CREATE TABLE remuda.jobs (LIKE remuda.jobs_live INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY LIST (state);
ALTER TABLE remuda.jobs ALTER COLUMN id SET DEFAULT nextval('remuda.jobs_id_seq');

CREATE TABLE remuda.jobs_finished (LIKE remuda.jobs INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY RANGE (finished_at);
CREATE TABLE remuda.jobs_finished_kept PARTITION OF remuda.jobs_finished DEFAULT;
CREATE INDEX jobs_finished_id_idx ON remuda.jobs_finished (id);
CREATE INDEX jobs_finished_listing_idx ON remuda.jobs_finished (state, queue, finished_at);
CREATE INDEX jobs_finished_workflow_idx ON remuda.jobs_finished (workflow_id, (workflow ->> 'node'), ((workflow ->> 'index')::integer))
    WHERE workflow_id IS NOT NULL;

CREATE TABLE remuda.unique_finished (
    kind        text NOT NULL,
    scope       text NOT NULL,
    key         text NOT NULL,
    job_id      bigint NOT NULL,
    finished_at timestamptz NOT NULL,
    PRIMARY KEY (kind, scope, key)
);
CREATE INDEX unique_finished_job_idx ON remuda.unique_finished (job_id);
-- the keys of a day's jobs, freed when the day's partition is dropped
CREATE INDEX unique_finished_at_idx ON remuda.unique_finished (finished_at);
-- a key held past its job's end follows the job into and out of the finished part
CREATE TRIGGER jobs_finished_unique_hold
    AFTER INSERT ON remuda.jobs_finished
    FOR EACH ROW WHEN (NEW.unique_key IS NOT NULL AND NEW.state = ANY (NEW.unique_states))
    EXECUTE FUNCTION remuda.unique_finished_hold();
CREATE TRIGGER jobs_finished_unique_free
    AFTER DELETE ON remuda.jobs_finished
    FOR EACH ROW WHEN (OLD.unique_key IS NOT NULL)
    EXECUTE FUNCTION remuda.unique_finished_hold();

-- the finished rows move once: a day's partition for each day they finished on, and the
-- days ahead (remuda.finished_days, which the maintenance leader runs from now on)
DO $$
DECLARE
    d date;
BEGIN
    FOR d IN SELECT DISTINCT (finished_at AT TIME ZONE 'UTC')::date FROM remuda.jobs_live
             WHERE state IN ('completed', 'failed', 'cancelled', 'expired') AND finished_at IS NOT NULL
               AND finished_at < (now() AT TIME ZONE 'UTC')::date::timestamp AT TIME ZONE 'UTC'
    LOOP
        EXECUTE format('CREATE TABLE remuda.%I PARTITION OF remuda.jobs_finished FOR VALUES FROM (%L) TO (%L)',
                       'jobs_finished_' || to_char(d, 'YYYYMMDD'),
                       (d::timestamp AT TIME ZONE 'UTC'), ((d + 1)::timestamp AT TIME ZONE 'UTC'));
    END LOOP;
END
$$;
SELECT remuda.finished_days(2);
INSERT INTO remuda.jobs_finished
SELECT * FROM remuda.jobs_live WHERE state IN ('completed', 'failed', 'cancelled', 'expired');

DELETE FROM remuda.jobs_live WHERE state IN ('completed', 'failed', 'cancelled', 'expired');
DROP INDEX remuda.jobs_finished_idx;
ALTER TABLE remuda.jobs ATTACH PARTITION remuda.jobs_finished FOR VALUES IN ('completed', 'failed', 'cancelled', 'expired');
-- every state that is not final is live, a state added later included (the default partition)
ALTER TABLE remuda.jobs_live ADD CONSTRAINT jobs_live_state
    CHECK (state NOT IN ('completed', 'failed', 'cancelled', 'expired'));
ALTER TABLE remuda.jobs ATTACH PARTITION remuda.jobs_live DEFAULT;

-- an insert through the parent (a user's own, or remuda's statements that may write any
-- state) wakes workers as one into the live part does
CREATE TRIGGER jobs_notify_insert
    AFTER INSERT ON remuda.jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION remuda.notify_insert();
-- a job deleted through the parent takes its steps with it; the moves between the parts
-- (which name the parts) keep them
CREATE TRIGGER jobs_steps_forget
    AFTER DELETE ON remuda.jobs
    REFERENCING OLD TABLE AS gone_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION remuda.steps_forget();

ANALYZE remuda.jobs_live;

DO $$
BEGIN
    IF (SELECT was_on FROM remuda_history_was) THEN
        CREATE TRIGGER jobs_history AFTER INSERT OR UPDATE OR DELETE ON remuda.jobs
            FOR EACH ROW EXECUTE FUNCTION remuda.history_record();
    END IF;
END
$$;
