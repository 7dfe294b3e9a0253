-- A worker's notification defaults for its kinds $1: kinds $2 notify the targets $3, the
-- others of $1 lose any defaults another worker set (the last worker started wins). A kind
-- with defaults takes the general lane at its success (see complete_ok.sql).
WITH gone AS (
    DELETE FROM remuda.notification_defaults d
    WHERE d.kind = ANY($1::text[]) AND NOT d.kind = ANY($2::text[])
)
INSERT INTO remuda.notification_defaults (kind, notify)
SELECT u.kind, u.notify FROM unnest($2::text[], $3::jsonb[]) AS u(kind, notify)
ON CONFLICT (kind) DO UPDATE SET notify = EXCLUDED.notify, updated_at = now()
    WHERE remuda.notification_defaults.notify IS DISTINCT FROM EXCLUDED.notify
