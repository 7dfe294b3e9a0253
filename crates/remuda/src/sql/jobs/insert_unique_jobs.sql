-- Insert jobs of which some are unique, in one call (remuda.insert_unique_jobs): a job whose unique key ($16) is held
-- by a job of the same kind (and, when $18 names it, the same queue) in one of that job's
-- unique states ($17, an array literal per job) is not inserted, nor is the second of two
-- with one key in the batch. Rows come back in input
-- order (id, key, kind and queue scope of each inserted row: the key's whole scope, which the
-- caller compares to tell the inserted jobs from the duplicates); the caller finds the duplicates' ids with
-- unique_lookup.sql. Jobs without a key ($16 NULL) are always inserted. $1 … $15 are the
-- columns of insert_jobs.sql.
SELECT * FROM remuda.insert_unique_jobs($1::text[], $2::text[], $3::int[], $4::int[], $5::timestamptz[],
    $6::timestamptz[], $7::bigint[], $8::jsonb[], $9::text[], $10::text[], $11::text[], $12::jsonb[],
    $13::text[], $14::text[], $15::text[], $16::text[], $17::text[], $18::text[])
