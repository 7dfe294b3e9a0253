-- The database's clock: every fire time is computed on it, whichever host computes it.
SELECT now() AS now
