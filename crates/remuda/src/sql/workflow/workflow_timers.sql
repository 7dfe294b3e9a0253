-- The timer duty's step for up to $1 runs (due sleeps, signal timeouts, run deadlines), and
-- when the next timer is due.
SELECT remuda.workflow_timers($1) AS ended, remuda.workflow_next_timer() AS next_at
