//! Helpers for tests against a real PostgreSQL: each [`TestDatabase`] is a fresh database
//! cloned from a migrated template, so tests run in parallel without seeing each other.
//! remuda's own tests use it, and so can yours.
//!
//! The server is found as everywhere else ([`crate::db::setup::Resolve::from_env`]):
//! `DATABASE_URL`, a local server, or the private cluster. The role needs CREATEDB.
//!
//! With `REMUDA_TEST_HISTORY=FILE`, every test database records its jobs' history
//! (verification mode) and, when dropped, is checked ([`crate::verify::check`]): what is
//! found is appended to FILE with the test's name, so a whole suite run this way is a run
//! of the history checker over every test's scenario (tests that write rows by hand, to put
//! a fault in, are found too).

use crate::db::{conninfo, setup::Resolve, Database};
use crate::{migrate, sql, Client, Error, Result};
use std::sync::atomic::{AtomicU32, Ordering};
use tokio_postgres::{Config, NoTls};

/// A database of its own for one test, dropped when the value is dropped.
///
/// While it exists, a session of its own holds an advisory lock named after it
/// (`hashtextextended(name, 0)`): that is how any test run on any machine sharing the server
/// tells a live test database from one abandoned by a run that was killed.
pub struct TestDatabase {
    admin: Config,
    name: String,
    conninfo: String,
    /// The session holding the ownership lock (closed on drop, releasing it).
    _owner: tokio_postgres::Client,
    /// Where the history's findings go, and the test's name (`REMUDA_TEST_HISTORY`).
    history: Option<(String, String)>,
}

/// Advisory lock key serialising template creation.
const TEMPLATE_LOCK: i64 = 0x72656d7564615f74;

static COUNTER: AtomicU32 = AtomicU32::new(0);

async fn admin_client(admin: &Config) -> Result<tokio_postgres::Client> {
    let (client, connection) = admin
        .connect(NoTls)
        .await
        .map_err(|e| Error::unreachable(crate::db::describe(admin), &e))?;
    tokio::spawn(connection);
    Ok(client)
}

impl TestDatabase {
    /// Creates a migrated database for one test.
    pub async fn new() -> Result<TestDatabase> {
        let admin = Resolve::from_env().resolve().await?;
        let client = admin_client(&admin).await?;
        let template = template_name(&client).await?;
        ensure_template(&admin, &client, &template).await?;
        drop_abandoned(&client).await;
        let name = format!(
            "remuda_t_{}_{}_{:06x}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            fastrand::u32(..0x1000000)
        );
        // own it before it exists: a cleaner never sees it unowned
        let owner = admin_client(&admin).await?;
        owner
            .execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", &[&name])
            .await?;
        client
            .batch_execute(&format!("CREATE DATABASE {name} TEMPLATE {template}"))
            .await?;
        let conninfo = conninfo(&admin, Some(&name));
        let history = std::env::var("REMUDA_TEST_HISTORY")
            .ok()
            .filter(|f| !f.is_empty())
            .map(|file| {
                let test = std::thread::current().name().unwrap_or("?").to_string();
                (file, test)
            });
        if history.is_some() {
            crate::verify::set_history(&Database::new(&conninfo, 1)?, true).await?;
        }
        Ok(TestDatabase {
            conninfo,
            admin,
            name,
            _owner: owner,
            history,
        })
    }

    /// A connection string for this database (for child processes such as the CLI).
    pub fn conninfo(&self) -> &str {
        &self.conninfo
    }

    /// A client connected to this database.
    pub async fn client(&self) -> Result<Client> {
        Client::connect(&self.conninfo).await
    }

    /// A pool on this database.
    pub fn database(&self) -> Result<Database> {
        Database::new(&self.conninfo, 8)
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let admin = self.admin.clone();
        let name = self.name.clone();
        let history = self.history.take().map(|h| (h, self.conninfo.clone()));
        // Drop may run inside or outside a runtime: use a thread with its own.
        let _ = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async move {
                if let Some(((file, test), conninfo)) = history {
                    check_history(&conninfo, &file, &test).await;
                }
                if let Ok(client) = admin_client(&admin).await {
                    let _ = client
                        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                        .await;
                }
            });
        })
        .join();
    }
}

/// Checks a test database's history and appends what is found to `file` (see the module).
async fn check_history(conninfo: &str, file: &str, test: &str) {
    use std::io::Write;
    let found = match Database::new(conninfo, 1) {
        Ok(db) => crate::verify::check(&db, std::time::Duration::from_secs(3600)).await,
        Err(e) => Err(e),
    };
    let line = match found {
        Ok(report) if report.is_clean() => return,
        Ok(report) => format!(
            "{test}: {}",
            serde_json::to_string(&report).unwrap_or_default()
        ),
        Err(e) => format!("{test}: the check failed: {e}"),
    };
    if let Ok(mut out) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
    {
        let _ = writeln!(out, "{line}");
    }
}

/// The template of this build's migrations made today (UTC, by the server's clock):
/// migrating makes the finished part's partitions from the day it runs on, so a template
/// made on an earlier day would give a test database without today's partition and with
/// partitions of days a test takes for past ones.
async fn template_name(client: &tokio_postgres::Client) -> Result<String> {
    let day: String = client
        .query_one("SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYYMMDD')", &[])
        .await?
        .get(0);
    Ok(format!("remuda_tpl_{:016x}_{day}", migrate::fingerprint()))
}

async fn ensure_template(
    admin: &Config,
    client: &tokio_postgres::Client,
    template: &str,
) -> Result<()> {
    if template_exists(client, template).await? {
        return Ok(());
    }
    client
        .execute("SELECT pg_advisory_lock($1)", &[&TEMPLATE_LOCK])
        .await?;
    let result = async {
        if template_exists(client, template).await? {
            return Ok(());
        }
        let building = format!("{template}_building");
        client
            .batch_execute(&format!("DROP DATABASE IF EXISTS {building} WITH (FORCE)"))
            .await?;
        client
            .batch_execute(&format!("CREATE DATABASE {building}"))
            .await?;
        {
            let db = Database::new(&conninfo(admin, Some(&building)), 2)?;
            migrate::run(&db).await?;
        }
        client
            .batch_execute(&format!("ALTER DATABASE {building} RENAME TO {template}"))
            .await
            .map_err(|e| Error::Setup(format!("cannot finish the test template: {e}")))?;
        drop_old_templates(client).await;
        Ok(())
    }
    .await;
    client
        .execute("SELECT pg_advisory_unlock($1)", &[&TEMPLATE_LOCK])
        .await?;
    result
}

/// Drops the templates made before yesterday (of any build): no run still starting test
/// databases uses them. One in use right now stays (the drop fails) for a later run.
async fn drop_old_templates(client: &tokio_postgres::Client) {
    let Ok(rows) = client.query(sql::TEST_TEMPLATES_OLD, &[]).await else {
        return;
    };
    for row in rows {
        let name: String = row.get(0);
        let _ = client
            .batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\""))
            .await;
    }
}

async fn template_exists(client: &tokio_postgres::Client, template: &str) -> Result<bool> {
    Ok(client
        .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&template])
        .await?
        .is_some())
}

/// Drops test databases whose owner is gone (a test that panicked before its `Drop` ran, or
/// a run that was killed, on this machine or another sharing the server): those whose
/// ownership lock (see [`TestDatabase`]) no session holds.
async fn drop_abandoned(client: &tokio_postgres::Client) {
    let Ok(rows) = client.query(sql::TEST_DATABASES_ABANDONED, &[]).await else {
        return;
    };
    for row in rows {
        let Ok(name) = row.try_get::<_, String>(0) else {
            continue;
        };
        let _ = client
            .batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
            .await;
    }
}

/// A PostgreSQL cluster of its own, for a test that stops, restarts or cuts off the database
/// (never the shared server other tests use). Started from the local PostgreSQL binaries in a
/// temporary directory, as the zero-setup path does, reached through a Unix socket there;
/// stopped and removed when dropped.
pub struct PrivateCluster {
    home: std::path::PathBuf,
    admin: Config,
}

impl PrivateCluster {
    /// Initialises and starts a cluster with one migrated database, `remuda`.
    pub async fn start() -> Result<PrivateCluster> {
        PrivateCluster::start_with(&crate::db::cluster::ClusterOptions::default()).await
    }

    /// [`PrivateCluster::start`] with settings of its own (TLS, a TCP port: see
    /// [`ClusterOptions`](crate::db::cluster::ClusterOptions)).
    pub async fn start_with(
        options: &crate::db::cluster::ClusterOptions,
    ) -> Result<PrivateCluster> {
        let home = std::env::temp_dir().join(format!(
            "remuda-cluster-{}-{:06x}",
            std::process::id(),
            fastrand::u32(..0x1000000)
        ));
        let admin = crate::db::cluster::start_private_cluster_with(&home, options).await?;
        let cluster = PrivateCluster { home, admin };
        let client = admin_client(&cluster.admin).await?;
        client.batch_execute("CREATE DATABASE remuda").await?;
        let db = Database::new(&cluster.conninfo(), 2)?;
        migrate::run(&db).await?;
        Ok(cluster)
    }

    /// A connection string for the `remuda` database.
    pub fn conninfo(&self) -> String {
        conninfo(&self.admin, Some("remuda"))
    }

    /// The Unix socket the server listens on (for a proxy in front of it).
    pub fn socket(&self) -> std::path::PathBuf {
        self.home.join("run").join(".s.PGSQL.5432")
    }

    /// Stops the server at once, as a crash would (`pg_ctl stop -m immediate`).
    pub async fn crash(&self) -> Result<()> {
        crate::db::setup::stop_private_cluster_with(&self.home, "immediate").await
    }

    /// Stops the server and starts it again inside network namespace `netns`, listening on
    /// `address` too (see [`Hosts`]).
    pub async fn restart_in(&self, netns: &str, address: &str) -> Result<()> {
        crate::db::setup::stop_private_cluster_with(&self.home, "fast").await?;
        crate::db::cluster::start_private_cluster_in(&self.home, netns, address).await
    }

    /// Starts the server again (it recovers from its write-ahead log).
    pub async fn restart(&self) -> Result<()> {
        crate::db::setup::start_private_cluster(&self.home).await?;
        Ok(())
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let _ = crate::db::setup::stop_private_cluster_blocking(&self.home, "immediate");
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

/// Background tasks made to fail by [`fail_background_task`].
static FAILING_TASKS: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());

/// Makes background task `task` of every worker in this process panic at its next round
/// (`"heartbeat"`, `"dispatch"`, `"settings"`, `"producer"` or `"maintenance"`), to test
/// that a worker never runs on half alive. For a test binary of its own: it affects every
/// worker of the process until [`heal_background_tasks`].
pub fn fail_background_task(task: &'static str) {
    FAILING_TASKS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(task);
}

/// Undoes [`fail_background_task`].
pub fn heal_background_tasks() {
    FAILING_TASKS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clear();
}

pub(crate) fn background_task_should_fail(task: &str) -> bool {
    FAILING_TASKS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .contains(&task)
}

/// A migration a test adds after remuda's own, to exercise the migration runner.
#[derive(Clone, Copy, Debug)]
pub struct ExtraMigration {
    /// Its version: above [`migrate::LATEST`].
    pub version: i32,
    /// Its name.
    pub name: &'static str,
    /// Its statements.
    pub sql: &'static str,
    /// Run outside a transaction, statement by statement (see [`migrate`]).
    pub outside_transaction: bool,
}

/// Runs remuda's migrations followed by `extra`, as [`migrate::run`] does.
pub async fn migrate_with(db: &Database, extra: &[ExtraMigration]) -> Result<migrate::Report> {
    migrate::run_with(db, extra).await
}

pub mod fault;
mod hosts;
mod pgbouncer;
mod receiver;
mod smtp;

/// Serves each connection `listener` accepts with `handle`, in a task of its own, until
/// `stop` is cancelled (connections still open are dropped then): the test servers' loop.
fn serve_until<F, Fut>(
    listener: tokio::net::TcpListener,
    stop: tokio_util::sync::CancellationToken,
    handle: F,
) where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future + Send + 'static,
{
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    let (connection, stop) = (handle(stream), stop.clone());
                    tokio::spawn(async move {
                        tokio::select! {
                            _ = stop.cancelled() => {}
                            _ = connection => {}
                        }
                    });
                }
            }
        }
    });
}
pub use hosts::{Hosts, DATABASE_ADDRESS};
pub use pgbouncer::{pgbouncer_program, PgBouncer};
pub use receiver::{Received, Receiver, Reply};
pub use smtp::{Mail, SmtpSink};
