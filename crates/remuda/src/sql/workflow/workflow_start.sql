-- Start a run of compiled definition $1 with input $2, or find the one started with
-- idempotency key $3 (NULL: none), continuing the trace context $4, $5, in the fair-share
-- group $6: its id, whether it existed, whether its definition differs.
SELECT w.id, w.existed, w.drift
FROM remuda.workflow_start($1::jsonb, $2::jsonb, $3::text, $4::text, $5::text, $6::text) w
