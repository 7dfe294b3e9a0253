//! Schema migrations: numbered `.sql` files embedded in the binary, applied in order in one
//! transaction under an advisory lock, recorded in `remuda.schema_migrations`. Many processes
//! may run [`run`] at once: one applies, the others wait and find nothing to do. A database
//! migrated by a newer remuda is refused rather than touched.

use crate::{Database, Error, Result};

/// One migration.
struct Migration {
    version: i32,
    name: &'static str,
    sql: &'static str,
}

const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "jobs",
        sql: include_str!("0001_jobs.sql"),
    },
    Migration {
        version: 2,
        name: "reliability",
        sql: include_str!("0002_reliability.sql"),
    },
    Migration {
        version: 3,
        name: "unique_jobs",
        sql: include_str!("0003_unique_jobs.sql"),
    },
    Migration {
        version: 4,
        name: "queues",
        sql: include_str!("0004_queues.sql"),
    },
    Migration {
        version: 5,
        name: "enqueue_path",
        sql: include_str!("0005_enqueue_path.sql"),
    },
    Migration {
        version: 6,
        name: "unique_scope",
        sql: include_str!("0006_unique_scope.sql"),
    },
    Migration {
        version: 7,
        name: "leader_term",
        sql: include_str!("0007_leader_term.sql"),
    },
    Migration {
        version: 8,
        name: "finalization",
        sql: include_str!("0008_finalization.sql"),
    },
];

/// The schema version this build needs.
pub const LATEST: i32 = 8;

/// Advisory lock key that serialises migrations ("remuda" in ASCII).
const LOCK_KEY: i64 = 0x72656d756461;

/// What [`run`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// Version before.
    pub from: i32,
    /// Version after.
    pub to: i32,
    /// Names of the migrations applied now.
    pub applied: Vec<String>,
}

/// Creates or upgrades the schema to [`LATEST`].
pub async fn run(db: &Database) -> Result<Report> {
    let mut conn = db.conn().await?;
    let tx = conn.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_KEY])
        .await?;
    tx.batch_execute(
        "CREATE SCHEMA IF NOT EXISTS remuda;
         CREATE TABLE IF NOT EXISTS remuda.schema_migrations (
             version integer PRIMARY KEY,
             name text NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now()
         );",
    )
    .await?;
    let from: i32 = tx
        .query_one(
            "SELECT coalesce(max(version), 0) FROM remuda.schema_migrations",
            &[],
        )
        .await?
        .get(0);
    if from > LATEST {
        return Err(Error::SchemaTooNew {
            found: from,
            expected: LATEST,
        });
    }
    let mut applied = Vec::new();
    for m in MIGRATIONS.iter().filter(|m| m.version > from) {
        tx.batch_execute(m.sql).await.map_err(|e| {
            Error::Setup(format!(
                "migration {:04}_{} failed: {}",
                m.version,
                m.name,
                e.as_db_error()
                    .map(|d| d.message().to_string())
                    .unwrap_or_else(|| e.to_string())
            ))
        })?;
        tx.execute(
            "INSERT INTO remuda.schema_migrations (version, name) VALUES ($1, $2)",
            &[&m.version, &m.name],
        )
        .await?;
        applied.push(format!("{:04}_{}", m.version, m.name));
    }
    tx.commit().await?;
    Ok(Report {
        from,
        to: LATEST.max(from),
        applied,
    })
}

/// The schema version in the database; 0 when remuda was never migrated there.
pub async fn current_version(db: &Database) -> Result<i32> {
    let conn = db.conn().await?;
    let row = conn
        .query_one(
            "SELECT to_regclass('remuda.schema_migrations') IS NOT NULL",
            &[],
        )
        .await?;
    if !row.get::<_, bool>(0) {
        return Ok(0);
    }
    Ok(conn
        .query_one(
            "SELECT coalesce(max(version), 0) FROM remuda.schema_migrations",
            &[],
        )
        .await?
        .get(0))
}

/// Fails unless the schema is exactly at [`LATEST`], saying what to do.
pub async fn check(db: &Database) -> Result<()> {
    match current_version(db).await? {
        0 => Err(Error::SchemaMissing),
        v if v < LATEST => Err(Error::SchemaTooOld {
            found: v,
            expected: LATEST,
        }),
        v if v > LATEST => Err(Error::SchemaTooNew {
            found: v,
            expected: LATEST,
        }),
        _ => Ok(()),
    }
}

/// A fingerprint of every migration's text, for naming test templates.
pub fn fingerprint() -> u64 {
    // FNV-1a: stable across builds and platforms, unlike std's hasher.
    let mut hash: u64 = 0xcbf29ce484222325;
    for m in MIGRATIONS {
        for byte in m.sql.bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x100000001b3);
        }
    }
    hash
}
