-- The UTC time as Standard Webhooks writes it ("2026-12-02T10:00:00.123456Z").
CREATE OR REPLACE FUNCTION remuda.notify_time(t timestamptz)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT to_jsonb(to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
$$;
