-- Unique keys for "unique by args": the kind and the md5 of the args as jsonb (which orders
-- object keys and drops insignificant spaces, so equal documents give equal keys).
SELECT u.kind || ':' || md5(u.args::text) AS key
FROM unnest($1::text[], $2::jsonb[]) WITH ORDINALITY AS u(kind, args, n)
ORDER BY u.n
