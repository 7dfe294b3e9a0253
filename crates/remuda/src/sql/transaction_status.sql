-- Whether transaction $1 (from transaction_id.sql) committed: 'committed', 'aborted' or
-- 'in progress' (NULL when too old to know). An id the server has not handed out yet (it
-- crashed before the id reached its log, and now counts from below it) never committed:
-- 'aborted', where pg_xact_status itself would fail.
SELECT CASE WHEN $1::text::xid8 >= pg_snapshot_xmax(pg_current_snapshot()) THEN 'aborted'
            ELSE pg_xact_status($1::text::xid8) END AS status
