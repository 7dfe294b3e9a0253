-- Create the finished part's day partitions from today to $1 days ahead that are missing
-- (remuda.finished_days): finished jobs then land in their day's partition, which retention
-- can drop whole. Returns how many were created.
SELECT remuda.finished_days($1::int) AS created
