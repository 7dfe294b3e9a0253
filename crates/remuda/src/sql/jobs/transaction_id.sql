-- The id of the current transaction (assigning one), with the server's start time and this
-- session's process: kept by the completer to ask later whether a commit whose answer was
-- lost happened (transaction_status.sql).
-- With $1 (a large batch) it also makes the rest of the transaction plan every statement for
-- its own parameters (plan_cache_mode, as SET LOCAL): the general lane's statements join arrays of any length
-- to the job table, and a generic plan estimates an array at 10 elements whatever it holds,
-- which with the job table's statistics of a young or never analysed database gave a nested
-- loop over both (measured: 120 ms for 500 outcomes instead of 8 ms, and so for the seam's
-- workflow hook inside it). Planning every statement of the seam's hook costs ~2 ms, which a
-- small batch (a workflow chain's single step) would pay for nothing.
SELECT pg_current_xact_id()::text AS xid, pg_postmaster_start_time() AS server_started,
       pg_backend_pid() AS pid, set_config('plan_cache_mode', CASE WHEN $1::bool THEN 'force_custom_plan' ELSE 'auto' END, true) AS plans
