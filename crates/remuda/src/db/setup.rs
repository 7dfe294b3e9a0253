//! Finding a PostgreSQL to use, so that `remuda demo` and the tests work on a fresh machine.
//!
//! In order: `DATABASE_URL` (or an explicit URL); else a local server that accepts us (Unix
//! socket or 127.0.0.1:5432); else a private cluster that remuda starts itself from the local
//! PostgreSQL binaries, in `$REMUDA_HOME` or `./.remuda` (data in `pg/`, socket in `run/`),
//! reused by later runs. `--embedded` / `REMUDA_EMBEDDED=1` skips the local server. When run
//! as root the private cluster runs as the unprivileged `postgres` (or `nobody`) user, since
//! PostgreSQL refuses to run as root.

use crate::{Error, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[cfg(feature = "embedded")]
pub use super::cluster::{
    find_postgres_binaries, start_private_cluster, stop_private_cluster,
    stop_private_cluster_blocking, stop_private_cluster_with,
};
use tokio_postgres::{Config, NoTls};

/// Where to look for a database.
#[derive(Clone, Debug, Default)]
pub struct Resolve {
    /// An explicit connection string; used as is when set.
    pub url: Option<String>,
    /// Use the private cluster even when a local server answers.
    pub embedded: bool,
    /// Directory of the private cluster (default `./.remuda`).
    pub home: Option<PathBuf>,
    /// Database to use on a local server or the private cluster (created if missing).
    pub dbname: Option<String>,
}

/// The database remuda creates and uses on a local server or its private cluster.
pub const DEFAULT_DBNAME: &str = "remuda";

impl Resolve {
    /// Settings from the environment: `DATABASE_URL`, `REMUDA_EMBEDDED`, `REMUDA_HOME`.
    pub fn from_env() -> Self {
        Resolve {
            url: std::env::var("DATABASE_URL").ok().filter(|s| !s.is_empty()),
            embedded: std::env::var("REMUDA_EMBEDDED").is_ok_and(|v| v == "1" || v == "true"),
            home: std::env::var_os("REMUDA_HOME").map(PathBuf::from),
            dbname: None,
        }
    }

    /// The connection to use, setting up the database (and the private cluster) if needed.
    pub async fn resolve(&self) -> Result<Config> {
        Ok(self.resolve_with_tls().await?.0)
    }

    /// [`Resolve::resolve`], with the TLS settings of the URL (`sslmode`, `sslrootcert`).
    pub async fn resolve_with_tls(&self) -> Result<(Config, super::tls::Tls)> {
        let dbname = self.dbname.as_deref().unwrap_or(DEFAULT_DBNAME);
        if let Some(url) = &self.url {
            let (config, tls) = super::tls::parse(url).map_err(|e| {
                Error::InvalidInput(format!(
                    "{e}{}",
                    unknown_parameter(url)
                        .map(|p| format!(
                            " (the parameter {p:?} is not one PostgreSQL connections take)"
                        ))
                        .unwrap_or_default()
                ))
            })?;
            tracing::info!(
                "database: {} (from the URL given)",
                crate::db::describe(&config)
            );
            return Ok((config, tls));
        }
        if !self.embedded {
            if let Some(admin) = find_local_server().await {
                ensure_database(&admin, dbname).await?;
                let mut config = admin;
                config.dbname(dbname);
                tracing::info!(
                    "database: {} (no URL given: the local server that let us in)",
                    crate::db::describe(&config)
                );
                return Ok((config, Default::default()));
            }
        }
        let home = match &self.home {
            Some(home) => home.clone(),
            None => std::env::current_dir()
                .map_err(|e| Error::Setup(format!("cannot read the current directory: {e}")))?
                .join(".remuda"),
        };
        Ok((private_cluster(&home, dbname).await?, Default::default()))
    }
}

/// The private cluster in `home`, with `dbname` created in it.
#[cfg(feature = "embedded")]
async fn private_cluster(home: &Path, dbname: &str) -> Result<Config> {
    let admin = super::cluster::start_private_cluster(home).await?;
    ensure_database(&admin, dbname).await?;
    let mut config = admin;
    config.dbname(dbname);
    tracing::info!(
        "database: {} (the private cluster in {})",
        crate::db::describe(&config),
        home.display()
    );
    Ok(config)
}

/// Without the `embedded` feature there is no private cluster to fall back on.
#[cfg(not(feature = "embedded"))]
async fn private_cluster(home: &Path, _dbname: &str) -> Result<Config> {
    Err(Error::Setup(format!(
        "no DATABASE_URL and no local server that lets us in, and this build of remuda has no private cluster to start in {} (the `embedded` feature): set DATABASE_URL",
        home.display()
    )))
}

/// The first query parameter of a `postgres://` URL that libpq-style connections do not
/// know, for an error that names it.
fn unknown_parameter(url: &str) -> Option<String> {
    const KNOWN: &[&str] = &[
        "user",
        "password",
        "dbname",
        "options",
        "application_name",
        "sslmode",
        "sslcert",
        "sslkey",
        "sslrootcert",
        "host",
        "hostaddr",
        "port",
        "connect_timeout",
        "keepalives",
        "keepalives_idle",
        "target_session_attrs",
        "channel_binding",
        "load_balance_hosts",
        "tcp_user_timeout",
        "sslnegotiation",
        "replication",
    ];
    let query = url.split_once('?')?.1;
    query
        .split('&')
        .filter_map(|pair| pair.split('=').next())
        .find(|key| !key.is_empty() && !KNOWN.contains(key))
        .map(str::to_string)
}

pub(crate) async fn try_connect(config: &Config) -> bool {
    match tokio::time::timeout(Duration::from_secs(3), config.connect(NoTls)).await {
        Ok(Ok((client, connection))) => {
            let driver = tokio::spawn(connection);
            let ok = client.simple_query("").await.is_ok();
            drop(client);
            let _ = driver.await;
            ok
        }
        _ => false,
    }
}

/// A local server that lets us in as a superuser-capable user, on its maintenance database.
async fn find_local_server() -> Option<Config> {
    let os_user = nix::unistd::User::from_uid(nix::unistd::geteuid())
        .ok()
        .flatten()
        .map(|u| u.name);
    let mut users: Vec<String> = Vec::new();
    for user in [
        std::env::var("PGUSER").ok(),
        os_user,
        Some("postgres".into()),
    ]
    .into_iter()
    .flatten()
    {
        if !users.contains(&user) {
            users.push(user);
        }
    }
    let hosts = ["/var/run/postgresql", "/tmp", "127.0.0.1"];
    for host in hosts {
        if host.starts_with('/') && !Path::new(host).join(".s.PGSQL.5432").exists() {
            continue;
        }
        for user in &users {
            let mut config = Config::new();
            config
                .host(host)
                .port(5432)
                .user(user)
                .dbname("postgres")
                .connect_timeout(Duration::from_secs(2));
            if try_connect(&config).await {
                return Some(config);
            }
        }
    }
    None
}

/// Creates `dbname` unless it exists (safe when several processes race to create it).
async fn ensure_database(admin: &Config, dbname: &str) -> Result<()> {
    let (client, connection) = admin
        .connect(NoTls)
        .await
        .map_err(|e| Error::unreachable(super::describe(admin), &e))?;
    let driver = tokio::spawn(connection);
    let exists = client
        .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&dbname])
        .await?
        .is_some();
    if !exists {
        let sql = format!("CREATE DATABASE \"{}\"", dbname.replace('"', "\"\""));
        if let Err(e) = client.batch_execute(&sql).await {
            let raced = e.code().is_some_and(|c| {
                *c == tokio_postgres::error::SqlState::DUPLICATE_DATABASE
                    || *c == tokio_postgres::error::SqlState::UNIQUE_VIOLATION
            });
            if !raced {
                return Err(Error::Setup(format!(
                    "cannot create database {dbname}: {e}"
                )));
            }
        }
    }
    drop(client);
    let _ = driver.await;
    Ok(())
}
