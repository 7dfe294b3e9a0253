-- Whether transaction $1 (from transaction_id.sql) committed: 'committed', 'aborted' or
-- 'in progress' (NULL when too old to know).
SELECT pg_xact_status($1::text::xid8) AS status
