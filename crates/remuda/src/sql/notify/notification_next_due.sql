-- Milliseconds until the next pending notification is due (0 if one is due now, NULL if
-- there is none): the dispatcher sleeps that long when nothing wakes it first.
SELECT GREATEST(0, ceil(extract(epoch FROM min(next_attempt_at) - now()) * 1000))::bigint AS wait_ms
FROM remuda.notifications
WHERE state = 'pending'
