//! Steps for tasks that run in another process (a command task, a Python process pool): the
//! worker serves the run's [`Steps`] on a Unix socket of its own, in a directory only its
//! user can enter, named to the process in `REMUDA_STEP_SOCKET`. The process asks for a
//! recorded step and records one through it, so the worker's fencing token and database
//! credentials never leave the worker. One JSON object a line each way:
//!
//! ```text
//! {"op":"get","name":"charge"}                     → {"output":"<JSON text>"} or {"output":null}
//! {"op":"record","name":"charge","output":"<JSON>"} → {"output":"<JSON text now recorded>"}
//! {"op":"sleep","until":"2026-12-07T18:00:00Z"}     → {"output":"<ms left>"} or {"output":null}
//! any                                                → {"error":{"code":"FENCED","message":"…"}}
//! ```
//!
//! A sleep is the attempt's next durable sleep ([`Steps::sleep_until`]): the process stops
//! while time is left, and the worker snoozes the job for it ([`Steps::sleeping`]).

use super::Steps;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

/// The environment variable that names a run's step socket to its process.
pub const ENV: &str = "REMUDA_STEP_SOCKET";

#[derive(Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
enum Request {
    Get {
        name: String,
    },
    Record {
        name: String,
        output: String,
    },
    Sleep {
        until: chrono::DateTime<chrono::Utc>,
    },
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Response {
    Output(Option<String>),
    Error { code: String, message: String },
}

/// A run's step socket, served while it lives; dropping it stops serving and removes it.
pub struct StepServer {
    dir: PathBuf,
    path: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl StepServer {
    /// Serves `steps` on a new socket in a private directory under the temporary directory.
    pub fn start(steps: Steps) -> std::io::Result<StepServer> {
        use std::os::unix::fs::DirBuilderExt;
        let mut base = std::env::temp_dir();
        // a socket's path is limited to about 100 bytes
        if base.as_os_str().len() > 60 {
            base = PathBuf::from("/tmp");
        }
        // (once per process: the directories of workers killed before they could remove theirs)
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| sweep_abandoned(&base));
        let dir = base.join(format!(
            "{DIR_PREFIX}{}-{:016x}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        let path = dir.join("s");
        let listener = match UnixListener::bind(&path) {
            Ok(listener) => listener,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, steps.clone()));
            }
        });
        Ok(StepServer { dir, path, task })
    }

    /// The socket's path, for [`ENV`].
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// How a step socket's directory is named: the prefix, the worker's process id, a random part.
const DIR_PREFIX: &str = "remuda-steps-";

/// Removes the step-socket directories under `base` whose worker process is gone (killed, so
/// it never removed them). Where no `/proc` tells which processes live, it removes nothing; a
/// directory whose process id was taken by another process since is left for later.
fn sweep_abandoned(base: &Path) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(DIR_PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

impl Drop for StepServer {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn serve(stream: UnixStream, steps: Steps) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let answer = match serde_json::from_str::<Request>(&line) {
            Err(e) => Err(crate::TaskError::permanent(
                "BAD_REQUEST",
                format!("not a step request: {e}"),
            )),
            Ok(Request::Get { name }) => steps.recorded(&name).await,
            Ok(Request::Record { name, output }) => steps.record(&name, output).await.map(Some),
            Ok(Request::Sleep { until }) => steps
                .sleep_until(until)
                .await
                .map(|left| left.map(|d| d.as_millis().to_string())),
        };
        let response = match answer {
            Ok(output) => Response::Output(output),
            Err(e) => Response::Error {
                code: e.code,
                message: e.message,
            },
        };
        let mut text = serde_json::to_string(&response).unwrap_or_default();
        text.push('\n');
        if write.write_all(text.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// Why a step could not be read or recorded through the socket.
#[derive(Debug, thiserror::Error)]
pub enum StepClientError {
    /// No worker answers at the path.
    #[error("cannot reach the worker's step socket {path}: {source} (steps are recorded by a job's own process, while the job runs)")]
    Connect {
        /// The socket's path.
        path: String,
        /// What connecting said.
        source: std::io::Error,
    },
    /// The worker refused (the run no longer holds its job, a bad name, the database).
    #[error("{code}: {message}")]
    Refused {
        /// The error's code ([`super::FENCED`], [`super::STEP_STORE`], …).
        code: String,
        /// What happened.
        message: String,
    },
    /// The connection broke or the answer was not one.
    #[error("the worker's step socket broke off: {0}")]
    Broken(String),
}

/// A connection to a run's step socket.
pub struct StepClient {
    lines: tokio::io::Lines<BufReader<tokio::net::unix::OwnedReadHalf>>,
    write: tokio::net::unix::OwnedWriteHalf,
}

impl StepClient {
    /// Connects to the socket at `path`.
    pub async fn connect(path: &Path) -> Result<StepClient, StepClientError> {
        let stream =
            UnixStream::connect(path)
                .await
                .map_err(|source| StepClientError::Connect {
                    path: path.display().to_string(),
                    source,
                })?;
        let (read, write) = stream.into_split();
        Ok(StepClient {
            lines: BufReader::new(read).lines(),
            write,
        })
    }

    /// The output recorded under `name` (JSON text), if any.
    pub async fn recorded(&mut self, name: &str) -> Result<Option<String>, StepClientError> {
        self.ask(&Request::Get { name: name.into() }).await
    }

    /// Records `output` (JSON text) under `name`; returns what is recorded under it now.
    pub async fn record(&mut self, name: &str, output: String) -> Result<String, StepClientError> {
        let request = Request::Record {
            name: name.into(),
            output,
        };
        self.ask(&request)
            .await?
            .ok_or_else(|| StepClientError::Broken("the record was answered with nothing".into()))
    }

    /// Takes the attempt's next durable sleep, until `until` if this is its first call: what
    /// is left of it, `None` once it has passed.
    pub async fn sleep(
        &mut self,
        until: chrono::DateTime<chrono::Utc>,
    ) -> Result<Option<std::time::Duration>, StepClientError> {
        let left = self.ask(&Request::Sleep { until }).await?;
        left.map(|ms| {
            ms.parse::<u64>()
                .map(std::time::Duration::from_millis)
                .map_err(|e| StepClientError::Broken(format!("a sleep answered {ms:?}: {e}")))
        })
        .transpose()
    }

    async fn ask(&mut self, request: &Request) -> Result<Option<String>, StepClientError> {
        let broken = |e: &dyn std::fmt::Display| StepClientError::Broken(e.to_string());
        let mut text = serde_json::to_string(request).map_err(|e| broken(&e))?;
        text.push('\n');
        self.write
            .write_all(text.as_bytes())
            .await
            .map_err(|e| broken(&e))?;
        let line = self
            .lines
            .next_line()
            .await
            .map_err(|e| broken(&e))?
            .ok_or_else(|| broken(&"the worker closed the socket"))?;
        match serde_json::from_str(&line).map_err(|e| broken(&e))? {
            Response::Output(output) => Ok(output),
            Response::Error { code, message } => Err(StepClientError::Refused { code, message }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{sweep_abandoned, DIR_PREFIX};

    #[test]
    fn a_killed_workers_socket_directory_is_swept_and_a_living_ones_kept() {
        let base = std::env::temp_dir().join(format!("remuda-sweep-test-{}", fastrand::u64(..)));
        std::fs::create_dir(&base).expect("base");
        // a process that has ended: its id names no process now
        let mut ended = std::process::Command::new("true").spawn().expect("spawn");
        let gone = ended.id();
        ended.wait().expect("ended");
        let abandoned = base.join(format!("{DIR_PREFIX}{gone}-00000000000000ab"));
        let living = base.join(format!(
            "{DIR_PREFIX}{}-00000000000000cd",
            std::process::id()
        ));
        let other = base.join("something-else");
        for dir in [&abandoned, &living, &other] {
            std::fs::create_dir(dir).expect("dir");
            std::fs::write(dir.join("s"), b"").expect("file");
        }
        sweep_abandoned(&base);
        assert!(
            !abandoned.exists(),
            "the ended process's directory is swept"
        );
        assert!(living.exists(), "a living worker's directory is kept");
        assert!(other.exists(), "what is not a step directory is left alone");
        std::fs::remove_dir_all(&base).expect("clean up");
    }
}
