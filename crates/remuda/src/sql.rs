//! Every SQL statement remuda runs, one `.sql` file each under `src/sql/`, grouped by what it
//! works on (`jobs/`, `workers/`, `queues/`, `maintenance/`, `schedule/`, `notify/`,
//! `workflow/`), so each database operation is written once and `tests/sql_statements.rs`
//! can prepare them all against a migrated database. Each constant's doc is the first line of its file; the file says more.

use crate::db::Pinned;

/// Claim up to $4 available jobs of queue $1 whose kind this worker runs ($2), in priority order, …
pub(crate) const CLAIM: &str = include_str!("sql/jobs/claim.sql");
/// How many of the first $3 jobs waiting in queue $1 (in the order the plain claim walks them) …
pub(crate) const CLAIM_HEAD: &str = include_str!("sql/jobs/claim_head.sql");
/// Claim from queue $1 within its limits, under the lock of claim_lock.sql, for worker $5 …
pub(crate) const CLAIM_LIMITED: &str = include_str!("sql/jobs/claim_limited.sql");
/// Claim from queue $1 within a cap on running jobs (the queue's max_running, the cluster's) …
pub(crate) const CLAIM_CAPPED: &str = include_str!("sql/jobs/claim_capped.sql");
/// Serialise limited claims: the lock of queue $1 and, when the cluster has a cap, first the …
pub(crate) const CLAIM_LOCK: &str = include_str!("sql/jobs/claim_lock.sql");
/// Record a batch of steps, each for the run that holds its job: step $2[i] of job $1[i] with …
pub(crate) const STEP_RECORD: &str = include_str!("sql/steps/step_record.sql");
/// The steps jobs $1 recorded, in the order each recorded them: what a later attempt replays, …
pub(crate) const STEPS_READ: &str = include_str!("sql/steps/steps_read.sql");
/// The cluster-wide settings (one row).
pub(crate) const CLUSTER_GET: &str = include_str!("sql/queues/cluster_get.sql");
/// Set the cluster-wide cap on running jobs ($1, NULL for none) and tell the workers.
pub(crate) const CLUSTER_SET: &str = include_str!("sql/queues/cluster_set.sql");
/// How many of the successes $1 (attempts $2, claim times $3) of worker $4 are written …
pub(crate) const COMPLETED_IN_RUN: &str = include_str!("sql/jobs/completed_in_run.sql");
/// Write the outcomes of many attempts at once: completed, failed, or retried (scheduled, or …
pub(crate) const COMPLETE_JOBS: &str = include_str!("sql/jobs/complete_jobs.sql");
/// Write many successful outcomes at once: the common case of complete_jobs.sql, without its …
pub(crate) const COMPLETE_OK: &str = include_str!("sql/jobs/complete_ok.sql");
/// Bulk insert of jobs due now in PostgreSQL's binary COPY format (the fastest path in: no …
pub(crate) const COPY_JOBS: &str = include_str!("sql/jobs/copy_jobs.sql");
/// Move jobs whose start deadline passed before they started to `expired`, with a …
pub(crate) const EXPIRE: &str = include_str!("sql/jobs/expire.sql");
/// Enqueue one job through remuda.enqueue_job, which forms a debounced, throttled or batched …
pub(crate) const ENQUEUE_FORMED: &str = include_str!("sql/jobs/enqueue_formed.sql");
/// Insert any number of jobs in one statement from parallel arrays (one element per job). …
pub(crate) const INSERT_JOBS: &str = include_str!("sql/jobs/insert_jobs.sql");
/// Insert jobs of which some are unique, in one statement: a job whose unique key ($12) is held …
pub(crate) const INSERT_UNIQUE_JOBS: &str = include_str!("sql/jobs/insert_unique_jobs.sql");
/// Cancel a job that has not finished. A running job's worker is told on `remuda_cancel_run` …
pub(crate) const JOB_CANCEL: &str = include_str!("sql/jobs/job_cancel.sql");
/// The jobs $1 (an array of ids; one for a lookup by id), newest first: every column the CLI …
pub(crate) const JOB_GET: &str = include_str!("sql/jobs/job_get.sql");
/// The ids of the jobs of kind $1 that hold key $2, newest first, at most $3: live jobs …
pub(crate) const JOBS_BY_KEY: &str = include_str!("sql/jobs/jobs_by_key.sql");
/// A page of the jobs in final state $1, latest finished first, after the cursor ($2 finished_at, …
pub(crate) const JOB_PAGE_FINISHED: &str = include_str!("sql/jobs/job_page_finished.sql");
/// A page of the available jobs, in the order they run (priority, run_at, id), after the cursor …
pub(crate) const JOB_PAGE_AVAILABLE: &str = include_str!("sql/jobs/job_page_available.sql");
/// A page of the scheduled jobs, soonest first (run_at, id), after the cursor ($1 run_at, $2 id; …
pub(crate) const JOB_PAGE_SCHEDULED: &str = include_str!("sql/jobs/job_page_scheduled.sql");
/// A page of the running jobs, newest first, below id $1 (NULL for the first page), of queue $2, …
pub(crate) const JOB_PAGE_RUNNING: &str = include_str!("sql/jobs/job_page_running.sql");
/// A page of jobs in any state, latest first by the time that fits each one's state (`at`: …
pub(crate) const JOB_PAGE_RECENT: &str = include_str!("sql/jobs/job_page_recent.sql");
/// The jobs of every state that a bulk action walks: highest id first, below id $1 (NULL for the …
pub(crate) const JOB_PAGE_IDS: &str = include_str!("sql/jobs/job_page_ids.sql");
/// A page of the jobs of workflow run $1, latest first by the time that fits each one's state …
pub(crate) const JOB_PAGE_WORKFLOW: &str = include_str!("sql/jobs/job_page_workflow.sql");
/// Cancel each of the jobs $1 that has not finished, through the finalization seam, as …
pub(crate) const JOB_CANCEL_MANY: &str = include_str!("sql/jobs/job_cancel_many.sql");
/// Delete each of the jobs $1 that is not running (a running job is cancelled first, so its …
pub(crate) const JOB_DELETE: &str = include_str!("sql/jobs/job_delete.sql");
/// Run a job that is not running again, now: a final job gets one more attempt if it used them …
pub(crate) const JOB_RETRY: &str = include_str!("sql/jobs/job_retry.sql");
/// Redrive: run again, now, through the finalization seam, each of the jobs $1 that is failed, …
pub(crate) const JOB_RETRY_MANY: &str = include_str!("sql/jobs/job_retry_many.sql");
/// Take or renew the leader lease for $2 seconds: succeeds (returns a row) when the lease is …
pub(crate) const LEADER_ELECT: &str = include_str!("sql/maintenance/leader_elect.sql");
/// Give up the lease (graceful shutdown) so another worker takes over without waiting for expiry.
pub(crate) const LEADER_RESIGN: &str = include_str!("sql/maintenance/leader_resign.sql");
/// Declare dead the workers silent for longer than their own rescue_after (or already marked: …
pub(crate) const MARK_DEAD: &str = include_str!("sql/workers/mark_dead.sql");
pub(crate) const FORGOTTEN_WORKERS: &str = include_str!("sql/workers/forgotten_workers.sql");
/// Promote up to $1 due scheduled jobs to available, wake their queues, and report when the …
pub(crate) const PROMOTE: &str = include_str!("sql/jobs/promote.sql");
/// Verification mode's history, job by job in the order it was written (see migration 20).
pub(crate) const VERIFY_HISTORY_READ: &str = include_str!("sql/verify/history_read.sql");
/// Each job's state now, and whether a running one's worker is gone or silent (the checker).
pub(crate) const VERIFY_JOBS_NOW: &str = include_str!("sql/verify/jobs_now.sql");
/// Verification mode's history of runs and nodes, each in the order it was written.
pub(crate) const VERIFY_RUN_HISTORY_READ: &str = include_str!("sql/verify/run_history_read.sql");
/// Each run's state now and each node's (the checker).
pub(crate) const VERIFY_RUNS_NOW: &str = include_str!("sql/verify/runs_now.sql");
/// Running runs whose nodes have all ended, and timers overdue by $1 ms (the checker).
pub(crate) const VERIFY_RUNS_STUCK: &str = include_str!("sql/verify/runs_stuck.sql");
/// Verification mode on or off for this database (see remuda.set_history).
pub(crate) const VERIFY_SET_HISTORY: &str = include_str!("sql/verify/set_history.sql");
/// A worker's own retries and snoozes $1 made available once due (see remuda.promote_jobs).
pub(crate) const PROMOTE_IDS: &str = include_str!("sql/jobs/promote_ids.sql");
/// Forget the dead workers $1 whose jobs have all been rescued (a job skipped because it was …
pub(crate) const PRUNE_WORKERS: &str = include_str!("sql/workers/prune_workers.sql");
/// Number of jobs per queue and state, each state counted in its own index rather than the …
pub(crate) const QUEUE_COUNTS: &str = include_str!("sql/queues/queue_counts.sql");
/// The settings of the queues $1 (rows only for queues that have settings), for workers and …
pub(crate) const QUEUE_GET: &str = include_str!("sql/queues/queue_get.sql");
/// The settings of every queue that has some (for `remuda queues`, which also lists the …
pub(crate) const QUEUE_ALL: &str = include_str!("sql/queues/queue_all.sql");
/// The scheduled jobs of queues $1 and kinds $2: how many, and when the first retry (a job …
pub(crate) const SCHEDULED_LEFT: &str = include_str!("sql/queues/scheduled_left.sql");
/// The test databases (remuda_t_*) whose ownership lock no session holds: their test run is …
pub(crate) const TEST_DATABASES_ABANDONED: &str =
    include_str!("sql/maintenance/test_databases_abandoned.sql");
/// The test templates (remuda_tpl_<build>_<YYYYMMDD>) made before yesterday (UTC), of any build: …
pub(crate) const TEST_TEMPLATES_OLD: &str = include_str!("sql/maintenance/test_templates_old.sql");
/// Whether a live worker runs kind $1 in queue $2 (for the warning of `remuda enqueue` about a …
pub(crate) const KIND_SERVED: &str = include_str!("sql/queues/kind_served.sql");
/// Change the settings of queue $1 and tell the workers (`remuda_queue`). For each setting a …
pub(crate) const QUEUE_SET: &str = include_str!("sql/queues/queue_set.sql");
/// Give running jobs back without burning an attempt (graceful shutdown past its timeout): …
pub(crate) const RELEASE_JOBS: &str = include_str!("sql/jobs/release_jobs.sql");
/// Give back the jobs running for worker $1 that it does not know it runs (ids other than $2): …
pub(crate) const RELEASE_ORPHANS: &str = include_str!("sql/jobs/release_orphans.sql");
/// Rescue the running jobs of the dead workers $1 (from mark_dead.sql, with their crash-loop …
pub(crate) const RESCUE: &str = include_str!("sql/jobs/rescue.sql");
/// Per queue, the jobs that completed and failed within the last $1 milliseconds: each …
pub(crate) const THROUGHPUT: &str = include_str!("sql/queues/throughput.sql");
/// Add a worker's tally of one queue and minute to `remuda.queue_minutes` …
pub(crate) const ACTIVITY_ADD: &str = include_str!("sql/workers/activity_add.sql");
/// Every queue's minutes of activity within the last $1 minutes …
pub(crate) const ACTIVITY_READ: &str = include_str!("sql/workers/activity_read.sql");
/// Delete minutes of activity past their age …
pub(crate) const ACTIVITY_PRUNE: &str = include_str!("sql/workers/activity_prune.sql");
/// Delete up to $2 failures set aside (remuda.failures) whose last occurrence is older than $1 …
pub(crate) const FAILURES_PRUNE: &str = include_str!("sql/maintenance/failures_prune.sql");
/// Delete audit entries past their age …
pub(crate) const AUDIT_PRUNE: &str = include_str!("sql/maintenance/audit_prune.sql");
/// The id of the current transaction (assigning one), kept by the completer to ask later …
pub(crate) const TRANSACTION_ID: &str = include_str!("sql/jobs/transaction_id.sql");
/// Whether transaction $1 (from transaction_id.sql) committed: 'committed', 'aborted' or …
pub(crate) const TRANSACTION_STATUS: &str = include_str!("sql/jobs/transaction_status.sql");
/// Which of the runs this worker ($4) has of jobs $1 (attempts $2, claim times $3) are no …
pub(crate) const RUNNING_LOST: &str = include_str!("sql/jobs/running_lost.sql");
/// Unique keys for "unique by args": the kind and the md5 of the args as jsonb (which orders …
pub(crate) const UNIQUE_ARGS_KEYS: &str = include_str!("sql/jobs/unique_args_keys.sql");
/// The jobs that hold the unique keys $1 (in their unique states): the existing jobs a …
pub(crate) const UNIQUE_LOOKUP: &str = include_str!("sql/jobs/unique_lookup.sql");
/// Per queue, the available jobs that no live worker can take: none serving the queue and the …
pub(crate) const UNROUTABLE: &str = include_str!("sql/queues/unroutable.sql");
/// Ask for a completion notification for one unfinished job (only awaited jobs pay for it): …
pub(crate) const WAIT_MARK: &str = include_str!("sql/jobs/wait_mark.sql");
/// A stopping worker leaves the registry, unless it still holds running jobs (its outcomes could …
pub(crate) const WORKER_DEREGISTER: &str = include_str!("sql/workers/worker_deregister.sql");
/// One heartbeat for the whole worker (not one per job): its running jobs live as long as it …
pub(crate) const WORKER_HEARTBEAT: &str = include_str!("sql/workers/worker_heartbeat.sql");
/// Registered workers with what each reported at its last heartbeat (jobs running, attempts …
pub(crate) const WORKER_LIST: &str = include_str!("sql/workers/worker_list.sql");
/// Register a worker, or bring its row back after it was declared dead or forgotten (its old …
pub(crate) const WORKER_REGISTER: &str = include_str!("sql/workers/worker_register.sql");

/// The database's clock: every fire time is computed on it, whichever host computes it.
pub(crate) const CLOCK: &str = include_str!("sql/schedule/clock.sql");
/// Hold the leader lease of $1 at term $2 for the rest of the transaction (no row: not the …
pub(crate) const LEASE_HOLD: &str = include_str!("sql/maintenance/lease_hold.sql");
/// Delete schedule $1 (the jobs it fired stay).
pub(crate) const SCHEDULE_DELETE: &str = include_str!("sql/schedule/schedule_delete.sql");
/// Lock up to $1 schedules due now (oldest first), for the firer's transaction, with what it …
pub(crate) const SCHEDULE_DUE: &str = include_str!("sql/schedule/schedule_due.sql");
/// Fire locked schedules: insert a job per fire time ($5 schedule names, $6 fire times; …
pub(crate) const SCHEDULE_FIRE: &str = include_str!("sql/schedule/schedule_fire.sql");
/// Every schedule ($1 NULL), or the one named $1, with all it shows.
pub(crate) const SCHEDULE_LIST: &str = include_str!("sql/schedule/schedule_list.sql");
/// When the next schedule falls due (NULL: none), and the database's clock.
pub(crate) const SCHEDULE_NEXT_DUE: &str = include_str!("sql/schedule/schedule_next_due.sql");
/// Pause ($2 true) or resume ($2 false) schedule $1. A resumed schedule fires next at $3 (its …
pub(crate) const SCHEDULE_PAUSE: &str = include_str!("sql/schedule/schedule_pause.sql");
/// Fire schedule $1 now, outside its pattern: a job with fire_at = now(), counted as a run; …
pub(crate) const SCHEDULE_TRIGGER: &str = include_str!("sql/schedule/schedule_trigger.sql");
/// Create or replace schedule $1 (kind $2, args $3, queue $4, priority $5, max_attempts $6, …
pub(crate) const SCHEDULE_UPSERT: &str = include_str!("sql/schedule/schedule_upsert.sql");

/// Delete up to $3 jobs in final state $1 that are past their age: their queue's own …
pub(crate) const PRUNE: &str = include_str!("sql/jobs/prune.sql");
/// How many jobs in final state $1 prune.sql would delete with default age $2 ms (a dry run).
pub(crate) const PRUNE_COUNT: &str = include_str!("sql/jobs/prune_count.sql");
/// Create the finished part's day partitions from today to $1 days ahead that are missing. …
pub(crate) const FINISHED_DAYS: &str = include_str!("sql/jobs/finished_days.sql");
/// Drop the finished part's days whose every job is past its age (remuda.finished_days_drop): …
pub(crate) const FINISHED_DAYS_DROP: &str = include_str!("sql/jobs/finished_days_drop.sql");

/// Delete the rate-limit token buckets that are full again (not refreshed for a whole period …
pub(crate) const RATE_BUCKETS_PRUNE: &str = include_str!("sql/queues/rate_buckets_prune.sql");
/// Delete the throttle windows that hold nothing back any more: past their `next_at`, and …
pub(crate) const THROTTLES_PRUNE: &str = include_str!("sql/queues/throttles_prune.sql");
/// Delete the groups of fair queues that hold nothing a new row would not: weight 1, no start …
pub(crate) const GROUPS_PRUNE: &str = include_str!("sql/queues/groups_prune.sql");
/// Set the weight of group $2 of queue $1 to $3 (the group '' is the jobs without a group). Its …
pub(crate) const GROUP_WEIGHT: &str = include_str!("sql/queues/group_weight.sql");
/// The waiting jobs of group $2 of queue $1 (the group '' is the jobs without a group) spaced …
pub(crate) const GROUP_RETAG: &str = include_str!("sql/queues/group_retag.sql");
/// The start tags of queue $1's waiting jobs made to agree with its fair share: with fairness …
pub(crate) const FAIR_TAG_QUEUE: &str = include_str!("sql/queues/fair_tag_queue.sql");
/// The groups of queue $1 that have a weight set, jobs waiting or running, or starts in the last …
pub(crate) const QUEUE_GROUPS: &str = include_str!("sql/queues/queue_groups.sql");
/// Record the latest runs of the duties $1 (started $2, lasting $3 ms, ok $4, what they did …
pub(crate) const MAINTENANCE_RECORD: &str = include_str!("sql/maintenance/maintenance_record.sql");
/// Who leads maintenance (no row: nobody ever did), since when, at which term, and whether …
pub(crate) const MAINTENANCE_STATUS: &str = include_str!("sql/maintenance/maintenance_status.sql");
/// Each duty's latest run, by duty.
pub(crate) const MAINTENANCE_RUNS: &str = include_str!("sql/maintenance/maintenance_runs.sql");

/// The indexes of remuda.jobs worth rebuilding: valid, at least $1 bytes, and more than $2 …
pub(crate) const REINDEX_CANDIDATES: &str = include_str!("sql/maintenance/reindex_candidates.sql");
/// What an interrupted `REINDEX … CONCURRENTLY` leaves in the remuda schema: invalid copies …
pub(crate) const REINDEX_LEFTOVERS: &str = include_str!("sql/maintenance/reindex_leftovers.sql");

/// The remuda tables whose dead rows are past twice the threshold autovacuum was given for …
pub(crate) const VACUUM_DUE: &str = include_str!("sql/maintenance/vacuum_due.sql");

/// Start a run of compiled definition $1 with input $2, or find the one started with
pub(crate) const WORKFLOW_START: &str = include_str!("sql/workflow/workflow_start.sql");
/// Whether run $1 was started with an input other than $2: asked when an idempotency key found …
pub(crate) const WORKFLOW_INPUT_DIFFERS: &str =
    include_str!("sql/workflow/workflow_input_differs.sql");
/// The compiled definition run $1 was started with, and its group (to start a new run of it).
pub(crate) const WORKFLOW_DEFINITION: &str = include_str!("sql/workflow/workflow_definition.sql");
/// One run: what `remuda workflow status` shows besides its nodes.
pub(crate) const WORKFLOW_GET: &str = include_str!("sql/workflow/workflow_get.sql");
/// The nodes of run $1 in topological order, with their error and, for a map, its elements'
pub(crate) const WORKFLOW_NODES: &str = include_str!("sql/workflow/workflow_nodes.sql");
/// Runs in state $1 and of definition $2 (each NULL for all), newest first, up to $3, with
pub(crate) const WORKFLOW_LIST: &str = include_str!("sql/workflow/workflow_list.sql");
/// Pause run $1 (see remuda.workflow_pause): the state it had, NULL when there is no such r …
pub(crate) const WORKFLOW_PAUSE: &str = include_str!("sql/workflow/workflow_pause.sql");
/// Resume run $1 (see remuda.workflow_resume): the state it had, NULL when there is no such …
pub(crate) const WORKFLOW_RESUME: &str = include_str!("sql/workflow/workflow_resume.sql");
/// Cancel run $1 (see remuda.workflow_cancel): the state it had, NULL when there is no such …
pub(crate) const WORKFLOW_CANCEL: &str = include_str!("sql/workflow/workflow_cancel.sql");
/// Retry run $1 (see remuda.workflow_retry): the state it had, NULL when there is no such r …
pub(crate) const WORKFLOW_RETRY: &str = include_str!("sql/workflow/workflow_retry.sql");
/// Deliver signal $2 with payload $3 to run $1: the nodes it completed, -1 when the run has
pub(crate) const WORKFLOW_SIGNAL: &str = include_str!("sql/workflow/workflow_signal.sql");
/// The timer duty's step for up to $1 runs (due sleeps, signal timeouts, run deadlines), and
pub(crate) const WORKFLOW_TIMERS: &str = include_str!("sql/workflow/workflow_timers.sql");
/// The recovery step for up to $1 runs: advancement that was not written (see
pub(crate) const WORKFLOW_REPAIR: &str = include_str!("sql/workflow/workflow_repair.sql");

/// Delete up to $4 finished workflow runs past their age: completed runs after $1 ms, failed …
pub(crate) const WORKFLOW_PRUNE: &str = include_str!("sql/workflow/workflow_prune.sql");

/// Claim up to $1 due notifications for dispatcher $3 with a lease of $2 ms …
pub(crate) const NOTIFICATION_CLAIM: &str = include_str!("sql/notify/notification_claim.sql");

/// Mark notifications $1 delivered; returns each one's delivery latency …
pub(crate) const NOTIFICATION_SENT: &str = include_str!("sql/notify/notification_sent.sql");

/// Record failed attempts: due again after a delay, or dead …
pub(crate) const NOTIFICATION_FAILED: &str = include_str!("sql/notify/notification_failed.sql");

/// Milliseconds until the next pending notification is due …
pub(crate) const NOTIFICATION_NEXT_DUE: &str = include_str!("sql/notify/notification_next_due.sql");

/// Notifications, newest first, by state, job and workflow run …
pub(crate) const NOTIFICATION_LIST: &str = include_str!("sql/notify/notification_list.sql");

/// Make dead notification $1 due now, its attempts anew …
pub(crate) const NOTIFICATION_RETRY: &str = include_str!("sql/notify/notification_retry.sql");

/// A worker's notification defaults for its kinds …
pub(crate) const NOTIFICATION_DEFAULTS_SET: &str =
    include_str!("sql/notify/notification_defaults_set.sql");

/// Delete up to $3 sent and dead notifications past their age …
pub(crate) const NOTIFICATION_PRUNE: &str = include_str!("sql/notify/notification_prune.sql");

/// The claims' planner settings (claim.sql, and claim_capped.sql or claim_limited.sql in their
/// transaction): the locked rows are found again by place (a TID scan) and the running and
/// waiting jobs counted through their indexes, never by a scan of the table, whatever the
/// table held when the connection planned them (see claim.sql).
pub const CLAIM_PLAN: &str = "SET LOCAL enable_seqscan = off";
/// The lean completion's planner settings: one TID lookup per outcome, the only way left to
/// the rows (see complete_ok.sql).
pub const COMPLETE_OK_PLAN: &str = "SET LOCAL enable_seqscan = off; SET LOCAL enable_indexscan = off; \
     SET LOCAL enable_bitmapscan = off; SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off";
/// The claim, run under its planner settings.
pub(crate) const CLAIM_PINNED: Pinned = Pinned {
    text: CLAIM,
    plan: CLAIM_PLAN,
};
/// The look at the head of a queue, run under the claims' planner settings.
pub(crate) const CLAIM_HEAD_PINNED: Pinned = Pinned {
    text: CLAIM_HEAD,
    plan: CLAIM_PLAN,
};
/// The lean completion, run under its planner settings.
pub(crate) const COMPLETE_OK_PINNED: Pinned = Pinned {
    text: COMPLETE_OK,
    plan: COMPLETE_OK_PLAN,
};
/// The promotion's planner settings: due scheduled jobs found through their index, never by a
/// scan of the table — planned on an empty table, the promoter read every job twice a tick
/// (the due ones and the next due time) while a backlog waited.
pub const PROMOTE_PLAN: &str = "SET LOCAL enable_seqscan = off";
/// The promotion, run under its planner settings.
pub(crate) const PROMOTE_PINNED: Pinned = Pinned {
    text: PROMOTE,
    plan: PROMOTE_PLAN,
};
/// The dispatcher's claim, run under the claims' planner settings: the locked rows written
/// by place (a TID scan), never by a scan of the outbox (see notification_claim.sql).
pub(crate) const NOTIFICATION_CLAIM_PINNED: Pinned = Pinned {
    text: NOTIFICATION_CLAIM,
    plan: CLAIM_PLAN,
};
/// The mark of delivered notifications, under the claims' planner settings: found by
/// primary key, never by a scan of the outbox or of its due index (see notification_sent.sql).
pub(crate) const NOTIFICATION_SENT_PINNED: Pinned = Pinned {
    text: NOTIFICATION_SENT,
    plan: CLAIM_PLAN,
};
/// The record of a batch of steps: jobs and steps found by primary key, never by a scan (the
/// claims' planner settings), and a job row another transaction holds waited for 10 s at
/// most, so that one long transaction cannot hold up the steps of every run of the worker
/// (see step_record.sql).
pub(crate) const STEP_RECORD_PINNED: Pinned = Pinned {
    text: STEP_RECORD,
    plan: STEP_RECORD_PLAN,
};
/// The step record's planner and lock settings.
pub const STEP_RECORD_PLAN: &str = "SET LOCAL enable_seqscan = off; SET LOCAL lock_timeout = '10s'";
/// The read of a job's steps, under the claims' planner settings: by primary key, never by a
/// scan of the steps of every job.
pub(crate) const STEPS_READ_PINNED: Pinned = Pinned {
    text: STEPS_READ,
    plan: CLAIM_PLAN,
};
/// The statements run under planner settings of their own (see `db::Pinned`),
/// by name, for the test of their plans.
pub const PLANS: &[(&str, &str)] = &[
    ("claim", CLAIM_PLAN),
    ("claim_head", CLAIM_PLAN),
    ("claim_capped", CLAIM_PLAN),
    ("claim_limited", CLAIM_PLAN),
    ("complete_ok", COMPLETE_OK_PLAN),
    ("notification_claim", CLAIM_PLAN),
    ("notification_sent", CLAIM_PLAN),
    ("step_record", STEP_RECORD_PLAN),
    ("steps_read", CLAIM_PLAN),
    ("promote", PROMOTE_PLAN),
];

/// Every statement with its name, for the test that prepares them all.
pub const ALL: &[(&str, &str)] = &[
    ("claim", CLAIM),
    ("claim_head", CLAIM_HEAD),
    ("claim_capped", CLAIM_CAPPED),
    ("claim_limited", CLAIM_LIMITED),
    ("claim_lock", CLAIM_LOCK),
    ("cluster_get", CLUSTER_GET),
    ("cluster_set", CLUSTER_SET),
    ("complete_jobs", COMPLETE_JOBS),
    ("completed_in_run", COMPLETED_IN_RUN),
    ("complete_ok", COMPLETE_OK),
    ("copy_jobs", COPY_JOBS),
    ("expire", EXPIRE),
    ("enqueue_formed", ENQUEUE_FORMED),
    ("insert_jobs", INSERT_JOBS),
    ("insert_unique_jobs", INSERT_UNIQUE_JOBS),
    ("job_cancel", JOB_CANCEL),
    ("job_get", JOB_GET),
    ("jobs_by_key", JOBS_BY_KEY),
    ("job_page_finished", JOB_PAGE_FINISHED),
    ("job_page_available", JOB_PAGE_AVAILABLE),
    ("job_page_scheduled", JOB_PAGE_SCHEDULED),
    ("job_page_running", JOB_PAGE_RUNNING),
    ("job_page_recent", JOB_PAGE_RECENT),
    ("job_page_workflow", JOB_PAGE_WORKFLOW),
    ("job_page_ids", JOB_PAGE_IDS),
    ("workflow_input_differs", WORKFLOW_INPUT_DIFFERS),
    ("job_cancel_many", JOB_CANCEL_MANY),
    ("job_delete", JOB_DELETE),
    ("throughput", THROUGHPUT),
    ("activity_add", ACTIVITY_ADD),
    ("activity_read", ACTIVITY_READ),
    ("activity_prune", ACTIVITY_PRUNE),
    ("failures_prune", FAILURES_PRUNE),
    ("audit_prune", AUDIT_PRUNE),
    ("workflow_definition", WORKFLOW_DEFINITION),
    ("job_retry", JOB_RETRY),
    ("job_retry_many", JOB_RETRY_MANY),
    ("leader_elect", LEADER_ELECT),
    ("leader_resign", LEADER_RESIGN),
    ("mark_dead", MARK_DEAD),
    ("forgotten_workers", FORGOTTEN_WORKERS),
    ("promote", PROMOTE),
    ("promote_ids", PROMOTE_IDS),
    ("verify_history_read", VERIFY_HISTORY_READ),
    ("verify_jobs_now", VERIFY_JOBS_NOW),
    ("verify_set_history", VERIFY_SET_HISTORY),
    ("verify_run_history_read", VERIFY_RUN_HISTORY_READ),
    ("verify_runs_now", VERIFY_RUNS_NOW),
    ("verify_runs_stuck", VERIFY_RUNS_STUCK),
    ("prune_workers", PRUNE_WORKERS),
    ("queue_counts", QUEUE_COUNTS),
    ("queue_get", QUEUE_GET),
    ("queue_all", QUEUE_ALL),
    ("kind_served", KIND_SERVED),
    ("test_databases_abandoned", TEST_DATABASES_ABANDONED),
    ("test_templates_old", TEST_TEMPLATES_OLD),
    ("scheduled_left", SCHEDULED_LEFT),
    ("queue_set", QUEUE_SET),
    ("release_jobs", RELEASE_JOBS),
    ("release_orphans", RELEASE_ORPHANS),
    ("rescue", RESCUE),
    ("running_lost", RUNNING_LOST),
    ("transaction_id", TRANSACTION_ID),
    ("transaction_status", TRANSACTION_STATUS),
    ("unique_args_keys", UNIQUE_ARGS_KEYS),
    ("unique_lookup", UNIQUE_LOOKUP),
    ("unroutable", UNROUTABLE),
    ("wait_mark", WAIT_MARK),
    ("worker_deregister", WORKER_DEREGISTER),
    ("worker_heartbeat", WORKER_HEARTBEAT),
    ("worker_list", WORKER_LIST),
    ("worker_register", WORKER_REGISTER),
    ("vacuum_due", VACUUM_DUE),
    ("reindex_candidates", REINDEX_CANDIDATES),
    ("reindex_leftovers", REINDEX_LEFTOVERS),
    ("rate_buckets_prune", RATE_BUCKETS_PRUNE),
    ("throttles_prune", THROTTLES_PRUNE),
    ("groups_prune", GROUPS_PRUNE),
    ("group_weight", GROUP_WEIGHT),
    ("group_retag", GROUP_RETAG),
    ("fair_tag_queue", FAIR_TAG_QUEUE),
    ("queue_groups", QUEUE_GROUPS),
    ("maintenance_record", MAINTENANCE_RECORD),
    ("maintenance_status", MAINTENANCE_STATUS),
    ("maintenance_runs", MAINTENANCE_RUNS),
    ("prune", PRUNE),
    ("prune_count", PRUNE_COUNT),
    ("finished_days", FINISHED_DAYS),
    ("finished_days_drop", FINISHED_DAYS_DROP),
    ("clock", CLOCK),
    ("lease_hold", LEASE_HOLD),
    ("schedule_delete", SCHEDULE_DELETE),
    ("schedule_due", SCHEDULE_DUE),
    ("schedule_fire", SCHEDULE_FIRE),
    ("schedule_list", SCHEDULE_LIST),
    ("schedule_next_due", SCHEDULE_NEXT_DUE),
    ("schedule_pause", SCHEDULE_PAUSE),
    ("schedule_trigger", SCHEDULE_TRIGGER),
    ("schedule_upsert", SCHEDULE_UPSERT),
    ("workflow_start", WORKFLOW_START),
    ("workflow_prune", WORKFLOW_PRUNE),
    ("workflow_get", WORKFLOW_GET),
    ("workflow_nodes", WORKFLOW_NODES),
    ("workflow_list", WORKFLOW_LIST),
    ("workflow_pause", WORKFLOW_PAUSE),
    ("workflow_resume", WORKFLOW_RESUME),
    ("workflow_cancel", WORKFLOW_CANCEL),
    ("workflow_retry", WORKFLOW_RETRY),
    ("workflow_signal", WORKFLOW_SIGNAL),
    ("workflow_timers", WORKFLOW_TIMERS),
    ("workflow_repair", WORKFLOW_REPAIR),
    ("notification_claim", NOTIFICATION_CLAIM),
    ("notification_sent", NOTIFICATION_SENT),
    ("notification_failed", NOTIFICATION_FAILED),
    ("notification_next_due", NOTIFICATION_NEXT_DUE),
    ("notification_list", NOTIFICATION_LIST),
    ("notification_retry", NOTIFICATION_RETRY),
    ("notification_defaults_set", NOTIFICATION_DEFAULTS_SET),
    ("notification_prune", NOTIFICATION_PRUNE),
    ("step_record", STEP_RECORD),
    ("steps_read", STEPS_READ),
];
