-- The indexes of remuda.jobs worth rebuilding: valid, at least $1 bytes, and more than $2
-- bytes per entry they hold (pg_class.reltuples, kept by autovacuum and ANALYZE): a btree
-- that holds few entries in many pages is mostly empty space that a rebuild gives back.
-- Indexes never vacuumed nor analysed (reltuples -1) are left alone. Largest first. The
-- reindexer counts again (ANALYZE) before it trusts a candidate: an index that filled since
-- it was counted (a backlog enqueued into a table analysed while empty) looks bloated here.
SELECT format('%I.%I', n.nspname, c.relname) AS name,
       pg_relation_size(c.oid) AS bytes,
       c.reltuples::float8 AS entries
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE i.indrelid = 'remuda.jobs_live'::regclass
  AND i.indisvalid
  AND c.reltuples >= 0
  AND pg_relation_size(c.oid) >= $1::bigint
  AND pg_relation_size(c.oid) > $2::float8 * greatest(c.reltuples, 1)
ORDER BY bytes DESC
