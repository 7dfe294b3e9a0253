-- What an interrupted `REINDEX … CONCURRENTLY` leaves in the remuda schema: invalid copies
-- named <index>_ccnew (the rebuild) or <index>_ccold (the original, swapped out), each with
-- an optional number. Dropped by the reindexer while it holds the reindex lock, so none of
-- them is one of its own rebuilds in progress.
SELECT format('%I.%I', n.nspname, c.relname) AS name
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'remuda' AND NOT i.indisvalid AND c.relname ~ '_cc(new|old)[0-9]*$'
