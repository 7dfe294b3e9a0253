-- remuda schema, version 24: W3C trace context carried from the enqueue to the task.
--
-- A job may carry the `traceparent` (and `tracestate`) of the request that enqueued it; its
-- worker hands each attempt a child of it (the attempt's own span as parent) and passes it on
-- to the task, and the job's webhooks carry it. A workflow run keeps the context it was
-- started with, and its node jobs take it. NULL for every job without one: constant defaults,
-- so adding them rewrites nothing.
ALTER TABLE remuda.jobs
    ADD COLUMN traceparent text,
    ADD COLUMN tracestate text;
ALTER TABLE remuda.workflows
    ADD COLUMN traceparent text,
    ADD COLUMN tracestate text;
