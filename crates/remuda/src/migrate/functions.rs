//! The schema's functions, one file each under `src/schema/`, applied on every migrate.
//!
//! Migrations keep tables, types and indexes; functions are code, kept where a fix edits
//! them once. Each file holds one `CREATE OR REPLACE FUNCTION` (and its comment) and is
//! recorded in `remuda.schema_functions` with the md5 of its text and the remuda version
//! that applied it. A run of [`super::run`] applies, under the migration lock and in one
//! transaction, every file whose text differs from what is recorded — unless a newer
//! remuda applied it (a rolling upgrade: an older worker starting up leaves the newer
//! functions alone). A file is applied before the first migration after its `since`: the
//! tables and types it names exist by then, and a later migration may use it (the job
//! table's trigger, the seam's hooks).
//!
//! `CREATE OR REPLACE` cannot change a function's result type or its arguments' names: a
//! file that does so drops the old signature first (`DROP FUNCTION IF EXISTS …;`).

use crate::db::Conn;
use crate::{Error, Result};

/// One function's file.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Function {
    /// Its path under `src/schema/`, without `.sql`: `workflow/wf_decide`.
    pub name: &'static str,
    /// The schema version whose tables and types it needs.
    pub since: i32,
    pub sql: &'static str,
}

macro_rules! function {
    ($dir:literal, $name:literal, $since:literal) => {
        Function {
            name: concat!($dir, "/", $name),
            since: $since,
            sql: include_str!(concat!("../schema/", $dir, "/", $name, ".sql")),
        }
    };
}

/// Every function, in the order they are applied (a `LANGUAGE sql` function's body is
/// checked when it is created, so what it calls comes first).
pub(crate) const FUNCTIONS: &[Function] = &[
    function!("jobs", "notify_insert", 0),
    function!("jobs", "retry_or_fail", 8),
    function!("jobs", "fair_tag_jobs", 29),
    function!("jobs", "promote_jobs", 29),
    function!("jobs", "outcome_state", 8),
    function!("jobs", "is_final", 8),
    function!("jobs", "is_transient", 0),
    function!("jobs", "record_failure", 19),
    function!("jobs", "transitioned", 8),
    function!("jobs", "retention_ms", 9),
    function!("jobs", "of_run", 11),
    function!("jobs", "lock_jobs", 11),
    function!("jobs", "finish_jobs", 29),
    function!("jobs", "start_jobs", 29),
    function!("jobs", "release_jobs", 26),
    function!("jobs", "finished_days", 25),
    function!("jobs", "finished_days_drop", 26),
    function!("jobs", "unique_finished_hold", 25),
    function!("jobs", "cancel_jobs", 26),
    function!("jobs", "revive_jobs", 29),
    function!("workflow", "wf_node_state", 11),
    function!("workflow", "wf_job_result", 11),
    function!("workflow", "wf_error", 11),
    function!("workflow", "wf_pointer", 11),
    function!("workflow", "wf_condition", 11),
    function!("workflow", "wf_reads", 11),
    function!("workflow", "wf_decide", 11),
    function!("workflow", "wf_plain_task", 11),
    function!("workflow", "wf_args", 11),
    function!("workflow", "wf_context", 11),
    function!("workflow", "wf_map_result", 11),
    function!("workflow", "wf_start_tasks", 28),
    function!("workflow", "wf_start_map", 28),
    function!("workflow", "wf_start_other", 28),
    function!("workflow", "wf_queue_full", 11),
    function!("workflow", "wf_start_failed", 11),
    function!("workflow", "wf_advance_nodes", 11),
    function!("workflow", "wf_settle", 11),
    function!("workflow", "wf_summary", 11),
    function!("workflow", "wf_finish", 11),
    function!("workflow", "wf_create", 28),
    function!("workflow", "workflow_advance", 11),
    function!("workflow", "wf_rerun", 11),
    function!("workflow", "wf_pending", 11),
    function!("workflow", "wf_children", 11),
    function!("workflow", "workflow_start", 28),
    function!("workflow", "wf_lock", 11),
    function!("workflow", "wf_held_at", 11),
    function!("workflow", "wf_hold", 26),
    function!("workflow", "wf_release", 26),
    function!("workflow", "workflow_pause", 11),
    function!("workflow", "workflow_resume", 11),
    function!("workflow", "wf_stop", 11),
    function!("workflow", "workflow_cancel", 11),
    function!("workflow", "workflow_retry", 11),
    function!("workflow", "workflow_signal", 11),
    function!("workflow", "wf_unstoppable", 19),
    function!("workflow", "wf_settle_isolated", 11),
    function!("workflow", "workflow_timers", 11),
    function!("workflow", "workflow_next_timer", 11),
    function!("workflow", "workflow_repair", 11),
    function!("notify", "notifications_due_places", 13),
    function!("notify", "notifications_due", 13),
    function!("notify", "notify_time", 13),
    function!("notify", "notify_outbox", 13),
    function!("notify", "notify_workflow_ended", 11),
    function!("jobs", "add_counts", 16),
    function!("enqueue", "unique_args_key", 17),
    function!("enqueue", "check_name", 17),
    function!("enqueue", "notify_target", 17),
    function!("enqueue", "unique_finished_holder", 26),
    function!("enqueue", "unique_holder", 26),
    function!("enqueue", "insert_unique_jobs", 26),
    function!("enqueue", "check_formation", 22),
    function!("enqueue", "check_formed_scope", 26),
    function!("enqueue", "enqueue_debounced", 26),
    function!("enqueue", "enqueue_throttled", 26),
    function!("enqueue", "batch_ready", 26),
    function!("enqueue", "enqueue_batched", 26),
    function!("enqueue", "check_trace", 24),
    function!("enqueue", "check_group", 23),
    function!("enqueue", "enqueue_job", 26),
    function!("enqueue", "enqueue", 26),
    function!("workflow", "wf_check", 17),
    function!("enqueue", "start_workflow", 28),
    function!("jobs", "history_record", 20),
    function!("workflow", "history_run_record", 20),
    function!("jobs", "set_history", 20),
    function!("jobs", "job_places", 26),
    function!("jobs", "write_outcomes", 26),
    function!("steps", "steps_forget", 20),
];

/// The record of applied files, created on first use.
pub(super) const BOOTSTRAP: &str = "
    CREATE TABLE IF NOT EXISTS remuda.schema_functions (
        name text PRIMARY KEY,
        hash text NOT NULL,
        remuda_version text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
    );";

/// This build's version, recorded beside each file it applies.
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Each of `files` with its text's md5, what is recorded of it, and by which version.
const RECORDED: &str = "
    SELECT f.name, md5(f.sql) AS hash, s.hash AS recorded, s.remuda_version
    FROM unnest($1::text[], $2::text[]) AS f(name, sql)
    LEFT JOIN remuda.schema_functions s ON s.name = f.name";

/// Record of one file applied.
const RECORD: &str = "
    INSERT INTO remuda.schema_functions (name, hash, remuda_version) VALUES ($1, md5($2), $3)
    ON CONFLICT (name) DO UPDATE
    SET hash = EXCLUDED.hash, remuda_version = EXCLUDED.remuda_version, applied_at = now()";

/// The files of `files` whose text is not the one recorded and that no newer remuda
/// applied. Through `Conn`'s own query: behind a transaction-mode pooler (a client's
/// check) no named statement may be left on a server connection.
pub(super) async fn stale(conn: &Conn, files: &[&Function]) -> Result<Vec<Function>> {
    let names: Vec<&str> = files.iter().map(|f| f.name).collect();
    let texts: Vec<&str> = files.iter().map(|f| f.sql).collect();
    let mut out = Vec::new();
    for row in conn.query(RECORDED, &[&names, &texts]).await? {
        let name: String = row.try_get("name")?;
        let Some(file) = files.iter().find(|f| f.name == name) else {
            continue;
        };
        let hash: String = row.try_get("hash")?;
        let recorded: Option<String> = row.try_get("recorded")?;
        let by: Option<String> = row.try_get("remuda_version")?;
        if recorded.as_deref() == Some(hash.as_str()) {
            continue;
        }
        if by.as_deref().is_some_and(|v| newer(v, VERSION)) {
            tracing::warn!(
                "remuda migrate: {} was applied by remuda {}, newer than this build ({VERSION}); left as it is",
                file.name,
                by.unwrap_or_default()
            );
            continue;
        }
        out.push(**file);
    }
    // in the order of FUNCTIONS, which the rows need not keep
    out.sort_by_key(|f| FUNCTIONS.iter().position(|g| g.name == f.name));
    Ok(out)
}

/// Applies the stale files among those `wanted`, in one transaction with their records.
/// Returns their names.
pub(super) async fn apply(conn: &Conn, wanted: impl Fn(&Function) -> bool) -> Result<Vec<String>> {
    let files: Vec<&Function> = FUNCTIONS.iter().filter(|f| wanted(f)).collect();
    if files.is_empty() {
        return Ok(Vec::new());
    }
    let todo = stale(conn, &files).await?;
    if todo.is_empty() {
        return Ok(Vec::new());
    }
    conn.batch_execute("BEGIN").await?;
    let result = async {
        for f in &todo {
            conn.batch_execute(f.sql).await.map_err(|e| {
                Error::Setup(format!(
                    "function file schema/{}.sql failed: {}",
                    f.name,
                    crate::error::describe_db_error(&e)
                ))
            })?;
            conn.execute(RECORD, &[&f.name, &f.sql, &VERSION]).await?;
        }
        conn.batch_execute("COMMIT").await?;
        Ok(())
    }
    .await;
    if result.is_err() {
        let _ = conn.batch_execute("ROLLBACK").await;
    }
    result.map(|()| todo.iter().map(|f| f.name.to_string()).collect())
}

/// Whether version `a` (`x.y.z`, a pre-release suffix ignored) is newer than `b`.
fn newer(a: &str, b: &str) -> bool {
    fn parts(v: &str) -> Vec<u64> {
        v.split(['-', '+'])
            .next()
            .unwrap_or_default()
            .split('.')
            .map(|p| p.parse().unwrap_or(0))
            .collect()
    }
    parts(a) > parts(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_by_number_not_by_text() {
        assert!(newer("0.10.0", "0.9.3"));
        assert!(newer("1.0.0", "0.99.0"));
        assert!(!newer("0.9.3", "0.9.3"));
        assert!(!newer("0.9.3-beta", "0.9.3"));
        assert!(!newer("0.9.2", "0.10.0"));
    }

    #[test]
    fn each_file_creates_or_replaces_the_function_it_is_named_after() {
        for f in FUNCTIONS {
            let name = f.name.rsplit('/').next().unwrap_or_default();
            let header = format!("CREATE OR REPLACE FUNCTION remuda.{name}(");
            assert_eq!(
                f.sql.matches("CREATE OR REPLACE FUNCTION").count(),
                1,
                "{}",
                f.name
            );
            assert!(f.sql.contains(&header), "{} lacks {header}", f.name);
        }
    }

    #[test]
    fn migrations_define_no_functions() {
        for m in super::super::MIGRATIONS {
            assert!(
                !m.sql.contains("CREATE FUNCTION") && !m.sql.contains("REPLACE FUNCTION"),
                "{:04}_{} defines a function: move it to src/schema/",
                m.version,
                m.name
            );
        }
    }
}
