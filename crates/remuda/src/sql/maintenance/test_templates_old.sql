-- The test templates (remuda_tpl_<build>_<YYYYMMDD>) made before yesterday (UTC), of any build,
-- and those named without their day: a run that started yesterday may still be making test
-- databases from yesterday's.
SELECT d.datname
FROM pg_database d
WHERE d.datname ~ '^remuda_tpl_[0-9a-f]{16}$'
   OR (d.datname ~ '^remuda_tpl_[0-9a-f]{16}_[0-9]{8}$'
       AND right(d.datname, 8) < to_char((now() AT TIME ZONE 'UTC')::date - 1, 'YYYYMMDD'))
