-- Keep a failure that was set aside (see migration 19): `source` failed for `subject` with
-- SQLSTATE `state` and `message`. Also raised as a WARNING for the server's log.
CREATE OR REPLACE FUNCTION remuda.record_failure(source text, subject text, state text, message text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    RAISE WARNING 'remuda: % failed for %, set aside: % (SQLSTATE %)', source, subject, message, state;
    INSERT INTO remuda.failures AS f (source, subject, sqlstate, message)
    VALUES (source, subject, state, message)
    ON CONFLICT ON CONSTRAINT failures_pkey DO UPDATE
    SET sqlstate = EXCLUDED.sqlstate, message = EXCLUDED.message, count = f.count + 1,
        last_at = now();
END
$$;
