-- The audit log, newest first, below id $1 (NULL for the first page), at most $2 rows.
SELECT id, at, actor, via, action, target, detail
FROM remuda.audit
WHERE $1::bigint IS NULL OR id < $1::bigint
ORDER BY id DESC
LIMIT $2
