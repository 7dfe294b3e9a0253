-- The start tags of queue $1's waiting jobs made to agree with its fair share: with fairness
-- 'group', the jobs waiting without a tag are tagged (remuda.fair_tag_jobs, passing over
-- the groups and jobs another transaction holds), in the transaction that turns fair share
-- on, and before a claim that looks through the whole queue (at most once a poll interval: a
-- job that came to wait without a tag waits no longer than that); without it, the tags are
-- cleared (they would hold index entries no claim reads). On a queue without fair share
-- neither walks its jobs (one-time filters); on one with it, finding the untagged jobs reads
-- every waiting job of the queue, as the deep claim did before tags.
WITH fair AS (
    SELECT EXISTS (SELECT 1 FROM remuda.queues q WHERE q.name = $1 AND q.fairness = 'group') AS is_on
), cleared AS (
    UPDATE remuda.jobs_live j SET fair_tag = NULL
    WHERE NOT (SELECT is_on FROM fair)
      AND j.state = 'available' AND j.queue = $1 AND j.fair_tag IS NOT NULL
    RETURNING 1
)
SELECT CASE WHEN (SELECT is_on FROM fair)
            THEN remuda.fair_tag_jobs(ARRAY(SELECT j.id FROM remuda.jobs_live j
                                            WHERE j.state = 'available' AND j.queue = $1
                                              AND j.fair_tag IS NULL))
            ELSE 0 END AS tagged,
       (SELECT count(*) FROM cleared) AS cleared
