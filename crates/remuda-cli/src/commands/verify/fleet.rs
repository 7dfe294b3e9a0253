//! The worker processes of a verification run: `remuda worker` of this very binary, each
//! with the run's config and multi-host URL, their stderr appended to one log. Faults act on
//! them by pid: SIGKILL (then a replacement starts), SIGSTOP past `rescue_after` and SIGCONT
//! (a frozen worker that wakes up and tries to finish).

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// The running workers, and the one frozen now (with when it wakes).
pub struct Fleet {
    exe: PathBuf,
    url: String,
    config: PathBuf,
    log: PathBuf,
    workers: Vec<Child>,
    frozen: Option<(u32, Instant)>,
}

impl Fleet {
    /// Starts `count` workers.
    pub fn start(url: &str, config: &Path, log: &Path, count: usize) -> remuda::Result<Fleet> {
        let exe = std::env::current_exe()
            .map_err(|e| remuda::Error::Setup(format!("cannot find this program: {e}")))?;
        let mut fleet = Fleet {
            exe,
            url: url.into(),
            config: config.into(),
            log: log.into(),
            workers: Vec::new(),
            frozen: None,
        };
        for _ in 0..count {
            fleet.spawn()?;
        }
        Ok(fleet)
    }

    fn spawn(&mut self) -> remuda::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| {
                remuda::Error::Setup(format!("cannot open {}: {e}", self.log.display()))
            })?;
        let child = Command::new(&self.exe)
            .arg("--database-url")
            .arg(&self.url)
            .arg("worker")
            .arg("--config")
            .arg(&self.config)
            .env_remove("DATABASE_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| remuda::Error::Setup(format!("cannot start a worker: {e}")))?;
        self.workers.push(child);
        Ok(())
    }

    /// The pids of the workers, the frozen one included.
    pub fn pids(&self) -> Vec<u32> {
        self.workers.iter().filter_map(Child::id).collect()
    }

    /// A worker that is not frozen, at random.
    pub fn pick(&self) -> Option<u32> {
        let awake: Vec<u32> = self
            .pids()
            .into_iter()
            .filter(|pid| self.frozen.map(|(f, _)| f) != Some(*pid))
            .collect();
        (!awake.is_empty()).then(|| awake[fastrand::usize(..awake.len())])
    }

    /// SIGKILLs worker `pid` and starts a replacement.
    pub async fn kill(&mut self, pid: u32) -> remuda::Result<()> {
        if let Some(i) = self.workers.iter().position(|c| c.id() == Some(pid)) {
            let mut child = self.workers.remove(i);
            let _ = child.kill().await;
        }
        self.spawn()
    }

    /// SIGSTOPs worker `pid` until `wake` ([`Fleet::thaw_due`] sends the SIGCONT).
    pub fn freeze(&mut self, pid: u32, wake: Instant) -> bool {
        if self.frozen.is_some() {
            return false;
        }
        let frozen = kill(Pid::from_raw(pid as i32), Signal::SIGSTOP).is_ok();
        if frozen {
            self.frozen = Some((pid, wake));
        }
        frozen
    }

    /// Wakes the frozen worker when its time has come (or `now` when `all`).
    pub fn thaw_due(&mut self, all: bool) {
        if let Some((pid, wake)) = self.frozen {
            if all || Instant::now() >= wake {
                let _ = kill(Pid::from_raw(pid as i32), Signal::SIGCONT);
                self.frozen = None;
            }
        }
    }

    /// Replaces workers that exited by themselves (a worker exits when it cannot go on, for
    /// example after its database was gone too long); returns how many exited.
    pub fn replace_exited(&mut self) -> remuda::Result<usize> {
        let before = self.workers.len();
        self.workers
            .retain_mut(|child| matches!(child.try_wait(), Ok(None)));
        let exited = before - self.workers.len();
        for _ in 0..exited {
            self.spawn()?;
        }
        Ok(exited)
    }

    /// Stops every worker with SIGTERM (a graceful shutdown) and waits for each; the exit
    /// statuses that were not success, with the worker's pid.
    pub async fn stop(mut self) -> Vec<(u32, ExitStatus)> {
        self.thaw_due(true);
        for child in &self.workers {
            if let Some(pid) = child.id() {
                let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
            }
        }
        let mut failed = Vec::new();
        for mut child in self.workers.drain(..) {
            let pid = child.id().unwrap_or(0);
            match tokio::time::timeout(Duration::from_secs(30), child.wait()).await {
                Ok(Ok(status)) if status.success() => {}
                Ok(Ok(status)) => failed.push((pid, status)),
                _ => {
                    let _ = child.kill().await;
                    if let Ok(status) = child.wait().await {
                        failed.push((pid, status));
                    }
                }
            }
        }
        failed
    }
}
