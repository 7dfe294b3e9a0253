-- Whether transaction $1 (from transaction_id.sql, on a server started at $2, in session
-- $3) committed: 'committed', 'aborted' or 'in progress'; NULL when that cannot be known,
-- and then the completer writes again through its guarded statements.
-- * A server started since (a crash, a failover) may have handed the id out again, if its
--   log never reached disk: its status would be another transaction's. NULL.
-- * An id the server has not handed out yet (it crashed before the id reached its log, and
--   counts from below it) never committed: 'aborted', where pg_xact_status would fail.
-- * A session whose COMMIT never arrived (the connection broke on the way) stays idle in its
--   transaction, holding the rows' locks, until the server notices the connection is gone:
--   it is ended here (`ended`), and the transaction reads as aborted at the next ask.
SELECT CASE WHEN pg_postmaster_start_time() <> $2 THEN NULL
            WHEN $1::text::xid8 >= pg_snapshot_xmax(pg_current_snapshot()) THEN 'aborted'
            ELSE pg_xact_status($1::text::xid8) END AS status,
       -- OFFSET 0: the session is chosen first, and only it is ended
       (SELECT count(*) FILTER (WHERE pg_terminate_backend(s.pid))
        FROM (SELECT a.pid FROM pg_stat_activity a
              WHERE a.pid = $3 AND a.backend_xid = xid($1::text::xid8)
                AND a.state LIKE 'idle in transaction%' OFFSET 0) s) AS ended
