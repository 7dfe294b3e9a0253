//! The scratch databases of `demo` and `bench`: created beside the resolved database on the
//! same server (`<database>_demo`, `<database>_bench`), migrated, and dropped afterwards, so
//! that neither command ever reads or deletes a user's jobs.

use crate::error::{CliError, CliResult};
use remuda::Database;

/// PostgreSQL's longest identifier, in bytes.
const MAX_IDENTIFIER: usize = 63;

/// The scratch database's name: the resolved database's, then `_suffix`, within the
/// identifier limit.
pub fn name(admin: &Database, suffix: &str) -> String {
    let mut base: String = admin.config().get_dbname().unwrap_or("remuda").to_string();
    while base.len() + suffix.len() + 1 > MAX_IDENTIFIER {
        base.pop();
    }
    format!("{base}_{suffix}")
}

/// `name` as a quoted identifier, so that any database name (`MyApp`, `my-app`) works.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Creates (afresh) and migrates the scratch database `<database>_suffix`.
pub async fn create(admin: &Database, suffix: &str, pool: usize) -> CliResult<Database> {
    let scratch = name(admin, suffix);
    drop_database(admin, &scratch).await?;
    let conn = admin.conn().await?;
    conn.batch_execute(&format!("CREATE DATABASE {}", quoted(&scratch)))
        .await
        .map_err(|e| CliError::Remuda(e.into()))?;
    let mut config = admin.config().clone();
    config.dbname(&scratch);
    let mut db = Database::with_tls(config, admin.tls().clone(), pool)?;
    if admin.pooler() == remuda::db::Pooler::Transaction {
        // behind a transaction-mode pooler: the scratch database's own direct address, for
        // its migrations and LISTEN
        if let Some((direct, _)) = admin.session_target() {
            db = db.with_direct(&remuda::db::conninfo(&direct, Some(&scratch)))?;
        }
    }
    remuda::migrate::run(&db).await?;
    Ok(db)
}

/// Drops the scratch database `<database>_suffix` if it exists.
pub async fn drop(admin: &Database, suffix: &str) -> CliResult<()> {
    drop_database(admin, &name(admin, suffix)).await
}

async fn drop_database(admin: &Database, name: &str) -> CliResult<()> {
    admin
        .conn()
        .await?
        .batch_execute(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            quoted(name)
        ))
        .await
        .map_err(|e| CliError::Remuda(e.into()))
}
