//! The migration runner: one session holds the migration lock for the whole run; each
//! migration is applied in its transaction, or outside one statement by statement, and a
//! migration an earlier run left half-done is finished first.

use super::{functions, Migration, Mode};
use crate::{Database, Error, Result};
use deadpool_postgres::Object;

/// Advisory lock key that serialises migrations ("remuda" in ASCII).
const LOCK_KEY: i64 = 0x72656d756461;

/// What [`super::run`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// Version before.
    pub from: i32,
    /// Version after.
    pub to: i32,
    /// Names of the migrations applied now.
    pub applied: Vec<String>,
    /// Names of the migrations an earlier run started and did not finish (it crashed or was
    /// stopped half-way), finished now.
    pub resumed: Vec<String>,
    /// The function files (`workflow/wf_decide`) applied now: new, or changed since.
    pub functions: Vec<String>,
}

/// The migration table, created on first use; `finished` marks a migration run outside a
/// transaction as done (one inside a transaction is recorded done, or not at all).
const BOOTSTRAP: &str = "
    CREATE SCHEMA IF NOT EXISTS remuda;
    CREATE TABLE IF NOT EXISTS remuda.schema_migrations (
        version integer PRIMARY KEY,
        name text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
    );
    ALTER TABLE remuda.schema_migrations ADD COLUMN IF NOT EXISTS finished boolean NOT NULL DEFAULT true;";

/// How long a run waits between tries of the migration lock while another run holds it.
const LOCK_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// Applies `migrations` (in version order) under the migration lock.
pub(crate) async fn apply(db: &Database, migrations: &[Migration]) -> Result<Report> {
    // a session of its own: directly to PostgreSQL, past a transaction-mode pooler
    let sessions = db.sessions(1).ok_or_else(|| {
        Error::Setup("migrations hold a session-level lock and cannot run through a transaction-mode pooler (pooler=transaction): give the direct address of PostgreSQL (remuda: --direct-url or REMUDA_DIRECT_URL; the library: Database::with_direct), or run remuda migrate against PostgreSQL itself".into())
    })?;
    let mut session = Session(Some(sessions.conn().await?));
    let conn = session.conn()?;
    // tried, not waited for inside the server: a session waiting in pg_advisory_lock holds a
    // snapshot, which a CREATE INDEX CONCURRENTLY of the run holding the lock would wait
    // for, while it waits for that run: a deadlock
    while !conn
        .query_one("SELECT pg_try_advisory_lock($1)", &[&LOCK_KEY])
        .await?
        .try_get::<_, bool>(0)?
    {
        tokio::time::sleep(LOCK_POLL).await;
    }
    let result = apply_locked(conn, migrations).await;
    if conn
        .execute("SELECT pg_advisory_unlock($1)", &[&LOCK_KEY])
        .await
        .is_ok()
        && result.is_ok()
    {
        session.release();
    }
    result
}

/// The migration session: back to the pool only once its lock is released and no
/// transaction is open; dropped otherwise (an error, or the run's future dropped half-way),
/// closing the session, which ends both.
struct Session(Option<crate::db::Conn>);

impl Session {
    fn conn(&self) -> Result<&crate::db::Conn> {
        self.0
            .as_ref()
            .ok_or_else(|| Error::Setup("the migration session is gone".into()))
    }

    fn release(&mut self) {
        self.0 = None;
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(conn) = self.0.take() {
            conn.close();
        }
    }
}

async fn apply_locked(conn: &crate::db::Conn, migrations: &[Migration]) -> Result<Report> {
    let latest = migrations.last().map_or(0, |m| m.version);
    conn.batch_execute(BOOTSTRAP).await?;
    conn.batch_execute(functions::BOOTSTRAP).await?;
    let rows = conn
        .query(
            "SELECT version, finished FROM remuda.schema_migrations ORDER BY version",
            &[],
        )
        .await?;
    let mut from = 0;
    let mut unfinished = Vec::new();
    for row in &rows {
        let version: i32 = row.try_get("version")?;
        if row.try_get::<_, bool>("finished")? {
            from = from.max(version);
        } else {
            unfinished.push(version);
        }
    }
    let newest = rows
        .iter()
        .map(|r| r.try_get::<_, i32>("version"))
        .collect::<std::result::Result<Vec<_>, _>>()?
        .into_iter()
        .max()
        .unwrap_or(0);
    if newest > latest {
        return Err(Error::SchemaTooNew {
            found: newest,
            expected: latest,
        });
    }
    let mut report = Report {
        from,
        to: from,
        applied: Vec::new(),
        resumed: Vec::new(),
        functions: Vec::new(),
    };
    for m in migrations
        .iter()
        .filter(|m| unfinished.contains(&m.version))
    {
        drop_invalid_indexes(conn).await?;
        run_outside(conn, m).await?;
        report.resumed.push(label(m));
        report.to = report.to.max(m.version);
    }
    for m in migrations
        .iter()
        .filter(|m| m.version > from && !unfinished.contains(&m.version))
    {
        // the functions this migration may use (its version's tables and types exist)
        let version = m.version;
        report
            .functions
            .extend(functions::apply(conn, |f| f.since < version).await?);
        match m.mode {
            Mode::Transaction => run_in_transaction(conn, m).await?,
            Mode::Outside => {
                conn.execute(
                    "INSERT INTO remuda.schema_migrations (version, name, finished) VALUES ($1, $2, false)",
                    &[&m.version, &m.name],
                )
                .await?;
                run_outside(conn, m).await?;
            }
        }
        report.applied.push(label(m));
        report.to = m.version;
    }
    report
        .functions
        .extend(functions::apply(conn, |_| true).await?);
    Ok(report)
}

fn label(m: &Migration) -> String {
    format!("{:04}_{}", m.version, m.name)
}

fn failed(m: &Migration, e: &tokio_postgres::Error, advice: &str) -> Error {
    Error::Setup(format!(
        "migration {} failed: {}{advice}",
        label(m),
        crate::error::describe_db_error(e)
    ))
}

/// The whole migration and its record in one transaction.
async fn run_in_transaction(conn: &Object, m: &Migration) -> Result<()> {
    conn.batch_execute("BEGIN").await?;
    let result = async {
        conn.batch_execute(m.sql)
            .await
            .map_err(|e| failed(m, &e, ""))?;
        conn.execute(
            "INSERT INTO remuda.schema_migrations (version, name) VALUES ($1, $2)",
            &[&m.version, &m.name],
        )
        .await?;
        conn.batch_execute("COMMIT").await?;
        Ok(())
    }
    .await;
    if result.is_err() {
        let _ = conn.batch_execute("ROLLBACK").await;
    }
    result
}

/// Each statement on its own (its record says started), then the record says finished.
async fn run_outside(conn: &Object, m: &Migration) -> Result<()> {
    for statement in statements(m.sql) {
        conn.batch_execute(statement).await.map_err(|e| {
            failed(
                m,
                &e,
                "; it runs outside a transaction, so the statements before this one stay applied: fix the cause and run `remuda migrate` again, which finishes it",
            )
        })?;
    }
    conn.execute(
        "UPDATE remuda.schema_migrations SET finished = true, applied_at = now() WHERE version = $1",
        &[&m.version],
    )
    .await?;
    Ok(())
}

/// The statements of a migration run outside a transaction: each ends with `;` at the end of
/// a line (comments and blank lines between them are dropped).
pub(crate) fn statements(sql: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut offset = 0;
    for line in sql.split_inclusive('\n') {
        offset += line.len();
        if line.trim_end().ends_with(';') {
            let text = sql[start..offset].trim();
            if text
                .lines()
                .any(|l| !l.trim().is_empty() && !l.trim().starts_with("--"))
            {
                out.push(text);
            }
            start = offset;
        }
    }
    out
}

/// Drops the invalid indexes of the remuda schema: what a `CREATE INDEX CONCURRENTLY` leaves
/// when its session dies half-way (a run that holds the migration lock is the only one that
/// creates indexes there, so none of them is still being built).
async fn drop_invalid_indexes(conn: &Object) -> Result<()> {
    let rows = conn
        .query(
            "SELECT format('%I.%I', n.nspname, c.relname) AS name
             FROM pg_index i
             JOIN pg_class c ON c.oid = i.indexrelid
             JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = 'remuda' AND NOT i.indisvalid",
            &[],
        )
        .await?;
    for row in rows {
        let name: String = row.try_get("name")?;
        tracing::warn!("remuda migrate: dropping index {name}, left invalid by a migration that did not finish");
        conn.batch_execute(&format!("DROP INDEX CONCURRENTLY IF EXISTS {name}"))
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_split_at_semicolons_ending_a_line_and_skip_comments() {
        let sql = "-- a comment\nCREATE INDEX CONCURRENTLY IF NOT EXISTS a\n    ON t (x);\n\n-- another\nALTER TYPE e ADD VALUE IF NOT EXISTS 'v';\n-- trailing\n";
        assert_eq!(
            statements(sql),
            vec![
                "-- a comment\nCREATE INDEX CONCURRENTLY IF NOT EXISTS a\n    ON t (x);",
                "-- another\nALTER TYPE e ADD VALUE IF NOT EXISTS 'v';"
            ]
        );
    }

    #[test]
    fn migrations_outside_a_transaction_have_no_function_bodies() {
        for m in super::super::MIGRATIONS {
            if m.mode == Mode::Outside {
                assert!(!m.sql.contains("$$"), "{}", label(m));
            }
        }
    }
}
