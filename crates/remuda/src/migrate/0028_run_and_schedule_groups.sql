-- remuda schema, version 28: a workflow run and a schedule carry a fair-share group.
--
-- A run's node jobs take its group (as they take its trace context), a sub-workflow its
-- parent's, and a schedule's fired jobs its own: a tenant's work stays in its group on a
-- queue with fair share on. NULL (no group) for every run and schedule until now: constant
-- defaults, so adding them rewrites nothing.
ALTER TABLE remuda.workflows ADD COLUMN group_key text;
ALTER TABLE remuda.schedules ADD COLUMN group_key text;
