//! Command tasks: run a program per job with the job as JSON on stdin. Exit 0 is ok with
//! stdout as the result (JSON if it parses, else text); another exit code is error
//! `EXIT_<n>` with the last lines of stderr as the message; death by a signal is
//! `SIGNAL_<n>`. The program runs in its own process group, and the whole group is killed
//! when the attempt is abandoned (timeout, cancel, shutdown), so no grandchild outlives it;
//! a supervisor (`supervise.rs`) leads the group and kills it if the worker itself dies.

use super::{job_document, output_to_json};
use futures_util::future::BoxFuture;
use remuda::step::socket::StepServer;
use remuda::{DynTask, JobContext, Jsonb, TaskError};
use std::process::Stdio;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

/// Lines of stderr kept for the error message.
const STDERR_LINES: usize = 20;
/// Bytes of stderr kept (the tail).
const STDERR_BYTES: usize = 16 * 1024;
/// How long output is still read after the program exited.
const PIPE_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// A program run once per job.
pub struct CommandTask {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Extra environment.
    pub env: Vec<(String, String)>,
    /// Working directory.
    pub workdir: Option<String>,
    /// Largest stdout accepted as a result.
    pub max_output: usize,
}

/// Kills the process group unless the child was reaped (dropped with the attempt's future).
struct GroupGuard {
    pgid: Option<i32>,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

impl DynTask for CommandTask {
    fn run(
        self: Arc<Self>,
        ctx: JobContext,
        args: Jsonb,
    ) -> BoxFuture<'static, Result<Jsonb, TaskError>> {
        Box::pin(async move { self.run_once(ctx, args).await })
    }
}

impl CommandTask {
    async fn run_once(&self, ctx: JobContext, args: Jsonb) -> Result<Jsonb, TaskError> {
        let input = job_document(&ctx, &args);
        self.check_runnable()?;
        let mut command = match super::supervise::program() {
            Ok((exe, prefix)) => {
                let mut command = Command::new(exe);
                command.args(prefix);
                command.args(super::supervise::command_line(
                    std::process::id(),
                    &self.argv,
                ));
                command
            }
            Err(e) => {
                tracing::warn!("cannot find the remuda binary to supervise {:?} ({e}): running it unsupervised", self.argv[0]);
                let mut command = Command::new(&self.argv[0]);
                command.args(&self.argv[1..]);
                command
            }
        };
        command
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("REMUDA_JOB_ID", ctx.id.to_string())
            .env("REMUDA_JOB_KIND", &ctx.kind)
            .env("REMUDA_JOB_ATTEMPT", ctx.attempt.to_string())
            .env("REMUDA_WORKER_PID", std::process::id().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        // the attempt's trace context and the job's group, and never those the worker's own
        // environment holds
        command
            .env_remove("TRACEPARENT")
            .env_remove("TRACESTATE")
            .env_remove(remuda::group::ENV);
        if let Some(group) = &ctx.group {
            command.env(remuda::group::ENV, group);
        }
        if let Some(trace) = &ctx.trace {
            command.env("TRACEPARENT", &trace.traceparent);
            if let Some(state) = &trace.tracestate {
                command.env("TRACESTATE", state);
            }
        }
        if let Some(dir) = &self.workdir {
            command.current_dir(dir);
        }
        // served until the run ends, for `remuda step` inside the command
        let _steps = match StepServer::start(ctx.steps.clone()) {
            Ok(server) => {
                command.env(remuda::step::socket::ENV, server.path());
                Some(server)
            }
            Err(e) => {
                tracing::warn!(job = ctx.id, "cannot open the job's step socket ({e}): `remuda step` in it will not record its steps");
                None
            }
        };
        let mut child = command.spawn().map_err(|e| {
            TaskError::new(
                "SPAWN_FAILED",
                format!(
                    "cannot run {:?}: {e}. Check the command in the worker config",
                    self.argv[0]
                ),
            )
        })?;
        let mut guard = GroupGuard {
            pgid: child.id().and_then(|id| i32::try_from(id).ok()),
        };
        let mut stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let feed = async move {
            if let Some(stdin) = stdin.as_mut() {
                // a program that does not read its input is fine: ignore a broken pipe
                let _ = stdin.write_all(input.as_bytes()).await;
                let _ = stdin.shutdown().await;
            }
            drop(stdin);
        };
        let limit = self.max_output;
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let status = {
            let mut io = Box::pin(async {
                tokio::join!(
                    feed,
                    read_head(stdout, limit + 1, &mut out),
                    read_tail(stderr, STDERR_BYTES, &mut err)
                )
            });
            let mut exited = Box::pin(child.wait());
            // asked to stop (cancel, shutdown, fencing): SIGTERM to the group, then keep
            // waiting; the worker aborts the attempt (SIGKILL, see GroupGuard) after its grace
            let pgid = guard.pgid;
            let terminate = async {
                ctx.cancelled().await;
                if let Some(pgid) = pgid {
                    let _ = nix::sys::signal::killpg(
                        nix::unistd::Pid::from_raw(pgid),
                        nix::sys::signal::Signal::SIGTERM,
                    );
                }
                std::future::pending::<()>().await
            };
            tokio::pin!(terminate);
            tokio::select! {
                _ = &mut terminate => unreachable!("pending never resolves"),
                _ = &mut io => tokio::select! {
                    _ = &mut terminate => unreachable!("pending never resolves"),
                    status = &mut exited => status,
                },
                status = &mut exited => {
                    // a grandchild left running (`daemon &`) may hold the pipes open: take
                    // what is there and stop reading soon after the program itself exited
                    let _ = tokio::time::timeout(PIPE_GRACE, &mut io).await;
                    status
                }
            }
        };
        let status = status.map_err(|e| {
            TaskError::new(
                "WAIT_FAILED",
                format!("waiting for the command failed: {e}"),
            )
        })?;
        guard.pgid = None; // reaped: nothing left to kill by that id
        drop(guard);
        if status.success() {
            if out.len() > limit {
                return Err(TaskError::permanent(
                    "RESULT_TOO_LARGE",
                    format!("the command wrote more than {limit} bytes to stdout, over the result limit"),
                ));
            }
            let text = std::str::from_utf8(&out).map_err(|e| {
                TaskError::permanent(
                    "RESULT_NOT_UTF8",
                    format!(
                        "the command wrote bytes that are not UTF-8 to stdout ({e}); a result must be JSON or UTF-8 text"
                    ),
                )
            })?;
            return Ok(output_to_json(text));
        }
        // a command that stopped to sleep (`remuda sleep` told it to): the job waits for
        // what is left of the sleep, without spending an attempt
        if status.code() == Some(i32::from(crate::commands::sleep::SLEEPING)) {
            if let Some(left) = ctx.steps.sleeping() {
                return Err(TaskError::snooze(left));
            }
        }
        let stderr_text = String::from_utf8_lossy(&err);
        let lines: Vec<&str> = stderr_text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect();
        let tail = lines[lines.len().saturating_sub(STDERR_LINES)..].join("\n");
        use std::os::unix::process::ExitStatusExt;
        let (code, what) = match (status.code(), status.signal()) {
            (Some(n), _) => (format!("EXIT_{n}"), format!("exited with code {n}")),
            (None, Some(sig)) => (
                format!("SIGNAL_{sig}"),
                format!("was killed by signal {sig}"),
            ),
            _ => ("EXIT_UNKNOWN".to_string(), "ended abnormally".to_string()),
        };
        let message = if tail.is_empty() {
            format!("the command {what} and wrote nothing to stderr")
        } else {
            tail
        };
        Err(TaskError::new(code, message))
    }
}

impl CommandTask {
    /// Fails the attempt with `SPAWN_FAILED` when the working directory or the program is not
    /// there (the supervisor would only see its own failure to start it).
    fn check_runnable(&self) -> Result<(), TaskError> {
        let failed = |message: String| Err(TaskError::new("SPAWN_FAILED", message));
        if let Some(dir) = &self.workdir {
            if !std::path::Path::new(dir).is_dir() {
                return failed(format!(
                    "the working directory {dir:?} of the command does not exist (or is not a directory): check workdir in the worker config"
                ));
            }
        }
        // the PATH the command will have: its own env's, else the worker's
        let path = self
            .env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| std::ffi::OsString::from(v))
            .or_else(|| std::env::var_os("PATH"));
        if find_program(&self.argv[0], self.workdir.as_deref(), path).is_none() {
            return failed(format!(
                "cannot run {:?}: no such program{}. Check the command in the worker config",
                self.argv[0],
                if self.argv[0].contains('/') {
                    ""
                } else {
                    " on PATH"
                }
            ));
        }
        Ok(())
    }
}

/// Where `program` is: itself (against `workdir` when relative) if it names a path, else the
/// first match on `path` (the command's `PATH`).
fn find_program(
    program: &str,
    workdir: Option<&str>,
    path: Option<std::ffi::OsString>,
) -> Option<std::path::PathBuf> {
    if program.contains('/') {
        let path = match workdir {
            Some(dir) if !program.starts_with('/') => std::path::Path::new(dir).join(program),
            _ => std::path::PathBuf::from(program),
        };
        return path.is_file().then_some(path);
    }
    std::env::split_paths(&path?)
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
}

async fn read_head<R: AsyncRead + Unpin>(pipe: Option<R>, limit: usize, out: &mut Vec<u8>) {
    if let Some(pipe) = pipe {
        let mut limited = pipe.take(limit as u64);
        let _ = limited.read_to_end(out).await;
        // drain the rest so the program is not blocked on a full pipe
        let mut rest = limited.into_inner();
        let _ = tokio::io::copy(&mut rest, &mut tokio::io::sink()).await;
    }
}

async fn read_tail<R: AsyncRead + Unpin>(pipe: Option<R>, keep: usize, kept: &mut Vec<u8>) {
    if let Some(mut pipe) = pipe {
        let mut buf = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut buf).await {
            if n == 0 {
                break;
            }
            kept.extend_from_slice(&buf[..n]);
            if kept.len() > keep * 2 {
                kept.drain(..kept.len() - keep);
            }
        }
    }
    if kept.len() > keep {
        kept.drain(..kept.len() - keep);
    }
}
