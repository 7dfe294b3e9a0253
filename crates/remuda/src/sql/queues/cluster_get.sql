-- The cluster-wide settings (one row).
SELECT max_running, updated_at FROM remuda.cluster
