//! Hosts of a test's own: network namespaces (`ip netns`) that stand for separate machines,
//! each joined by a veth pair to a bridge in the database's namespace, so that workers reach
//! PostgreSQL over a real network whose links a test can cut. Every address lives inside these
//! namespaces (10.213.0.0/24): nothing is added to the machine's own network, and dropping the
//! value deletes the namespaces with their links. Needs root (CAP_NET_ADMIN and
//! CAP_SYS_ADMIN); [`Hosts::create`] says why it cannot be done otherwise.

use super::PrivateCluster;
use crate::{Error, Result};
use std::process::Command;

/// The database's address on the test network.
pub const DATABASE_ADDRESS: &str = "10.213.0.1";

/// A database namespace and `n` host namespaces linked to it.
pub struct Hosts {
    prefix: String,
    count: usize,
}

fn ip(args: &[&str]) -> Result<()> {
    let output = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| Error::Setup(format!("cannot run ip: {e}")))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(Error::Setup(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )))
    }
}

impl Hosts {
    /// Creates the database's namespace (a bridge at [`DATABASE_ADDRESS`]) and `count` host
    /// namespaces, host `i` at 10.213.0.(10 + i) behind a veth pair to the bridge. Fails with
    /// the reason when namespaces cannot be made here (not root, no `ip`).
    pub fn create(count: usize) -> Result<Hosts> {
        if count > 200 {
            return Err(Error::InvalidInput("at most 200 hosts".into()));
        }
        let hosts = Hosts {
            prefix: format!("rmd{}x{:04x}", std::process::id(), fastrand::u16(..)),
            count,
        };
        // on failure, Drop deletes whatever was made
        let db = hosts.database_namespace();
        ip(&["netns", "add", &db])?;
        hosts.link(&db)?;
        Ok(hosts)
    }

    fn link(&self, db: &str) -> Result<()> {
        ip(&["-n", db, "link", "set", "lo", "up"])?;
        ip(&["-n", db, "link", "add", "br0", "type", "bridge"])?;
        let database = format!("{DATABASE_ADDRESS}/24");
        ip(&["-n", db, "addr", "add", &database, "dev", "br0"])?;
        ip(&["-n", db, "link", "set", "br0", "up"])?;
        for i in 0..self.count {
            let host = self.namespace(i);
            let peer = format!("vd{i}");
            ip(&["netns", "add", &host])?;
            ip(&["-n", &host, "link", "set", "lo", "up"])?;
            ip(&[
                "-n", &host, "link", "add", "eth0", "type", "veth", "peer", "name", &peer, "netns",
                db,
            ])?;
            ip(&["-n", db, "link", "set", &peer, "master", "br0", "up"])?;
            let address = format!("10.213.0.{}/24", 10 + i);
            ip(&["-n", &host, "addr", "add", &address, "dev", "eth0"])?;
            ip(&["-n", &host, "link", "set", "eth0", "up"])?;
        }
        Ok(())
    }

    /// The database's namespace.
    pub fn database_namespace(&self) -> String {
        format!("{}db", self.prefix)
    }

    /// Host `i`'s namespace.
    pub fn namespace(&self, i: usize) -> String {
        format!("{}h{i}", self.prefix)
    }

    /// A command that runs `program` on host `i` (`ip netns exec`).
    pub fn command(&self, i: usize, program: &std::path::Path) -> tokio::process::Command {
        let mut command = tokio::process::Command::new("ip");
        command
            .args(["netns", "exec", &self.namespace(i)])
            .arg(program);
        command
    }

    /// Cuts host `i` off the network (its link to the bridge goes down: packets are lost,
    /// connections hang as over a dead cable).
    pub fn cut(&self, i: usize) -> Result<()> {
        self.link_state(i, "down")
    }

    /// Joins host `i` to the network again.
    pub fn heal(&self, i: usize) -> Result<()> {
        self.link_state(i, "up")
    }

    fn link_state(&self, i: usize, state: &str) -> Result<()> {
        let (db, link) = (self.database_namespace(), format!("vd{i}"));
        ip(&["-n", &db, "link", "set", &link, state])
    }

    /// Restarts `cluster` inside the database's namespace, listening on
    /// [`DATABASE_ADDRESS`] as well as its socket (which the test itself keeps using: a
    /// socket is a file, reachable from any namespace). The cluster must have been started
    /// with [`Hosts::pg_hba`] among its files.
    pub async fn move_database(&self, cluster: &PrivateCluster) -> Result<()> {
        cluster
            .restart_in(&self.database_namespace(), DATABASE_ADDRESS)
            .await
    }

    /// A `pg_hba.conf` that lets the hosts in: trust from the test network and the socket.
    pub fn pg_hba() -> (String, Vec<u8>) {
        (
            "pg_hba.conf".into(),
            b"local all all trust\nhost all all 10.213.0.0/24 trust\n".to_vec(),
        )
    }

    /// A connection string to the cluster's `remuda` database over the test network.
    pub fn conninfo(&self) -> String {
        format!("host={DATABASE_ADDRESS} port=5432 user=remuda dbname=remuda sslmode=disable connect_timeout=3")
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for i in 0..self.count {
            let _ = ip(&["netns", "del", &self.namespace(i)]);
        }
        let _ = ip(&["netns", "del", &self.database_namespace()]);
    }
}
