-- Pause ($2 true) or resume ($2 false) schedule $1, if it is not so already (no row
-- otherwise). A resumed schedule fires next at $3 (its first time after now: the times it
-- was paused over are not caught up); NULL keeps it.
UPDATE remuda.schedules
SET paused = $2, next_run_at = COALESCE($3, next_run_at), updated_at = now()
WHERE name = $1 AND paused <> $2
RETURNING name
