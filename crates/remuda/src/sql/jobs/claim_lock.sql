-- Serialise limited claims: the lock of queue $1 and, when the cluster has a cap, first the
-- cluster-wide one, for the rest of the transaction (claim_limited.sql runs next, in a new
-- snapshot). Which locks is decided here, from the settings as committed, not from a
-- worker's cache, so every claimer of a capped cluster takes the same lock. The claim's
-- statements stamp the moment they began, after this wait (see remuda.start_jobs).
SELECT count(pg_advisory_xact_lock(l.key))
FROM (SELECT 1 AS ord, hashtextextended('remuda.claim:*', 0) AS key
      WHERE (SELECT max_running FROM remuda.cluster) IS NOT NULL
      UNION ALL
      SELECT 2, hashtextextended('remuda.claim:' || $1, 0)) l
