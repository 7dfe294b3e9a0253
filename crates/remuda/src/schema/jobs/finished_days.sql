-- The finished part's day partitions from today (UTC) to `ahead` days after it, each created
-- if missing: `remuda.jobs_finished_YYYYMMDD`, holding the jobs that finished that day. A
-- job that finishes on a day without its partition lands in the default partition
-- (`jobs_finished_kept`); those of a day about to be created are moved into it first (a new
-- day's range may hold no row of the default partition), under a lock that keeps others from
-- landing there meanwhile; such a move changes no state and no key (see
-- remuda.unique_finished_hold and remuda.history_record). Made standalone and attached, each
-- lock waited for at most `lock_timeout_ms`: a day that cannot have them now is made at the
-- next run. Run by migrate and by the maintenance leader's retention duty; returns the days
-- created.
CREATE OR REPLACE FUNCTION remuda.finished_days(ahead integer, lock_timeout_ms integer DEFAULT 200)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    d date;
    name text;
    made integer := 0;
    waited text := current_setting('lock_timeout');
BEGIN
    FOR d IN SELECT generate_series((now() AT TIME ZONE 'UTC')::date,
                                    (now() AT TIME ZONE 'UTC')::date + ahead, interval '1 day')::date
    LOOP
        name := 'jobs_finished_' || to_char(d, 'YYYYMMDD');
        CONTINUE WHEN to_regclass('remuda.' || quote_ident(name)) IS NOT NULL;
        BEGIN
            PERFORM set_config('lock_timeout', lock_timeout_ms || 'ms', true);
            LOCK TABLE remuda.jobs_finished_kept IN SHARE ROW EXCLUSIVE MODE;
            EXECUTE format('CREATE TABLE remuda.%I (LIKE remuda.jobs_finished INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', name);
            PERFORM set_config('remuda.moving_within', 'on', true);
            EXECUTE format('WITH moved AS (DELETE FROM remuda.jobs_finished_kept k WHERE k.finished_at >= %L AND k.finished_at < %L RETURNING k.*) '
                           'INSERT INTO remuda.%I SELECT * FROM moved',
                           d::timestamp AT TIME ZONE 'UTC', (d + 1)::timestamp AT TIME ZONE 'UTC', name);
            PERFORM set_config('remuda.moving_within', '', true);
            EXECUTE format('ALTER TABLE remuda.jobs_finished ATTACH PARTITION remuda.%I FOR VALUES FROM (%L) TO (%L)',
                           name, d::timestamp AT TIME ZONE 'UTC', (d + 1)::timestamp AT TIME ZONE 'UTC');
            PERFORM set_config('lock_timeout', waited, true);
            made := made + 1;
        EXCEPTION WHEN lock_not_available THEN
            PERFORM set_config('lock_timeout', waited, true);
            PERFORM set_config('remuda.moving_within', '', true);
            RETURN made;
        END;
    END LOOP;
    RETURN made;
END
$$;
