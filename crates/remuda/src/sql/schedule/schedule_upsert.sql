-- Create or replace schedule $1 (kind $2, args $3, queue $4, priority $5, max_attempts $6,
-- pattern $7, zone $8, catch_up $9, catch_up_limit $10, overlap $11, group $13), next firing
-- at $12 if it is new or its pattern or zone changed; an unchanged pattern keeps its
-- next_run_at, and a declaration identical to the stored one writes nothing (no row
-- returned). Paused stays as it was. (A schedule without a group hashes as before groups.)
INSERT INTO remuda.schedules AS s
    (name, kind, args, queue, priority, max_attempts, pattern, tz, catch_up, catch_up_limit,
     overlap, group_key, definition_hash, next_run_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $13,
        md5((jsonb_build_array($2::text, $3::jsonb, $4::text, $5::integer, $6::integer, $7::text,
                               $8::text, $9::text, $10::integer, $11::text)
             || CASE WHEN $13::text IS NULL THEN '[]'::jsonb ELSE jsonb_build_array($13::text) END)::text),
        $12)
ON CONFLICT (name) DO UPDATE
SET kind = EXCLUDED.kind, args = EXCLUDED.args, queue = EXCLUDED.queue,
    priority = EXCLUDED.priority, max_attempts = EXCLUDED.max_attempts,
    pattern = EXCLUDED.pattern, tz = EXCLUDED.tz, catch_up = EXCLUDED.catch_up,
    catch_up_limit = EXCLUDED.catch_up_limit, overlap = EXCLUDED.overlap,
    group_key = EXCLUDED.group_key, definition_hash = EXCLUDED.definition_hash,
    next_run_at = CASE WHEN (s.pattern, s.tz) IS DISTINCT FROM (EXCLUDED.pattern, EXCLUDED.tz)
                       THEN EXCLUDED.next_run_at ELSE s.next_run_at END,
    updated_at = now()
WHERE s.definition_hash <> EXCLUDED.definition_hash
RETURNING (xmax = 0) AS created, next_run_at
