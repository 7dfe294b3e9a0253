//! Schema migrations: numbered `.sql` files embedded in the binary, applied in order under a
//! session advisory lock, recorded in `remuda.schema_migrations`. Many processes may run
//! [`run`] at once: one applies, the others wait and find nothing to do. A database migrated
//! by a newer remuda is refused rather than touched.
//!
//! A migration runs in a transaction of its own, or, when it must (`CREATE INDEX
//! CONCURRENTLY` on a large table, `ALTER TYPE … ADD VALUE`), outside one, statement by
//! statement: it is recorded as started before its first statement and as finished after its
//! last, so a run that died half-way (a crash, a killed process) is found by the next run,
//! which drops the invalid indexes it left and runs the migration again. Such a migration's
//! statements are therefore written to be run again (`IF NOT EXISTS`), and end with `;` at
//! the end of a line (no `$$` bodies: those belong in a transactional migration).

mod apply;
mod functions;

use crate::{Database, Error, Result};
pub use apply::Report;

/// How a migration is applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// All of it in one transaction, with its record.
    Transaction,
    /// Statement by statement, each committed on its own (see the module's doc): for
    /// indexes built `CONCURRENTLY` on the job table.
    Outside,
}

/// One migration.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Migration {
    pub version: i32,
    pub name: &'static str,
    pub sql: &'static str,
    pub mode: Mode,
}

const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "jobs",
        mode: Mode::Transaction,
        sql: include_str!("0001_jobs.sql"),
    },
    Migration {
        version: 2,
        name: "reliability",
        mode: Mode::Transaction,
        sql: include_str!("0002_reliability.sql"),
    },
    Migration {
        version: 3,
        name: "unique_jobs",
        mode: Mode::Transaction,
        sql: include_str!("0003_unique_jobs.sql"),
    },
    Migration {
        version: 4,
        name: "queues",
        mode: Mode::Transaction,
        sql: include_str!("0004_queues.sql"),
    },
    Migration {
        version: 5,
        name: "enqueue_path",
        mode: Mode::Transaction,
        sql: include_str!("0005_enqueue_path.sql"),
    },
    Migration {
        version: 6,
        name: "unique_scope",
        mode: Mode::Transaction,
        sql: include_str!("0006_unique_scope.sql"),
    },
    Migration {
        version: 7,
        name: "leader_term",
        mode: Mode::Transaction,
        sql: include_str!("0007_leader_term.sql"),
    },
    Migration {
        version: 8,
        name: "finalization",
        mode: Mode::Transaction,
        sql: include_str!("0008_finalization.sql"),
    },
    Migration {
        version: 9,
        name: "schedules",
        mode: Mode::Transaction,
        sql: include_str!("0009_schedules.sql"),
    },
    Migration {
        version: 10,
        name: "maintenance_indexes",
        mode: Mode::Outside,
        sql: include_str!("0010_maintenance_indexes.sql"),
    },
    Migration {
        version: 11,
        name: "workflows",
        mode: Mode::Transaction,
        sql: include_str!("0011_workflows.sql"),
    },
    Migration {
        version: 12,
        name: "workflow_indexes",
        mode: Mode::Outside,
        sql: include_str!("0012_workflow_indexes.sql"),
    },
    Migration {
        version: 13,
        name: "notifications",
        mode: Mode::Transaction,
        sql: include_str!("0013_notifications.sql"),
    },
    Migration {
        version: 14,
        name: "audit",
        mode: Mode::Transaction,
        sql: include_str!("0014_audit.sql"),
    },
    Migration {
        version: 15,
        name: "worker_report",
        mode: Mode::Transaction,
        sql: include_str!("0015_worker_report.sql"),
    },
    Migration {
        version: 16,
        name: "activity",
        mode: Mode::Transaction,
        sql: include_str!("0016_activity.sql"),
    },
    Migration {
        version: 17,
        name: "sql_enqueue",
        mode: Mode::Transaction,
        sql: include_str!("0017_sql_enqueue.sql"),
    },
    Migration {
        version: 18,
        name: "functions",
        mode: Mode::Transaction,
        sql: include_str!("0018_functions.sql"),
    },
    Migration {
        version: 19,
        name: "failures",
        mode: Mode::Transaction,
        sql: include_str!("0019_failures.sql"),
    },
    Migration {
        version: 20,
        name: "history",
        mode: Mode::Transaction,
        sql: include_str!("0020_history.sql"),
    },
    Migration {
        version: 21,
        name: "steps",
        mode: Mode::Transaction,
        sql: include_str!("0021_steps.sql"),
    },
    Migration {
        version: 22,
        name: "formed_jobs",
        mode: Mode::Transaction,
        sql: include_str!("0022_formed_jobs.sql"),
    },
    Migration {
        version: 23,
        name: "fair_share",
        mode: Mode::Transaction,
        sql: include_str!("0023_fair_share.sql"),
    },
    Migration {
        version: 24,
        name: "trace_context",
        mode: Mode::Transaction,
        sql: include_str!("0024_trace_context.sql"),
    },
    Migration {
        version: 25,
        name: "fair_share_index",
        mode: Mode::Outside,
        sql: include_str!("0025_fair_share_index.sql"),
    },
    Migration {
        version: 26,
        name: "finished_storage",
        mode: Mode::Transaction,
        sql: include_str!("0026_finished_storage.sql"),
    },
    Migration {
        version: 27,
        name: "live_fillfactor",
        mode: Mode::Transaction,
        sql: include_str!("0027_live_fillfactor.sql"),
    },
    Migration {
        version: 28,
        name: "run_and_schedule_groups",
        mode: Mode::Transaction,
        sql: include_str!("0028_run_and_schedule_groups.sql"),
    },
    Migration {
        version: 29,
        name: "fair_tags",
        mode: Mode::Outside,
        sql: include_str!("0029_fair_tags.sql"),
    },
    Migration {
        version: 30,
        name: "kind_walk",
        mode: Mode::Outside,
        sql: include_str!("0030_kind_walk.sql"),
    },
    Migration {
        version: 31,
        name: "rate_burst",
        mode: Mode::Transaction,
        sql: include_str!("0031_rate_burst.sql"),
    },
];

/// The schema version this build needs.
pub const LATEST: i32 = 31;

/// Creates or upgrades the schema to [`LATEST`], finishing first a migration that an earlier
/// run left half-done.
pub async fn run(db: &Database) -> Result<Report> {
    apply::apply(db, MIGRATIONS).await
}

/// [`run`] with the test's migrations after remuda's own.
#[cfg(feature = "testing")]
pub(crate) async fn run_with(
    db: &Database,
    extra: &[crate::testing::ExtraMigration],
) -> Result<Report> {
    let mut all = MIGRATIONS.to_vec();
    all.extend(extra.iter().map(|m| Migration {
        version: m.version,
        name: m.name,
        sql: m.sql,
        mode: if m.outside_transaction {
            Mode::Outside
        } else {
            Mode::Transaction
        },
    }));
    apply::apply(db, &all).await
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
    if !row.try_get::<_, bool>(0)? {
        return Ok(0);
    }
    // a migration started and not finished does not count: the schema is not there yet
    let finished = conn
        .query_one(
            "SELECT to_regclass('remuda.schema_migrations') IS NOT NULL
                    AND EXISTS (SELECT 1 FROM pg_attribute
                                WHERE attrelid = 'remuda.schema_migrations'::regclass
                                  AND attname = 'finished' AND NOT attisdropped)",
            &[],
        )
        .await?
        .try_get::<_, bool>(0)?;
    let query = if finished {
        "SELECT coalesce(max(version), 0) FROM remuda.schema_migrations WHERE finished"
    } else {
        "SELECT coalesce(max(version), 0) FROM remuda.schema_migrations"
    };
    Ok(conn.query_one(query, &[]).await?.try_get(0)?)
}

/// Fails unless the schema is exactly at [`LATEST`] with this build's functions, saying what
/// to do.
pub async fn check(db: &Database) -> Result<()> {
    let version = current_version(db).await?;
    if version == LATEST {
        let conn = db.conn().await?;
        let all: Vec<&functions::Function> = functions::FUNCTIONS.iter().collect();
        let stale = functions::stale(&conn, &all).await?;
        if !stale.is_empty() {
            return Err(Error::FunctionsOutdated {
                files: stale.iter().map(|f| f.name.to_string()).collect(),
            });
        }
    }
    match version {
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

/// A fingerprint of every migration's and function's text, for naming test templates.
pub fn fingerprint() -> u64 {
    // FNV-1a: stable across builds and platforms, unlike std's hasher.
    let mut hash: u64 = 0xcbf29ce484222325;
    let texts = MIGRATIONS.iter().map(|m| m.sql);
    for text in texts.chain(functions::FUNCTIONS.iter().map(|f| f.sql)) {
        for byte in text.bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x100000001b3);
        }
    }
    hash
}
