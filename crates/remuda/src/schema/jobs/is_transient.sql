-- Whether an error of SQLSTATE `state` says nothing about the data: a conflict with another
-- transaction (class 40: serialization failure, deadlock), a lock not available (55),
-- resources (53), an operator's intervention (57), the connection (08). Such an error is
-- raised on, to retry the whole statement; any other is the data's, set aside with its row.
CREATE OR REPLACE FUNCTION remuda.is_transient(state text)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT left(state, 2) IN ('40', '53', '55', '57', '08')
$$;
