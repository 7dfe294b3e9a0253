-- remuda schema, version 18: functions kept in files of their own.
--
-- From this version every function of the schema lives in one file under `src/schema/`
-- (jobs/, workflow/, notify/, enqueue/), applied with CREATE OR REPLACE on every migrate
-- and recorded with its hash in remuda.schema_functions (see migrate/functions.rs). So a
-- fix edits the function's one file; migrations keep tables, types and indexes.
--
-- The seam's two hooks were registered by versions 11 and 13, beside their functions. Their
-- functions now arrive after those migrations on a new database, so the hooks are
-- registered here (a database that has them keeps them).
INSERT INTO remuda.transition_hooks (name, function)
VALUES ('workflow', 'remuda.workflow_advance(remuda.transition[])'),
       ('notify', 'remuda.notify_outbox(remuda.transition[])')
ON CONFLICT (name) DO NOTHING;
