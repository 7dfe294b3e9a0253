-- The jobs that hold the unique keys $3 of kinds $1 in queue scopes $2 ('' when unique per
-- kind only), in their unique states: the existing jobs a duplicate enqueue returns, with the
-- position of the asking job in the arrays (n).
SELECT w.n, remuda.unique_holder(w.kind, w.scope, w.key) AS id
FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS w(kind, scope, key, n)
WHERE remuda.unique_holder(w.kind, w.scope, w.key) IS NOT NULL
