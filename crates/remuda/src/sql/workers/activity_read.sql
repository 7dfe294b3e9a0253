-- Every queue's minutes within the last $1 minutes (the current one included), oldest first,
-- with the database's current minute (one row of NULLs when there are none).
WITH now_minute AS (SELECT date_trunc('minute', now()) AS at)
SELECT n.at AS now_minute, m.queue, m.minute, m.completed, m.failed, m.retried, m.wait, m.run
FROM now_minute n
LEFT JOIN remuda.queue_minutes m
  ON m.minute > n.at - make_interval(mins => $1::int) AND m.minute <= n.at
ORDER BY m.queue, m.minute
