-- Set the cluster-wide cap on running jobs ($1, NULL for none) and tell the workers.
UPDATE remuda.cluster SET max_running = $1, updated_at = now()
RETURNING max_running, updated_at, pg_notify('remuda_queue', '*') IS NULL AS notified
