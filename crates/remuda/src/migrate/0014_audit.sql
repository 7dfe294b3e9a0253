-- remuda schema, version 14: the audit log of the dashboard and its API.
--
-- Every change made through the dashboard's pages or its JSON API (retry, cancel, delete,
-- enqueue, pause, limits, workflow and schedule actions) is one row: who (the name of the
-- token used), how (api or page), what, to which target, with what outcome, when: written
-- right after the change, read newest first by id.
CREATE TABLE remuda.audit (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      timestamptz NOT NULL DEFAULT now(),
    actor   text NOT NULL,
    via     text NOT NULL CHECK (via IN ('api', 'page')),
    action  text NOT NULL,
    target  text NOT NULL,
    detail  jsonb NOT NULL DEFAULT '{}'
);
