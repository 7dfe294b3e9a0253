//! `remuda step NAME -- CMD ARGS…`: a durable step of a command task's job. The worker
//! serves the job's steps on the socket named in `REMUDA_STEP_SOCKET` (see
//! `remuda::step::socket`); this asks it whether the step was recorded by an earlier attempt
//! and prints the recorded stdout if so, else runs the command and records its stdout.

use crate::args::StepArgs;
use crate::error::{CliError, CliResult};
use base64::Engine as _;
use remuda::step::socket::{StepClient, StepClientError, ENV};
use std::io::Write;
use std::process::Stdio;
use tokio::io::AsyncReadExt;

/// Exit code when the command ran but its step could not be recorded (EX_TEMPFAIL): the
/// job's attempt is no longer this run's, or the database is away. Its side effect happened.
const NOT_RECORDED: u8 = 75;
/// Exit code when the command did not run because the step could not be looked up
/// (EX_UNAVAILABLE): the worker's step socket is gone (the job ended, the worker stopped) or
/// it could not read the job's steps. Nothing happened: running the step again is safe.
const DID_NOT_RUN: u8 = 69;
/// Exit code when the step can never be recorded (EX_DATAERR): the command ran and its output
/// is over a step's limit, or the job has its most steps (the command did not run). Running
/// the job again comes to the same end.
pub const NEVER_RECORDED: u8 = 65;

pub async fn run(args: StepArgs) -> CliResult<u8> {
    let path = std::env::var_os(ENV).ok_or_else(|| {
        CliError::Usage(format!(
            "remuda step runs inside a job of a command task: {ENV} is not set (the worker sets it for each job it runs)"
        ))
    })?;
    let mut client = match StepClient::connect(std::path::Path::new(&path)).await {
        Ok(client) => client,
        Err(e) => return Ok(refused(&args.name, &e, DID_NOT_RUN)),
    };
    match client.recorded(&args.name).await {
        Ok(Some(stored)) => return print(&stored).map(|_| 0),
        Ok(None) => {}
        Err(e) => return Ok(refused(&args.name, &e, DID_NOT_RUN)),
    }
    // the step's idempotency key, for a command that calls what can deduplicate by it
    let key = std::env::var("REMUDA_JOB_ID")
        .ok()
        .and_then(|id| id.parse::<i64>().ok())
        .map(|id| remuda::step::key(id, &args.name));
    let (status, stdout) = match execute(&args.command, key.as_deref()).await {
        Ok(ran) => ran,
        Err((code, message)) => {
            eprintln!("remuda step {}: {message}", args.name);
            return Ok(code);
        }
    };
    if status != 0 {
        // a failed step is not recorded: its output passes through, its code is ours
        write_stdout(&stdout)?;
        return Ok(status);
    }
    match client.record(&args.name, encode(stdout.clone())).await {
        Ok(stored) => print(&stored).map(|_| 0),
        Err(e) => {
            write_stdout(&stdout)?;
            Ok(refused(&args.name, &e, NOT_RECORDED))
        }
    }
}

/// Runs the command with this process's stdin and stderr; returns its exit code (128 + the
/// signal's number when a signal ended it) and its whole stdout, or the code to exit with and
/// why: 127 when the program is not found, 126 when it cannot be run (as a shell says), 75
/// when it ran but its output or end could not be read.
async fn execute(argv: &[String], key: Option<&str>) -> Result<(u8, Vec<u8>), (u8, String)> {
    let (program, rest) = argv
        .split_first()
        .ok_or_else(|| (2, "give the step's command after `--`".to_string()))?;
    let mut command = tokio::process::Command::new(program);
    if let Some(key) = key {
        command.env(remuda::step::KEY_ENV, key);
    }
    let mut child = command
        .args(rest)
        .stdin(Stdio::inherit())
        .stderr(Stdio::inherit())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| {
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            (
                code,
                format!("cannot run the step's command {program:?}: {e}"),
            )
        })?;
    let mut stdout = Vec::new();
    if let Some(mut pipe) = child.stdout.take() {
        pipe.read_to_end(&mut stdout)
            .await
            .map_err(|e| (NOT_RECORDED, format!("cannot read the step's output: {e}")))?;
    }
    let status = child.wait().await.map_err(|e| {
        (
            NOT_RECORDED,
            format!("cannot wait for the step's command: {e}"),
        )
    })?;
    let code = match status.code() {
        Some(code) => u8::try_from(code).unwrap_or(1),
        None => {
            use std::os::unix::process::ExitStatusExt;
            128u8.saturating_add(u8::try_from(status.signal().unwrap_or(0)).unwrap_or(0))
        }
    };
    Ok((code, stdout))
}

/// A step's stdout as recorded: a JSON string when it is UTF-8, else `{"base64": …}`.
fn encode(stdout: Vec<u8>) -> String {
    match String::from_utf8(stdout) {
        Ok(text) => serde_json::Value::String(text).to_string(),
        Err(e) => serde_json::json!({
            "base64": base64::engine::general_purpose::STANDARD.encode(e.as_bytes())
        })
        .to_string(),
    }
}

/// Prints a recorded step's stdout as it was.
fn print(stored: &str) -> CliResult<()> {
    let value: serde_json::Value = serde_json::from_str(stored)
        .map_err(|e| CliError::Usage(format!("the recorded step is not JSON: {e}")))?;
    let bytes = match &value {
        serde_json::Value::String(text) => text.clone().into_bytes(),
        serde_json::Value::Object(o) if o.len() == 1 && o.contains_key("base64") => {
            let text = o.get("base64").and_then(|v| v.as_str()).unwrap_or_default();
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(|e| CliError::Usage(format!("the recorded step's bytes: {e}")))?
        }
        // recorded by a task of another language: its JSON as it was given
        _ => format!("{stored}\n").into_bytes(),
    };
    write_stdout(&bytes)
}

fn write_stdout(bytes: &[u8]) -> CliResult<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|_| out.flush())
        .map_err(|e| CliError::Usage(format!("cannot write the step's output: {e}")))
}

/// Says why the step was not recorded (or read) and gives the exit code for it: 2 for a
/// name no step may take, else `otherwise` (whether the command ran says which).
fn refused(name: &str, e: &StepClientError, otherwise: u8) -> u8 {
    eprintln!("remuda step {name}: {e}");
    match e {
        StepClientError::Refused { code, .. } if code == remuda::step::INVALID_STEP => 2,
        StepClientError::Refused { code, .. }
            if code == remuda::step::STEP_TOO_LARGE || code == remuda::step::STEP_LIMIT =>
        {
            NEVER_RECORDED
        }
        _ => otherwise,
    }
}
