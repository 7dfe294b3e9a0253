-- Serialise limited claims: per queue ($1), or cluster-wide when the cluster has a cap ($2),
-- for the rest of the transaction (claim_limited.sql runs next, in a new snapshot).
SELECT pg_advisory_xact_lock(CASE WHEN $2 THEN hashtextextended('remuda.claim:*', 0)
                                  ELSE hashtextextended('remuda.claim:' || $1, 0) END)
