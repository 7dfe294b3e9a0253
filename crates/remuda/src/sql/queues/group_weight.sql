-- Set the weight of group $2 of queue $1 to $3 (the group '' is the jobs without a group). Its
-- virtual time is kept: the new weight counts from its next start.
INSERT INTO remuda.queue_groups AS g (queue, name, weight) VALUES ($1, $2, $3)
ON CONFLICT (queue, name) DO UPDATE SET weight = EXCLUDED.weight, updated_at = now()
RETURNING g.name, g.weight
