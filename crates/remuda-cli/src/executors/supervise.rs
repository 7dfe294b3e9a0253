//! The supervisor between a worker and each command it runs, so that a command never
//! outlives its worker. A worker that is SIGKILLed cannot stop its children, and a child left
//! running is re-parented and goes on: the rescued copy of its job would then run beside it.
//!
//! So the worker does not start the command itself: it starts its own binary as
//! `remuda __remuda-supervise <worker pid> -- <command…>`, the leader of the job's process
//! group, and the supervisor starts the command in that group. The supervisor asks the kernel
//! for a signal when its parent dies (`PR_SET_PDEATHSIG`), and on that signal kills the whole
//! group: the command and everything it started. Otherwise it is invisible:
//! - stdin, stdout and stderr, the environment and the working directory pass through;
//! - it survives the SIGTERM the worker sends to the group on cancel or shutdown (the command
//!   gets it and decides), and dies with the group's SIGKILL;
//! - it ends as the command ended: the same exit code, or killed by the same signal (it
//!   replaces itself with `sh -c 'kill -N $$'`, whose signal dispositions are the defaults, so
//!   it dies of the signal the command died of, SIGTERM and SIGPIPE included).

use nix::sys::signal::{killpg, Signal};
use nix::unistd::{getpgrp, getppid, Pid};
use std::process::ExitCode;

/// First argument of a supervisor process.
pub const SUPERVISE: &str = "__remuda-supervise";
/// Exit code when the supervisor itself cannot start the command.
const CANNOT_START: u8 = 127;

/// The program that supervises, with the arguments before [`SUPERVISE`]: by default this
/// very binary; a process embedding the worker (the Python package) names its own.
static PROGRAM: std::sync::OnceLock<(std::path::PathBuf, Vec<String>)> = std::sync::OnceLock::new();

/// Sets the supervisor program of this process (`python3 -m remuda`): it must call
/// [`supervise`] when its first argument is [`SUPERVISE`]. The first setting wins.
pub fn set_program(program: std::path::PathBuf, prefix: Vec<String>) {
    let _ = PROGRAM.set((program, prefix));
}

/// The supervisor program and its leading arguments.
pub fn program() -> std::io::Result<(std::path::PathBuf, Vec<String>)> {
    match PROGRAM.get() {
        Some(set) => Ok(set.clone()),
        None => Ok((std::env::current_exe()?, Vec::new())),
    }
}

/// The arguments that run `argv` under a supervisor (for the worker with pid `worker`).
pub fn command_line(worker: u32, argv: &[String]) -> Vec<String> {
    let mut line = vec![SUPERVISE.to_string(), worker.to_string(), "--".to_string()];
    line.extend(argv.iter().cloned());
    line
}

/// Runs the supervisor when this process was started as one;
/// `None` for every other invocation of the binary.
pub fn run_if_asked() -> Option<ExitCode> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some(SUPERVISE) => Some(ExitCode::from(supervise(&args[2..]))),
        _ => None,
    }
}

/// The supervisor: `args` are what follows [`SUPERVISE`] (`WORKER_PID -- PROGRAM [ARGS…]`);
/// the exit code to end with (a command killed by a signal ends the supervisor by the same
/// signal instead).
pub fn supervise(args: &[String]) -> u8 {
    let (Some(worker), Some(argv)) = (
        args.first().and_then(|p| p.parse::<i32>().ok()),
        args.iter()
            .position(|a| a == "--")
            .map(|i| &args[i + 1..])
            .filter(|argv| !argv.is_empty()),
    ) else {
        eprintln!("{SUPERVISE}: usage: {SUPERVISE} WORKER_PID -- PROGRAM [ARGS…]");
        return CANNOT_START;
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("{SUPERVISE}: cannot start: {e}");
            return CANNOT_START;
        }
    };
    runtime.block_on(run(worker, argv))
}

async fn run(worker: i32, argv: &[String]) -> u8 {
    use tokio::signal::unix::{signal, SignalKind};
    // handlers first: the parent-death signal must never meet the default action (death
    // without killing the group), and SIGTERM is the command's to answer, not ours
    let (Ok(mut orphaned), Ok(mut term)) = (
        signal(SignalKind::user_defined2()),
        signal(SignalKind::terminate()),
    ) else {
        eprintln!("{SUPERVISE}: cannot install signal handlers");
        return CANNOT_START;
    };
    if let Err(e) = nix::sys::prctl::set_pdeathsig(Signal::SIGUSR2) {
        eprintln!("{SUPERVISE}: cannot ask for the parent-death signal: {e}");
        return CANNOT_START;
    }
    // the worker may have died before the request above: then no signal will ever come
    if getppid() != Pid::from_raw(worker) {
        kill_group();
    }
    let mut child = match tokio::process::Command::new(&argv[0])
        .args(&argv[1..])
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            eprintln!("cannot run {:?}: {e}", argv[0]);
            return CANNOT_START;
        }
    };
    loop {
        tokio::select! {
            status = child.wait() => return end_like(status),
            _ = orphaned.recv() => kill_group(),
            _ = term.recv() => {} // the command got it too (it was sent to the group)
        }
    }
}

/// Kills the whole process group, this supervisor included.
fn kill_group() -> ! {
    let _ = killpg(getpgrp(), Signal::SIGKILL);
    std::process::exit(i32::from(CANNOT_START));
}

/// Ends this process as the command ended: by its signal, or with its exit code (returned).
fn end_like(status: std::io::Result<std::process::ExitStatus>) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    let status = match status {
        Ok(status) => status,
        Err(e) => {
            eprintln!("{SUPERVISE}: waiting for the command failed: {e}");
            return CANNOT_START;
        }
    };
    if let Some(code) = status.code() {
        return u8::try_from(code).unwrap_or(CANNOT_START);
    }
    let signal = status.signal().unwrap_or(Signal::SIGKILL as i32);
    // our own handlers would catch the signal, and Rust ignores SIGPIPE: a shell started by
    // std's exec (which restores SIGPIPE's default) has neither, and keeps our pid
    use std::os::unix::process::CommandExt;
    let error = std::process::Command::new("/bin/sh")
        .args(["-c", "kill -$0 $$", &signal.to_string()])
        .exec();
    eprintln!("{SUPERVISE}: cannot end as the command did (signal {signal}): {error}");
    128u8.wrapping_add(signal.clamp(0, 127) as u8)
}
