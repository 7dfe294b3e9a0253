-- Whether run $1 was started with an input other than $2: asked when an idempotency key found
-- a run started before, in a statement of its own, so that a run another session committed
-- while the start ran is seen.
SELECT w.input IS DISTINCT FROM $2::jsonb AS differs FROM remuda.workflows w WHERE w.id = $1
