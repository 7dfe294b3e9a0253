-- Notifications waiting to be sent, and those given up, for the dashboard's gauges: the
-- pending ones in their due index, the dead ones counted up to $1.
SELECT (SELECT count(*) FROM remuda.notifications WHERE state = 'pending') AS pending,
       (SELECT count(*) FROM (SELECT 1 FROM remuda.notifications
                              WHERE state = 'dead' LIMIT $1) d) AS dead
