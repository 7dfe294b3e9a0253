-- Write the outcomes of many attempts at once, through the finalization seam: ids $1,
-- attempts $2, claim times $3, outcomes $4 (`completed`, `failed`, `retry`, `snooze`), results
-- $5, errors $6 and delays $7 of worker $8, written by remuda.write_outcomes (guarded: a stale
-- write is rejected) at the places remuda.job_places finds by id. The rows written go to
-- remuda.transitioned() in the same statement, under the session's own planner settings; the
-- completer runs it in a transaction whose id it keeps, so a commit whose answer was lost
-- can be told from one that failed (see completer.rs).
-- Returns how many rows it wrote, by the state they reached.
WITH written AS MATERIALIZED (
    SELECT * FROM remuda.write_outcomes(remuda.job_places($1::bigint[]), $1::bigint[], $2::int[],
                                        $3::timestamptz[], $4::text[], $5::jsonb[], $6::jsonb[],
                                        $7::bigint[], $8::text)
)
SELECT count(*) AS written,
       count(*) FILTER (WHERE w.state = 'completed') AS completed,
       count(*) FILTER (WHERE w.state = 'failed') AS failed,
       count(*) FILTER (WHERE w.outcome = 'retry' AND w.state <> 'failed') AS retried,
       count(*) FILTER (WHERE w.outcome = 'snooze') AS snoozed,
       remuda.transitioned(array_agg(ROW(w.id, w.queue, w.kind, w.flags, w.counted, 'running',
                                         w.state, w.attempt)::remuda.transition)) AS seam
FROM written w
