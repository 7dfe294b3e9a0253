-- The id of the current transaction (assigning one), with the server's start time and this
-- session's process: kept by the completer to ask later whether a commit whose answer was
-- lost happened (transaction_status.sql).
SELECT pg_current_xact_id()::text AS xid, pg_postmaster_start_time() AS server_started,
       pg_backend_pid() AS pid
