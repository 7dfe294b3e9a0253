-- The key of a job unique by its args: its kind and the md5 of its args as jsonb (which
-- orders object keys and drops insignificant spaces, so equal documents give equal keys).
CREATE OR REPLACE FUNCTION remuda.unique_args_key(kind text, args jsonb)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT kind || ':' || md5(args::text)
$$;
