-- Number of jobs per queue and state.
SELECT queue, state::text AS state, count(*) AS jobs
FROM remuda.jobs
GROUP BY queue, state
ORDER BY queue, state
