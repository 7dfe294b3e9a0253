-- Enqueues one job and returns its id (for a duplicate of a unique job, the id of the job
-- holding the key). Every parameter after args is named and optional:
--   SELECT remuda.enqueue('email', '{"to": "a@example.com"}', queue => 'mail', delay => '5 minutes');
-- run_at or delay: not before then; deadline: expires unless started before it; timeout:
-- of each attempt; unique_key / unique_by_args with unique_states, unique_period and
-- unique_per_queue: as the Rust client's Unique; concurrency_key, target_worker, requires:
-- flow control and routing; group_key: the group a queue with fair share on shares its
-- starts by (`group` is a reserved word in SQL); traceparent, tracestate: the W3C trace
-- context the job continues; notify: a {"webhook", "email", "on"} target; debounce with
-- debounce_max, throttle with throttle_latest, batch_key with batch_size and batch_wait: a job
-- formed from many enqueues (see enqueue_job.sql, which does the work). Args are limited to
-- the setting remuda.max_payload (bytes, default 1 MiB), as the client's max_payload, measured
-- on the jsonb's text (which spaces its separators: a little more than compact JSON).
-- (the signatures of versions before debounce, throttle and batches, and before groups and
-- trace contexts: replaced by this one)
DROP FUNCTION IF EXISTS remuda.enqueue(text, jsonb, text, integer, timestamptz, interval, integer, interval,
    timestamptz, text, boolean, text[], interval, boolean, text, text, text[], jsonb);
DROP FUNCTION IF EXISTS remuda.enqueue(text, jsonb, text, integer, timestamptz, interval, integer, interval,
    timestamptz, text, boolean, text[], interval, boolean, text, text, text[], jsonb, interval, interval, interval,
    boolean, text, integer, interval);
DROP FUNCTION IF EXISTS remuda.enqueue(text, jsonb, text, integer, timestamptz, interval, integer, interval,
    timestamptz, text, boolean, text[], interval, boolean, text, text, text[], jsonb, interval, interval, interval,
    boolean, text, integer, interval, text);
CREATE OR REPLACE FUNCTION remuda.enqueue(
    kind text,
    args jsonb DEFAULT '{}',
    queue text DEFAULT 'default',
    priority integer DEFAULT 0,
    run_at timestamptz DEFAULT NULL,
    delay interval DEFAULT NULL,
    max_attempts integer DEFAULT NULL,
    timeout interval DEFAULT NULL,
    deadline timestamptz DEFAULT NULL,
    unique_key text DEFAULT NULL,
    unique_by_args boolean DEFAULT false,
    unique_states text[] DEFAULT NULL,
    unique_period interval DEFAULT NULL,
    unique_per_queue boolean DEFAULT false,
    concurrency_key text DEFAULT NULL,
    target_worker text DEFAULT NULL,
    requires text[] DEFAULT NULL,
    notify jsonb DEFAULT NULL,
    debounce interval DEFAULT NULL,
    debounce_max interval DEFAULT NULL,
    throttle interval DEFAULT NULL,
    throttle_latest boolean DEFAULT false,
    batch_key text DEFAULT NULL,
    batch_size integer DEFAULT NULL,
    batch_wait interval DEFAULT NULL,
    group_key text DEFAULT NULL,
    traceparent text DEFAULT NULL,
    tracestate text DEFAULT NULL
) RETURNS bigint LANGUAGE sql AS $$
    SELECT e.id FROM remuda.enqueue_job(
        kind => enqueue.kind,
        args => enqueue.args,
        queue => enqueue.queue,
        priority => enqueue.priority,
        run_at => enqueue.run_at,
        delay => enqueue.delay,
        max_attempts => enqueue.max_attempts,
        timeout => enqueue.timeout,
        deadline => enqueue.deadline,
        unique_key => enqueue.unique_key,
        unique_by_args => enqueue.unique_by_args,
        unique_states => enqueue.unique_states,
        unique_period => enqueue.unique_period,
        unique_per_queue => enqueue.unique_per_queue,
        concurrency_key => enqueue.concurrency_key,
        target_worker => enqueue.target_worker,
        requires => enqueue.requires,
        notify => enqueue.notify,
        debounce => enqueue.debounce,
        debounce_max => enqueue.debounce_max,
        throttle => enqueue.throttle,
        throttle_latest => enqueue.throttle_latest,
        batch_key => enqueue.batch_key,
        batch_size => enqueue.batch_size,
        batch_wait => enqueue.batch_wait,
        group_key => enqueue.group_key,
        traceparent => enqueue.traceparent,
        tracestate => enqueue.tracestate) e
$$;
