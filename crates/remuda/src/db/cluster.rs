//! The private PostgreSQL cluster that remuda starts itself from the local PostgreSQL
//! binaries when no server is configured or found (see `setup.rs`): for `remuda demo`, the
//! tests and a first try on a fresh machine. Behind the `embedded` feature (on by default), so
//! a production build that always has `DATABASE_URL` need not compile it.

use super::setup::try_connect;
use crate::{Error, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tokio_postgres::Config;

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
pub(crate) fn cluster_owner() -> Result<Option<nix::unistd::User>> {
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

/// The command that runs a PostgreSQL program, as the cluster's owner when we are root.
pub(crate) fn program(
    bin: &Path,
    program: &str,
    args: &[&str],
    owner: &Option<nix::unistd::User>,
) -> Command {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(bin.join(program));
    command.args(args).env("LC_ALL", "C").env("LANG", "C");
    if let Some(user) = owner {
        command.uid(user.uid.as_raw()).gid(user.gid.as_raw());
        command.env("HOME", &user.dir);
    }
    command
}

/// Runs a PostgreSQL program without blocking the runtime: `pg_ctl start` waits up to a
/// minute, and workers in the same runtime must keep running meanwhile (a fault test crashes
/// and restarts the server under running workers).
pub(crate) async fn run_as(
    bin: &Path,
    name: &str,
    args: &[&str],
    owner: &Option<nix::unistd::User>,
) -> Result<String> {
    let output = tokio::process::Command::from(program(bin, name, args, owner))
        .output()
        .await
        .map_err(|e| Error::Setup(format!("cannot run {name}: {e}")))?;
    program_output(name, output)
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

pub(crate) fn chown(path: &Path, owner: &Option<nix::unistd::User>) -> Result<()> {
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

/// How a private cluster is set up when it is first made (tests use it for TLS and TCP).
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// The port: of its socket, and of TCP when `extra_settings` opens `listen_addresses`.
    pub port: u16,
    /// More `postgresql.conf` lines (`ssl = on`, `listen_addresses = '127.0.0.1'`).
    pub extra_settings: String,
    /// Files written into the data directory, readable by the server only (certificates and
    /// keys, a `pg_hba.conf` replacing initdb's).
    pub files: Vec<(String, Vec<u8>)>,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            port: 5432,
            extra_settings: String::new(),
            files: Vec::new(),
        }
    }
}

/// Starts (or reuses) the private cluster under `home` and returns the admin connection.
pub async fn start_private_cluster(home: &Path) -> Result<Config> {
    start_private_cluster_with(home, &ClusterOptions::default()).await
}

/// [`start_private_cluster`] with the set-up of a new cluster given.
pub async fn start_private_cluster_with(home: &Path, options: &ClusterOptions) -> Result<Config> {
    let home = std::path::absolute(home)
        .map_err(|e| Error::Setup(format!("bad REMUDA_HOME {}: {e}", home.display())))?;
    let data = home.join("pg");
    let run = home.join("run");
    let mut config = Config::new();
    config
        .host_path(&run)
        .port(options.port)
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
             listen_addresses = ''\nunix_socket_directories = '{}'\nport = {}\nmax_connections = 200\n{}\n",
            run.to_string_lossy().replace('\'', "''"),
            options.port,
            options.extra_settings
        );
        for (name, contents) in &options.files {
            let path = data.join(name);
            std::fs::write(&path, contents)
                .map_err(|e| Error::Setup(format!("cannot write {}: {e}", path.display())))?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| Error::Setup(format!("cannot protect {}: {e}", path.display())))?;
            chown(&path, &owner)?;
        }
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

/// Starts the (stopped) private cluster under `home` inside the network namespace `netns`,
/// listening on `address` besides its socket: the database of a test whose workers run on
/// hosts of their own (`remuda::testing::Hosts`).
pub async fn start_private_cluster_in(home: &Path, netns: &str, address: &str) -> Result<()> {
    let data = home.join("pg").to_string_lossy().to_string();
    let log = home.join("pg.log").to_string_lossy().to_string();
    let pg_ctl = find_postgres_binaries()?.join("pg_ctl");
    let mut command = tokio::process::Command::new("ip");
    command
        .args(["netns", "exec", netns])
        .env("LC_ALL", "C")
        .env("LANG", "C");
    // `ip netns exec` needs root; PostgreSQL refuses it: the owner's uid only past the setns
    if let Some(user) = cluster_owner()? {
        command.args(["runuser", "-u", &user.name, "--"]);
    }
    let listen = format!("-c listen_addresses={address}");
    command.arg(pg_ctl).args([
        "-D", &data, "-l", &log, "-o", &listen, "-w", "-t", "60", "start",
    ]);
    let output = command
        .output()
        .await
        .map_err(|e| Error::Setup(format!("cannot run pg_ctl in {netns}: {e}")))?;
    program_output("pg_ctl", output)
        .map(|_| ())
        .map_err(|e| Error::Setup(format!("{e} (see {log})")))
}

/// Stops the private cluster under `home`, if it runs.
pub async fn stop_private_cluster(home: &Path) -> Result<()> {
    stop_private_cluster_with(home, "fast").await
}

/// Stops the private cluster under `home`, if it runs, with a `pg_ctl stop` mode: `smart`,
/// `fast`, or `immediate` (a crash, as far as the database is concerned: it recovers from its
/// write-ahead log at the next start; the fault-injection tests use it).
pub async fn stop_private_cluster_with(home: &Path, mode: &str) -> Result<()> {
    let Some(command) = stop_command(home, mode)? else {
        return Ok(());
    };
    let output = tokio::process::Command::from(command)
        .output()
        .await
        .map_err(|e| Error::Setup(format!("cannot run pg_ctl: {e}")))?;
    program_output("pg_ctl", output).map(|_| ())
}

/// [`stop_private_cluster_with`], blocking the thread: for `Drop` implementations.
pub fn stop_private_cluster_blocking(home: &Path, mode: &str) -> Result<()> {
    let Some(mut command) = stop_command(home, mode)? else {
        return Ok(());
    };
    let output = command
        .output()
        .map_err(|e| Error::Setup(format!("cannot run pg_ctl: {e}")))?;
    program_output("pg_ctl", output).map(|_| ())
}

/// The `pg_ctl stop` of the cluster under `home`, if it runs.
fn stop_command(home: &Path, mode: &str) -> Result<Option<Command>> {
    let data = home.join("pg");
    if !data.join("postmaster.pid").exists() {
        return Ok(None);
    }
    let bin = find_postgres_binaries()?;
    let owner = cluster_owner()?;
    let args = ["-D", &data.to_string_lossy(), "-m", mode, "-w", "stop"];
    Ok(Some(program(&bin, "pg_ctl", &args, &owner)))
}
