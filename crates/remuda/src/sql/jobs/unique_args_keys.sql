-- Unique keys for "unique by args", computed by remuda.unique_args_key as remuda.enqueue
-- computes them: the kind and the md5 of the args as jsonb.
SELECT remuda.unique_args_key(u.kind, u.args) AS key
FROM unnest($1::text[], $2::jsonb[]) WITH ORDINALITY AS u(kind, args, n)
ORDER BY u.n
