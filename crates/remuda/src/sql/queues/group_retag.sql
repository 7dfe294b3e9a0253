-- The waiting jobs of group $2 of queue $1 (the group '' is the jobs without a group) spaced
-- again by its weight $3 at each priority, from their first tag there and in their order: a
-- weight set while the group has a backlog counts from the group's next start, not only for
-- the jobs made available after it. Run under the claims' lock of the queue (claim_lock.sql),
-- whose claims lock these jobs and then the group's row. Returns how many were tagged again.
WITH spaced AS (
    SELECT j.id, min(j.fair_tag) OVER (PARTITION BY j.priority)
                 + (row_number() OVER (PARTITION BY j.priority ORDER BY j.fair_tag, j.id) - 1) / $3::float8 AS tag
    FROM remuda.jobs_live j
    WHERE j.state = 'available' AND j.queue = $1 AND j.fair_tag IS NOT NULL
      AND coalesce(j.group_key, '') = $2
), retagged AS (
    UPDATE remuda.jobs_live j SET fair_tag = s.tag
    FROM spaced s
    WHERE j.id = s.id AND j.state = 'available' AND j.fair_tag IS NOT NULL
    RETURNING 1
)
SELECT count(*) AS retagged FROM retagged
