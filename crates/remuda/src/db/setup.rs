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
use std::process::Command;
use std::time::Duration;
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
        let dbname = self.dbname.as_deref().unwrap_or(DEFAULT_DBNAME);
        if let Some(url) = &self.url {
            let config: Config = url.parse().map_err(|e| {
                Error::InvalidInput(format!(
                    "invalid DATABASE_URL: {e}{}. Expected postgres://user@host:port/dbname?sslmode=…",
                    unknown_parameter(url)
                        .map(|p| format!(" (the parameter {p:?} is not one PostgreSQL connections take)"))
                        .unwrap_or_default()
                ))
            })?;
            tracing::info!(
                "database: {} (from the URL given)",
                crate::db::describe(&config)
            );
            return Ok(config);
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
                return Ok(config);
            }
        }
        let home = match &self.home {
            Some(home) => home.clone(),
            None => std::env::current_dir()
                .map_err(|e| Error::Setup(format!("cannot read the current directory: {e}")))?
                .join(".remuda"),
        };
        let admin = start_private_cluster(&home).await?;
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

async fn try_connect(config: &Config) -> bool {
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

/// The directory holding `initdb` and `pg_ctl`.
pub fn find_postgres_binaries() -> Result<PathBuf> {
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            if dir.join("initdb").is_file() && dir.join("pg_ctl").is_file() {
                return Ok(dir);
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            (bin.join("initdb").is_file() && bin.join("pg_ctl").is_file()).then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).ok_or_else(|| {
        Error::Setup(
            "no PostgreSQL server found: nothing answers on 127.0.0.1:5432 or /var/run/postgresql, and \
             there is no initdb/pg_ctl on PATH or under /usr/lib/postgresql/*/bin to start a private one. \
             Install PostgreSQL (Debian/Ubuntu: `apt-get install -y postgresql`; macOS: `brew install postgresql`) \
             or set DATABASE_URL to a server you have"
                .into(),
        )
    })
}

/// The user the private cluster runs as: ourselves, or an unprivileged account when root.
fn cluster_owner() -> Result<Option<nix::unistd::User>> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(None);
    }
    for name in ["postgres", "nobody"] {
        if let Ok(Some(user)) = nix::unistd::User::from_name(name) {
            return Ok(Some(user));
        }
    }
    Err(Error::Setup(
        "running as root, and PostgreSQL refuses to run as root, but there is no `postgres` or \
         `nobody` user to run the private cluster as: create one (`useradd postgres`) or set DATABASE_URL"
            .into(),
    ))
}

/// Runs a PostgreSQL program (as the cluster's owner when root) without blocking the
/// runtime: `pg_ctl start` waits up to a minute, and workers in the same runtime must keep
/// running meanwhile (a fault test crashes and restarts the server under running workers).
async fn run_as(
    bin: &Path,
    program: &str,
    args: &[&str],
    owner: &Option<nix::unistd::User>,
) -> Result<String> {
    let mut command = tokio::process::Command::new(bin.join(program));
    command.args(args).env("LC_ALL", "C").env("LANG", "C");
    if let Some(user) = owner {
        command.uid(user.uid.as_raw()).gid(user.gid.as_raw());
        command.env("HOME", &user.dir);
    }
    let output = command
        .output()
        .await
        .map_err(|e| Error::Setup(format!("cannot run {program}: {e}")))?;
    program_output(program, output)
}

/// The same, blocking: only for `Drop`, which cannot wait on a future.
fn run_as_blocking(
    bin: &Path,
    program: &str,
    args: &[&str],
    owner: &Option<nix::unistd::User>,
) -> Result<String> {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(bin.join(program));
    command.args(args).env("LC_ALL", "C").env("LANG", "C");
    if let Some(user) = owner {
        command.uid(user.uid.as_raw()).gid(user.gid.as_raw());
        command.env("HOME", &user.dir);
    }
    let output = command
        .output()
        .map_err(|e| Error::Setup(format!("cannot run {program}: {e}")))?;
    program_output(program, output)
}

/// A program's stdout and stderr, or its failure with them.
fn program_output(program: &str, output: std::process::Output) -> Result<String> {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if output.status.success() {
        Ok(text)
    } else {
        Err(Error::Setup(format!("{program} failed: {}", text.trim())))
    }
}

fn chown(path: &Path, owner: &Option<nix::unistd::User>) -> Result<()> {
    if let Some(user) = owner {
        nix::unistd::chown(path, Some(user.uid), Some(user.gid)).map_err(|e| {
            Error::Setup(format!(
                "cannot hand {} to user {}: {e}",
                path.display(),
                user.name
            ))
        })?;
    }
    Ok(())
}

/// Starts (or reuses) the private cluster under `home` and returns the admin connection.
pub async fn start_private_cluster(home: &Path) -> Result<Config> {
    let home = std::path::absolute(home)
        .map_err(|e| Error::Setup(format!("bad REMUDA_HOME {}: {e}", home.display())))?;
    let data = home.join("pg");
    let run = home.join("run");
    let mut config = Config::new();
    config
        .host_path(&run)
        .port(5432)
        .user("remuda")
        .dbname("postgres")
        .connect_timeout(Duration::from_secs(5));
    if try_connect(&config).await {
        return Ok(config);
    }
    let bin = find_postgres_binaries()?;
    let owner = cluster_owner()?;
    for dir in [&home, &run] {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::Setup(format!("cannot create {}: {e}", dir.display())))?;
        chown(dir, &owner)?;
    }
    // One process sets the cluster up; the others wait for it and then find it running.
    let lock_file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(home.join("setup.lock"))
        .map_err(|e| {
            Error::Setup(format!(
                "cannot open {}: {e}",
                home.join("setup.lock").display()
            ))
        })?;
    let lock = tokio::task::spawn_blocking(move || {
        nix::fcntl::Flock::lock(lock_file, nix::fcntl::FlockArg::LockExclusive).map_err(|(_, e)| e)
    })
    .await
    .map_err(|e| Error::Setup(format!("lock task failed: {e}")))?
    .map_err(|e| Error::Setup(format!("cannot lock {}: {e}", home.display())))?;
    if try_connect(&config).await {
        drop(lock);
        return Ok(config);
    }
    let data_str = data.to_string_lossy().to_string();
    if !data.join("PG_VERSION").exists() {
        if data.exists() {
            std::fs::remove_dir_all(&data).map_err(|e| {
                Error::Setup(format!("cannot clear half-made {}: {e}", data.display()))
            })?;
        }
        run_as(
            &bin,
            "initdb",
            &[
                "-D",
                &data_str,
                "-U",
                "remuda",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            &owner,
        )
        .await?;
        let settings = format!(
            "\n# written by remuda: a private cluster reached only through its socket\n\
             listen_addresses = ''\nunix_socket_directories = '{}'\nport = 5432\nmax_connections = 200\n",
            run.to_string_lossy().replace('\'', "''")
        );
        use std::io::Write;
        std::fs::OpenOptions::new()
            .append(true)
            .open(data.join("postgresql.conf"))
            .and_then(|mut f| f.write_all(settings.as_bytes()))
            .map_err(|e| Error::Setup(format!("cannot configure {}: {e}", data.display())))?;
    }
    let log = home.join("pg.log").to_string_lossy().to_string();
    if let Some(user) = &owner {
        let _ = std::fs::File::create(&log);
        chown(Path::new(&log), &Some(user.clone()))?;
    }
    run_as(
        &bin,
        "pg_ctl",
        &["-D", &data_str, "-l", &log, "-w", "-t", "60", "start"],
        &owner,
    )
    .await
    .map_err(|e| Error::Setup(format!("{e} (see {log})")))?;
    drop(lock);
    if try_connect(&config).await {
        Ok(config)
    } else {
        Err(Error::Setup(format!(
            "started the private PostgreSQL in {} but cannot connect to it (see {log})",
            data.display()
        )))
    }
}

/// Stops the private cluster under `home`, if it runs.
pub async fn stop_private_cluster(home: &Path) -> Result<()> {
    stop_private_cluster_with(home, "fast").await
}

/// Stops the private cluster under `home`, if it runs, with a `pg_ctl stop` mode: `smart`,
/// `fast`, or `immediate` (a crash, as far as the database is concerned: it recovers from its
/// write-ahead log at the next start; the fault-injection tests use it).
pub async fn stop_private_cluster_with(home: &Path, mode: &str) -> Result<()> {
    let data = home.join("pg");
    if !data.join("postmaster.pid").exists() {
        return Ok(());
    }
    let bin = find_postgres_binaries()?;
    let owner = cluster_owner()?;
    run_as(
        &bin,
        "pg_ctl",
        &["-D", &data.to_string_lossy(), "-m", mode, "-w", "stop"],
        &owner,
    )
    .await?;
    Ok(())
}

/// [`stop_private_cluster_with`], blocking the thread: for `Drop` implementations.
pub fn stop_private_cluster_blocking(home: &Path, mode: &str) -> Result<()> {
    let data = home.join("pg");
    if !data.join("postmaster.pid").exists() {
        return Ok(());
    }
    let bin = find_postgres_binaries()?;
    let owner = cluster_owner()?;
    run_as_blocking(
        &bin,
        "pg_ctl",
        &["-D", &data.to_string_lossy(), "-m", mode, "-w", "stop"],
        &owner,
    )?;
    Ok(())
}
