-- The jobs that hold the unique keys $3 of kinds $1 in queue scopes $2 ('' when unique per
-- kind only), in their unique states: the existing jobs a duplicate enqueue returns, with the
-- position of the asking job in the arrays (n).
SELECT w.n, j.id
FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS w(kind, scope, key, n)
JOIN remuda.jobs j
  ON j.kind = w.kind AND COALESCE(j.unique_queue, '') = w.scope AND j.unique_key = w.key
 AND j.unique_key IS NOT NULL AND j.state = ANY (j.unique_states)
