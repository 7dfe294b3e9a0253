-- Start a run of compiled definition $1 with input $2, or find the one started with
-- idempotency key $3 (NULL: none): its id, whether it existed, whether its definition differs,
-- and whether the input it was started with differs from $2 (which is then not used).
SELECT w.id, w.existed, w.drift,
       (w.existed AND r.input IS DISTINCT FROM $2::jsonb) AS input_differs
FROM remuda.workflow_start($1::jsonb, $2::jsonb, $3::text) w
LEFT JOIN remuda.workflows r ON r.id = w.id
