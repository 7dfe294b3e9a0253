//! A private PgBouncer in transaction pooling mode in front of a [`PrivateCluster`], for tests
//! of remuda behind a pooler: Debian's `pgbouncer` package (1.18 on bookworm), which keeps no
//! prepared statement across transactions and refuses start-up options it does not know.

use super::PrivateCluster;
use crate::{Error, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A PgBouncer process of its own, stopped and its files removed when dropped.
pub struct PgBouncer {
    dir: PathBuf,
    port: u16,
    child: std::process::Child,
}

/// Where the `pgbouncer` program is: on `PATH` or where Debian installs it; `None` when it is
/// not installed (the README's test command installs it as root on Debian).
pub fn pgbouncer_program() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").into_iter().flat_map(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("pgbouncer"))
            .collect::<Vec<_>>()
    });
    on_path
        .chain([PathBuf::from("/usr/sbin/pgbouncer")])
        .find(|p| p.is_file())
}

impl PgBouncer {
    /// Starts PgBouncer on 127.0.0.1 (a free port) with `pool_size` server connections to the
    /// cluster's `remuda` database, `pool_mode = transaction`, and waits until it answers.
    pub async fn start(cluster: &PrivateCluster, pool_size: u32) -> Result<PgBouncer> {
        let program = pgbouncer_program().ok_or_else(|| {
            Error::Setup("pgbouncer is not installed (Debian: apt-get install pgbouncer)".into())
        })?;
        let dir = std::env::temp_dir().join(format!(
            "remuda-pgbouncer-{}-{:06x}",
            std::process::id(),
            fastrand::u32(..0x1000000)
        ));
        let setup = |e: std::io::Error| Error::Setup(format!("pgbouncer set-up: {e}"));
        std::fs::create_dir_all(&dir).map_err(setup)?;
        let port = free_port().map_err(setup)?;
        let socket_dir = cluster
            .socket()
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        std::fs::write(dir.join("users.txt"), "\"remuda\" \"\"\n").map_err(setup)?;
        std::fs::write(
            dir.join("pgbouncer.ini"),
            format!(
                "[databases]\n\
                 remuda = host={socket} port=5432 dbname=remuda user=remuda\n\
                 [pgbouncer]\n\
                 listen_addr = 127.0.0.1\n\
                 listen_port = {port}\n\
                 unix_socket_dir =\n\
                 auth_type = trust\n\
                 auth_file = {users}\n\
                 pool_mode = transaction\n\
                 default_pool_size = {pool_size}\n\
                 max_client_conn = 1000\n\
                 logfile = {log}\n\
                 pidfile = {pid}\n",
                socket = socket_dir.display(),
                users = dir.join("users.txt").display(),
                log = dir.join("pgbouncer.log").display(),
                pid = dir.join("pgbouncer.pid").display(),
            ),
        )
        .map_err(setup)?;
        let mut command = std::process::Command::new(program);
        command
            .arg(dir.join("pgbouncer.ini"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        // PgBouncer refuses to run as root: as the cluster's owner then
        if let Some(user) = crate::db::cluster::cluster_owner()? {
            use std::os::unix::process::CommandExt;
            for entry in std::fs::read_dir(&dir).map_err(setup)?.flatten() {
                let _ = nix::unistd::chown(&entry.path(), Some(user.uid), Some(user.gid));
            }
            nix::unistd::chown(&dir, Some(user.uid), Some(user.gid))
                .map_err(|e| Error::Setup(format!("pgbouncer set-up: {e}")))?;
            command.uid(user.uid.as_raw()).gid(user.gid.as_raw());
        }
        let child = command.spawn().map_err(setup)?;
        let bouncer = PgBouncer { dir, port, child };
        bouncer.wait_ready().await?;
        Ok(bouncer)
    }

    /// A connection string through the pooler (`pooler=transaction`).
    pub fn conninfo(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=remuda dbname=remuda sslmode=disable pooler=transaction",
            self.port
        )
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// What PgBouncer logged so far (for a failing test's message).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("pgbouncer.log")).unwrap_or_default()
    }

    async fn wait_ready(&self) -> Result<()> {
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            let db = crate::Database::new(&self.conninfo(), 1)?;
            match db.ping().await {
                Ok(()) => return Ok(()),
                Err(e) if std::time::Instant::now() > deadline => {
                    return Err(Error::Setup(format!(
                        "pgbouncer did not answer within 15 s: {e}; its log: {}",
                        self.log()
                    )))
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
