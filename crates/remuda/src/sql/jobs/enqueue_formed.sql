-- Enqueue one job through remuda.enqueue_job, which forms a debounced, throttled or batched
-- job from many enqueues (the Rust client's path for jobs with a formation, and for the jobs
-- of a batch that holds one): its id, whether it joined a waiting job, whether it was a
-- duplicate of a unique job. Durations in milliseconds.
SELECT e.id, e.joined, e.duplicate
FROM remuda.enqueue_job(
    kind => $1, args => $2, queue => $3, priority => $4, run_at => $5, max_attempts => $6,
    timeout => $7::bigint * interval '1 millisecond', deadline => $8,
    unique_key => $9, unique_by_args => $10, unique_states => $11::text[],
    unique_period => $12::bigint * interval '1 millisecond', unique_per_queue => $13,
    concurrency_key => $14, target_worker => $15, requires => $16::text[], notify => $17,
    debounce => $18::bigint * interval '1 millisecond', debounce_max => $19::bigint * interval '1 millisecond',
    throttle => $20::bigint * interval '1 millisecond', throttle_latest => $21,
    batch_key => $22, batch_size => $23, batch_wait => $24::bigint * interval '1 millisecond',
    group_key => $25, traceparent => $26, tracestate => $27) e
