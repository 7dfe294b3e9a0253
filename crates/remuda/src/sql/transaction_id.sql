-- The id of the current transaction (assigning one), kept by the completer to ask later
-- whether a commit whose answer was lost happened (transaction_status.sql).
SELECT pg_current_xact_id()::text AS xid
