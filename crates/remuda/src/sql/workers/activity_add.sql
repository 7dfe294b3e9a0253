-- Adds one worker's tally to queue $1's minute $2: $3 completed, $4 failed for good, $5 to be
-- retried, and the wait ($6) and run ($7) histograms, bucket by bucket.
INSERT INTO remuda.queue_minutes AS m (queue, minute, completed, failed, retried, wait, run)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (queue, minute) DO UPDATE SET
    completed = m.completed + excluded.completed,
    failed = m.failed + excluded.failed,
    retried = m.retried + excluded.retried,
    wait = remuda.add_counts(m.wait, excluded.wait),
    run = remuda.add_counts(m.run, excluded.run)
