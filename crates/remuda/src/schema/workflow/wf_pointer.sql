-- A JSON pointer (RFC 6901) as a path for #>.
CREATE OR REPLACE FUNCTION remuda.wf_pointer(pointer text)
RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN COALESCE(pointer, '') = '' THEN '{}'::text[]
           ELSE ARRAY(SELECT replace(replace(p, '~1', '/'), '~0', '~')
                      FROM unnest(string_to_array(substr(pointer, 2), '/')) WITH ORDINALITY AS u(p, i)
                      ORDER BY i) END
$$;
