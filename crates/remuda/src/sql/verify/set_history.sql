-- Verification mode on ($1 true) or off for this database (see remuda.set_history).
SELECT remuda.set_history($1::boolean)
