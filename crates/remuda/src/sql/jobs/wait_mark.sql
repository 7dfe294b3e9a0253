-- Ask for a completion notification for one unfinished job (only awaited jobs pay for it):
-- flag 1 (awaited) sends its final write through the finalization seam, which notifies.
UPDATE remuda.jobs_live SET flags = flags | 1
WHERE id = $1 AND flags & 1 = 0 AND state IN ('scheduled', 'available', 'running')
