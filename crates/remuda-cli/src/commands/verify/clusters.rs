//! The private PostgreSQL clusters of a verification run: a primary, and with `--failover` a
//! synchronous standby, both listening on 127.0.0.1 on ports of their own. The workers reach
//! them through one multi-host URL with `target_session_attrs=read-write`, so that after a
//! failover they find the promoted standby by themselves.

use remuda::db::cluster::{start_private_cluster_with, ClusterOptions};
use remuda::db::replica::{self, Node};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio_postgres::{Client, Config, NoTls};

/// The standby's name in `synchronous_standby_names`.
const STANDBY: &str = "remuda_standby";

/// Settings of every cluster of the run. `fsync = off`: the faults kill server processes, not
/// the machine, so what was written survives in the page cache; replication, not the disk, is
/// what a failover tests.
const SETTINGS: &str =
    "listen_addresses = '127.0.0.1'\nfsync = off\nwal_keep_size = '1GB'\nmax_connections = 300\n";

/// The primary and the standby (when there is one).
pub struct Clusters {
    pub primary: Node,
    pub standby: Option<Node>,
}

/// A port nothing listens on now.
fn free_port() -> remuda::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| remuda::Error::Setup(format!("cannot find a free port: {e}")))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| remuda::Error::Setup(format!("cannot find a free port: {e}")))
}

impl Clusters {
    /// Starts the primary under `home/a` with a migrated `remuda` database in verification
    /// mode, and with `failover` its synchronous standby under `home/b`.
    pub async fn start(home: &Path, failover: bool) -> remuda::Result<Clusters> {
        let primary = Node {
            home: home.join("a"),
            port: free_port()?,
        };
        let options = ClusterOptions {
            port: primary.port,
            extra_settings: SETTINGS.into(),
            files: Vec::new(),
        };
        let standby = if failover {
            Some(Node {
                home: home.join("b"),
                port: free_port()?,
            })
        } else {
            None
        };
        let mut clusters = Clusters {
            primary,
            standby: None,
        };
        match clusters.set_up(&options, standby).await {
            Ok(()) => Ok(clusters),
            Err(e) => {
                // whatever had started is stopped before its directory goes
                clusters.stop();
                Err(e)
            }
        }
    }

    async fn set_up(
        &mut self,
        options: &ClusterOptions,
        standby: Option<Node>,
    ) -> remuda::Result<()> {
        start_private_cluster_with(&self.primary.home, options).await?;
        let admin = connect(&self.primary, "postgres").await?;
        admin.batch_execute("CREATE DATABASE remuda").await?;
        let db = remuda::Database::new(&self.url(), 2)?;
        remuda::migrate::run(&db).await?;
        remuda::verify::set_history(&db, true).await?;
        if standby.is_some() {
            self.standby = standby;
            self.attach_standby().await?;
        }
        Ok(())
    }

    /// The URL every process of the run connects with: both clusters, the writable one
    /// chosen at each connection.
    pub fn url(&self) -> String {
        let mut hosts = format!("127.0.0.1:{}", self.primary.port);
        if let Some(standby) = &self.standby {
            hosts.push_str(&format!(",127.0.0.1:{}", standby.port));
        }
        format!(
            "postgres://remuda@{hosts}/remuda?target_session_attrs=read-write&connect_timeout=3&sslmode=disable"
        )
    }

    /// Copies the primary into the standby's home, starts it streaming, and makes the primary
    /// wait for it at each commit.
    async fn attach_standby(&self) -> remuda::Result<()> {
        let Some(standby) = &self.standby else {
            return Ok(());
        };
        replica::start_standby(&self.primary, standby, STANDBY, SETTINGS).await?;
        let admin = connect(&self.primary, "postgres").await?;
        let started = Instant::now();
        loop {
            let streaming = admin
                .query_opt(
                    "SELECT 1 FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming'",
                    &[&STANDBY],
                )
                .await?
                .is_some();
            if streaming {
                break;
            }
            if started.elapsed() > Duration::from_secs(60) {
                return Err(remuda::Error::Setup(format!(
                    "the standby in {} did not stream within a minute (see its pg.log)",
                    standby.home.display()
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        admin
            .batch_execute(&format!(
                "ALTER SYSTEM SET synchronous_standby_names = '{STANDBY}'"
            ))
            .await?;
        admin.batch_execute("SELECT pg_reload_conf()").await?;
        Ok(())
    }

    /// Kills the primary as a crash would and starts it again (it recovers from its log).
    pub async fn restart(&self) -> remuda::Result<()> {
        replica::stop(&self.primary, "immediate").await?;
        replica::start(&self.primary).await
    }

    /// Kills the primary, promotes the standby, and makes a new standby of the old primary's
    /// home (copied from the new primary). Ok(false) when there is no standby to promote.
    pub async fn fail_over(&mut self) -> remuda::Result<bool> {
        let Some(standby) = self.standby.clone() else {
            return Ok(false);
        };
        // (on an error both stay known, so that `stop` stops both)
        replica::stop(&self.primary, "immediate").await?;
        replica::promote(&standby).await?;
        let old = std::mem::replace(&mut self.primary, standby);
        self.standby = Some(old);
        self.attach_standby().await?;
        Ok(true)
    }

    /// Ends every client session on the run's database (`pg_terminate_backend`), the workers'
    /// and the feeder's, as a network fault or an administrator would; returns how many.
    pub async fn terminate_sessions(&self) -> remuda::Result<i64> {
        let admin = connect(&self.primary, "postgres").await?;
        let row = admin
            .query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                 WHERE datname = 'remuda' AND backend_type = 'client backend'",
                &[],
            )
            .await?;
        Ok(row.get(0))
    }

    /// Stops both clusters at once.
    pub fn stop(&self) {
        for node in std::iter::once(&self.primary).chain(&self.standby) {
            let _ = remuda::db::setup::stop_private_cluster_blocking(&node.home, "immediate");
        }
    }
}

/// A connection to database `dbname` of `node`, through its socket.
async fn connect(node: &Node, dbname: &str) -> remuda::Result<Client> {
    let mut config = Config::new();
    config
        .host_path(node.home.join("run"))
        .port(node.port)
        .user("remuda")
        .dbname(dbname)
        .connect_timeout(Duration::from_secs(5));
    let (client, connection) = config.connect(NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}
