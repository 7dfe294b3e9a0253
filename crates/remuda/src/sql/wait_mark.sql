-- Ask for a completion notification for one unfinished job (only awaited jobs pay for it).
UPDATE remuda.jobs SET awaited = true
WHERE id = $1 AND NOT awaited AND state IN ('scheduled', 'available', 'running')
