-- Record failed attempts: each row $1 whose attempt $2 is still its latest (a row claimed
-- again since, after its lease ran out, belongs to the newer attempt) becomes due again
-- after $4 ms, or `dead` when $3, with its error $5.
UPDATE remuda.notifications n
SET state = (CASE WHEN u.dead THEN 'dead' ELSE 'pending' END)::remuda.notification_state,
    next_attempt_at = CASE WHEN u.dead THEN n.next_attempt_at
                           ELSE now() + u.delay_ms * interval '1 millisecond' END,
    finished_at = CASE WHEN u.dead THEN now() END,
    last_error = u.error,
    claimed_by = NULL
FROM unnest($1::bigint[], $2::int[], $3::bool[], $4::bigint[], $5::text[])
    AS u(id, attempts, dead, delay_ms, error)
WHERE n.id = u.id AND n.attempts = u.attempts AND n.state = 'pending'
