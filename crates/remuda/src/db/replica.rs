//! A streaming-replication standby of a private cluster (see [`super::cluster`]), and its
//! promotion: what `remuda verify --failover` kills a primary under. The standby is made with
//! `pg_basebackup` from the primary's socket, follows it under an `application_name` the
//! primary can name in `synchronous_standby_names`, and listens on a port of its own.

use super::cluster::{chown, cluster_owner, find_postgres_binaries, run_as};
use crate::{Error, Result};
use std::path::Path;

/// Where a private cluster lives and listens.
#[derive(Clone, Debug)]
pub struct Node {
    /// Its home: the data directory is `pg`, the socket directory `run`.
    pub home: std::path::PathBuf,
    /// Its port, on the socket and on TCP when it listens there.
    pub port: u16,
}

impl Node {
    fn data(&self) -> String {
        self.home.join("pg").to_string_lossy().to_string()
    }

    fn run(&self) -> String {
        self.home.join("run").to_string_lossy().to_string()
    }
}

/// The directory of the server's programs: where `pg_ctl` really is (`initdb` and `pg_ctl`
/// are often linked from elsewhere, `pg_basebackup` is not).
fn server_binaries() -> Result<std::path::PathBuf> {
    let pg_ctl = find_postgres_binaries()?.join("pg_ctl");
    let real = std::fs::canonicalize(&pg_ctl)
        .map_err(|e| Error::Setup(format!("cannot resolve {}: {e}", pg_ctl.display())))?;
    Ok(real.parent().map(Path::to_path_buf).unwrap_or(real))
}

fn quoted(value: &str) -> String {
    value.replace('\'', "''")
}

/// Makes `standby` a copy of the running `primary` that streams its write-ahead log under
/// `name`, with `settings` (more `postgresql.conf` lines) on top of the primary's, and starts
/// it. Whatever was in `standby`'s home before is removed. The standby never waits for a
/// standby of its own: once promoted it commits alone until one is named again.
pub async fn start_standby(
    primary: &Node,
    standby: &Node,
    name: &str,
    settings: &str,
) -> Result<()> {
    let bin = server_binaries()?;
    let owner = cluster_owner()?;
    if standby.home.exists() {
        std::fs::remove_dir_all(&standby.home)
            .map_err(|e| Error::Setup(format!("cannot clear {}: {e}", standby.home.display())))?;
    }
    for dir in [standby.home.clone(), standby.home.join("run")] {
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::Setup(format!("cannot create {}: {e}", dir.display())))?;
        chown(&dir, &owner)?;
    }
    let port = primary.port.to_string();
    let data = standby.data();
    let args = [
        "-D",
        &data,
        "-h",
        &primary.run(),
        "-p",
        &port,
        "-U",
        "remuda",
        "-X",
        "stream",
        "-R",
        "-c",
        "fast",
        "--no-sync",
    ];
    run_as(&bin, "pg_basebackup", &args, &owner).await?;
    let conf = format!(
        "\n# written by remuda: a standby of the cluster on port {}\n\
         unix_socket_directories = '{}'\nport = {}\n{settings}\n",
        primary.port,
        quoted(&standby.run()),
        standby.port,
    );
    append(&standby.home.join("pg").join("postgresql.conf"), &conf)?;
    let auto = format!(
        "primary_conninfo = 'host=''{}'' port={} user=remuda application_name={name}'\n\
         synchronous_standby_names = ''\n",
        quoted(&primary.run()),
        primary.port
    );
    append(&standby.home.join("pg").join("postgresql.auto.conf"), &auto)?;
    start(standby).await
}

/// Starts the (stopped) cluster of `node` again.
pub async fn start(node: &Node) -> Result<()> {
    let bin = find_postgres_binaries()?;
    let owner = cluster_owner()?;
    let log = node.home.join("pg.log").to_string_lossy().to_string();
    if let Some(user) = &owner {
        if !Path::new(&log).exists() {
            let _ = std::fs::File::create(&log);
        }
        chown(Path::new(&log), &Some(user.clone()))?;
    }
    let data = node.data();
    let args = ["-D", &data, "-l", &log, "-w", "-t", "120", "start"];
    run_as(&bin, "pg_ctl", &args, &owner)
        .await
        .map(|_| ())
        .map_err(|e| Error::Setup(format!("{e} (see {log})")))
}

/// Stops the cluster of `node` with a `pg_ctl stop` mode (`immediate`: as a crash).
pub async fn stop(node: &Node, mode: &str) -> Result<()> {
    super::setup::stop_private_cluster_with(&node.home, mode).await
}

/// Promotes the standby of `node` to a primary and waits until it accepts writes.
pub async fn promote(node: &Node) -> Result<()> {
    let bin = find_postgres_binaries()?;
    let owner = cluster_owner()?;
    let data = node.data();
    run_as(
        &bin,
        "pg_ctl",
        &["-D", &data, "-w", "-t", "120", "promote"],
        &owner,
    )
    .await
    .map(|_| ())
}

fn append(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| Error::Setup(format!("cannot configure {}: {e}", path.display())))
}
