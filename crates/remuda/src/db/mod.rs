//! Connections: the pool every component shares, the LISTEN connection, and finding a
//! PostgreSQL to use when none is configured.

#[cfg(feature = "embedded")]
pub mod cluster;
mod conn;
mod jsonb;
pub(crate) mod listener;
#[cfg(feature = "embedded")]
pub mod replica;
pub mod setup;
mod tid;
pub mod tls;

pub(crate) use conn::Pinned;
pub use conn::{Conn, Params, Pooler, Prepared, Sql, Tx};
pub use jsonb::Jsonb;
pub(crate) use tid::Tid;

use crate::{Error, Result};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::config::TargetSessionAttrs;
use tokio_postgres::{Config, NoTls};

/// A connection pool to one database plus what is needed to open dedicated connections
/// (the listener) to the same place.
#[derive(Clone)]
pub struct Database {
    pool: Pool,
    config: Arc<Config>,
    tls: Arc<tls::Tls>,
    target: Arc<str>,
    /// Behind a transaction-mode pooler: the parameter types of the statements sent unnamed.
    unnamed: Option<Arc<conn::Types>>,
    /// Where to connect directly, past the pooler, for what needs a session of its own
    /// (LISTEN, migrations, the reindexer's lock); `None`: where the pool connects.
    direct: Option<Arc<(Config, tls::Tls)>>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("target", &self.target)
            .finish()
    }
}

/// Session settings of pool connections (see [`Database::from_config`]).
pub const SESSION_OPTIONS: &str =
    "-c plan_cache_mode=force_generic_plan -c enable_sort=off -c jit=off \
     -c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 -c tcp_keepalives_count=3 \
     -c tcp_user_timeout=10000";

/// The planner settings of [`SESSION_OPTIONS`] for one transaction: how statements behind a
/// transaction-mode pooler get them (see `conn.rs`).
pub(crate) const LOCAL_SETTINGS: &str =
    "SET LOCAL plan_cache_mode = force_generic_plan; SET LOCAL enable_sort = off; SET LOCAL jit = off";

/// Default number of pooled connections: enough for a worker's producer, completer,
/// heartbeat and maintenance plus client calls, without crowding `max_connections`.
pub const DEFAULT_POOL_SIZE: usize = 16;

/// Longest a call waits for a free pooled connection before failing with [`Error::Pool`].
pub const POOL_WAIT_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest the pool waits for a new connection to be made (connect and start-up).
pub const POOL_CREATE_TIMEOUT: Duration = Duration::from_secs(15);

impl Database {
    /// A pool for a connection string (`postgres://…` URL or `key=value` form). Connects
    /// lazily; call [`Database::ping`] to find out now whether the server answers.
    /// `sslmode` and `sslrootcert` are honoured as libpq does (see [`tls`]).
    pub fn new(conninfo: &str, pool_size: usize) -> Result<Self> {
        let (config, tls) = tls::parse(conninfo)?;
        Database::with_tls(config, tls, pool_size)
    }

    /// A pool for a parsed configuration and its TLS settings; fails when the TLS settings
    /// cannot be used (an `sslrootcert` that cannot be read).
    pub fn with_tls(config: Config, tls: tls::Tls, pool_size: usize) -> Result<Self> {
        tls.connector()?;
        Ok(Database::build(config, tls, pool_size))
    }

    /// Another pool to the same database with the same settings (a worker's own pool).
    pub fn sibling(&self, pool_size: usize) -> Database {
        let mut db = Database::build((*self.config).clone(), (*self.tls).clone(), pool_size);
        db.direct = self.direct.clone();
        db
    }

    /// Behind a transaction-mode pooler (`pooler=transaction` in the connection string),
    /// where to connect directly to PostgreSQL for what needs a session of its own: the
    /// LISTEN connection (without one, workers and waits poll), migrations and the
    /// reindexer's lock.
    pub fn with_direct(mut self, conninfo: &str) -> Result<Self> {
        let (mut config, tls) = tls::parse(conninfo)?;
        fail_fast(&mut config);
        if tls.pooler != Pooler::None {
            return Err(Error::InvalidInput(
                "the direct connection string says pooler=transaction: give the address of PostgreSQL itself, not of the pooler".into(),
            ));
        }
        tls.connector()?;
        self.direct = Some(Arc::new((config, tls)));
        Ok(self)
    }

    /// How this pool's connections reach PostgreSQL.
    pub fn pooler(&self) -> Pooler {
        self.tls.pooler
    }

    /// Where a session of its own connects (LISTEN, migrations, session locks): directly
    /// when [`Database::with_direct`] said where, else where the pool connects; `None`
    /// behind a transaction-mode pooler without a direct address (no session to be had).
    pub fn session_target(&self) -> Option<(Config, tls::Tls)> {
        match (&self.direct, self.tls.pooler) {
            (Some(direct), _) => Some((direct.0.clone(), direct.1.clone())),
            (None, Pooler::None) => Some(((*self.config).clone(), (*self.tls).clone())),
            (None, Pooler::Transaction) => None,
        }
    }

    /// A pool whose connections keep their sessions (see [`Database::session_target`]):
    /// this one when it connects directly, else a new one of `size` connections.
    pub fn sessions(&self, size: usize) -> Option<Database> {
        match (&self.direct, self.tls.pooler) {
            (None, Pooler::None) => Some(self.clone()),
            _ => {
                let (config, tls) = self.session_target()?;
                Some(Database::build(config, tls, size))
            }
        }
    }

    /// The TLS settings of this database's connections.
    pub fn tls(&self) -> &tls::Tls {
        &self.tls
    }

    /// A pool for a parsed configuration.
    ///
    /// Pool connections plan remuda's statements for their fixed shapes, with two session
    /// settings ([`SESSION_OPTIONS`], for these connections only; the server is untouched):
    /// - `plan_cache_mode = force_generic_plan`: a custom plan sees a batch of 1 000 outcomes
    ///   and picks a hash join over a sequential scan of `remuda.jobs` for every completion
    ///   batch (measured, 100 000-job drain: 17 000-27 000 jobs/s and ~7 s of PostgreSQL CPU,
    ///   against one primary-key probe per outcome with the generic plan: 44 000 jobs/s).
    /// - `enable_sort = off`: a generic plan guesses `LIMIT $n` at 10% of the table, and from
    ///   about 200 000 available jobs the claim became a bitmap scan of every available job
    ///   plus an external sort, per claim (200 000-job drain: 29 000 jobs/s). Without the sort
    ///   the claim walks jobs_available_idx in order and stops at the limit.
    /// - `jit = off`: every statement here touches few rows, and `enable_sort = off` makes any
    ///   plan with a sort look expensive enough to compile: measured, a rescue of six jobs
    ///   spent 700 ms in JIT compilation instead of a millisecond of work.
    /// - TCP keepalives and a user timeout on the server's side of the connection (TCP only;
    ///   sockets ignore them): a worker cut off by the network in the middle of a transaction
    ///   leaves its backend idle in that transaction, holding its locks, until the server
    ///   notices the peer is gone, by default after the kernel's two hours. A cut-off leader
    ///   in a maintenance duty's transaction held the lease's row that way and no other
    ///   worker could take over (a test with hosts in network namespaces found it). With
    ///   these the backend ends about 11 s after its client went silent (5 s idle, then 3
    ///   probes 2 s apart), and its locks with it.
    pub fn from_config(config: Config, pool_size: usize) -> Self {
        let tls = tls::Tls::of(&config);
        Database::build(config, tls, pool_size)
    }

    fn build(mut config: Config, tls: tls::Tls, pool_size: usize) -> Self {
        // a transaction-mode pooler refuses start-up options (PgBouncer: "unsupported
        // startup parameter") and would not keep them: there statements are sent unnamed
        // and planned for their values instead
        if tls.pooler == Pooler::None {
            let options = match config.get_options() {
                Some(existing) if existing.contains(SESSION_OPTIONS) => existing.to_string(),
                Some(existing) if !existing.is_empty() => {
                    format!("{existing} {SESSION_OPTIONS}")
                }
                _ => SESSION_OPTIONS.to_string(),
            };
            config.options(&options);
        }
        fail_fast(&mut config);
        let target = describe(&config);
        let manager_config = || ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        let connector = if tls.applies_to(&config) {
            tls.connector()
        } else {
            // a Unix socket offers no TLS: never ask for it there, whatever the mode
            config.ssl_mode(tokio_postgres::config::SslMode::Disable);
            Err(Error::InvalidInput("no TLS here".into()))
        };
        let manager = match connector {
            Ok(connector) => Manager::from_config(config.clone(), connector, manager_config()),
            // no TLS for this connection (sslmode=disable, a Unix socket); a connector that
            // cannot be made was refused by with_tls already
            Err(_) => Manager::from_config(config.clone(), NoTls, manager_config()),
        };
        // a call never waits forever: for a free connection (all busy: a leak, or a pool too
        // small for the load) or for a new one (a server that accepts but never answers)
        let pool = Pool::builder(manager)
            .max_size(pool_size.max(2))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            // the connection used last is handed out first: the hot path keeps a few warm
            // backends however large the pool (first-in first-out spread a drain over every
            // connection of the worker's pool, each of them a backend on 2 cores)
            .queue_mode(deadpool_postgres::QueueMode::Lifo)
            .wait_timeout(Some(POOL_WAIT_TIMEOUT))
            .create_timeout(Some(POOL_CREATE_TIMEOUT))
            .build()
            .expect("a pool with the tokio runtime set always builds");
        let unnamed = (tls.pooler == Pooler::Transaction).then(Arc::default);
        Database {
            pool,
            config: Arc::new(config),
            tls: Arc::new(tls),
            target: target.into(),
            unnamed,
            direct: None,
        }
    }

    /// Takes a connection from the pool.
    pub async fn conn(&self) -> Result<Conn> {
        use deadpool_postgres::{PoolError, TimeoutType};
        let object = self.pool.get().await.map_err(|e| match e {
            PoolError::Backend(e) => Error::unreachable(self.target.to_string(), &e),
            PoolError::Timeout(TimeoutType::Create) => Error::Unreachable {
                target: self.target.to_string(),
                reason: format!(
                    "no answer within {} s: the server accepted the connection but did not complete the start-up (overloaded, stuck, or not PostgreSQL at that address); check the host and port",
                    POOL_CREATE_TIMEOUT.as_secs()
                ),
            },
            PoolError::Timeout(TimeoutType::Wait) => Error::Pool(format!(
                "all {} connections stayed busy for {} s: too many concurrent calls for the pool, or calls that never end",
                self.pool.status().max_size,
                POOL_WAIT_TIMEOUT.as_secs()
            )),
            other => Error::Pool(other.to_string()),
        })?;
        Ok(Conn::new(object, self.unnamed.clone()))
    }

    /// Checks that the server answers.
    pub async fn ping(&self) -> Result<()> {
        self.conn().await?.simple_query("").await?;
        Ok(())
    }

    /// The connection settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Where this pool connects, for messages (no password).
    pub fn target(&self) -> &str {
        &self.target
    }
}

/// A connection that went silent (a partition, a server that vanished) must fail in seconds,
/// not after the kernel's retransmissions (15 minutes): a worker holds its outcomes meanwhile
/// and its heartbeat decides its fate. Only defaults are changed.
fn fail_fast(config: &mut Config) {
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(10));
    }
    if config.get_keepalives_idle() == Duration::from_secs(2 * 60 * 60) {
        config
            .keepalives_idle(Duration::from_secs(15))
            .keepalives_interval(Duration::from_secs(5))
            .keepalives_retries(3);
    }
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(Duration::from_secs(30));
    }
}

/// `user@host:port/dbname`, without the password; every host of a multi-host
/// configuration (`user@a:5432,b:5433/dbname`).
pub fn describe(config: &Config) -> String {
    let ports = config.get_ports();
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            format!("{}:{port}", host_name(host))
        })
        .collect();
    let hosts = if hosts.is_empty() {
        format!("localhost:{}", ports.first().copied().unwrap_or(5432))
    } else {
        hosts.join(",")
    };
    format!(
        "{}@{}/{}",
        config.get_user().unwrap_or("?"),
        hosts,
        config.get_dbname().unwrap_or("?")
    )
}

/// A `key=value` connection string for a configuration, with another database name: how the
/// test helpers and the CLI hand a resolved connection to a child process. Every host and
/// port of a multi-host configuration is kept, with its `target_session_attrs`.
pub fn conninfo(config: &Config, dbname: Option<&str>) -> String {
    fn quote(v: &str) -> String {
        format!("'{}'", v.replace('\\', "\\\\").replace('\'', "\\'"))
    }
    let mut parts = Vec::new();
    let hosts: Vec<String> = config.get_hosts().iter().map(host_name).collect();
    if !hosts.is_empty() {
        parts.push(format!("host={}", quote(&hosts.join(","))));
    }
    let ports: Vec<String> = config.get_ports().iter().map(u16::to_string).collect();
    if !ports.is_empty() {
        parts.push(format!("port={}", ports.join(",")));
    }
    match config.get_target_session_attrs() {
        TargetSessionAttrs::ReadWrite => parts.push("target_session_attrs=read-write".into()),
        TargetSessionAttrs::ReadOnly => parts.push("target_session_attrs=read-only".into()),
        _ => {}
    }
    if let Some(user) = config.get_user() {
        parts.push(format!("user={}", quote(user)));
    }
    if let Some(password) = config.get_password() {
        parts.push(format!(
            "password={}",
            quote(&String::from_utf8_lossy(password))
        ));
    }
    if let Some(db) = dbname.or(config.get_dbname()) {
        parts.push(format!("dbname={}", quote(db)));
    }
    parts.join(" ")
}

/// A host as written in a connection string: a name, or a socket directory.
fn host_name(host: &tokio_postgres::config::Host) -> String {
    match host {
        tokio_postgres::config::Host::Tcp(name) => name.clone(),
        tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::{conninfo, describe};
    use tokio_postgres::config::TargetSessionAttrs;
    use tokio_postgres::Config;

    #[test]
    fn a_multi_host_url_keeps_every_host_port_and_session_attribute_when_handed_on() {
        let url = "postgres://remuda@db-a:5432,db-b:5433/app?target_session_attrs=read-write";
        let config: Config = url.parse().expect("a multi-host URL");
        assert_eq!(describe(&config), "remuda@db-a:5432,db-b:5433/app");
        let again: Config = conninfo(&config, Some("other"))
            .parse()
            .expect("the handed-on connection string");
        assert_eq!(again.get_hosts(), config.get_hosts());
        assert_eq!(again.get_ports(), &[5432, 5433]);
        assert_eq!(
            again.get_target_session_attrs(),
            TargetSessionAttrs::ReadWrite
        );
        assert_eq!(again.get_dbname(), Some("other"));
    }

    #[test]
    fn a_single_host_is_described_as_before() {
        let config: Config = "host=/run/pg port=5433 user=u dbname=d"
            .parse()
            .expect("conninfo");
        assert_eq!(describe(&config), "u@/run/pg:5433/d");
        assert_eq!(
            conninfo(&config, None),
            "host='/run/pg' port=5433 user='u' dbname='d'"
        );
    }
}
