-- When a held job (see wf_hold) is due: the end of time, as a finite moment every client
-- can read (an `infinity` would not fit the drivers' date types).
CREATE OR REPLACE FUNCTION remuda.wf_held_at()
RETURNS timestamptz LANGUAGE sql IMMUTABLE AS $$
    SELECT timestamptz '9999-12-31 00:00:00+00'
$$;
