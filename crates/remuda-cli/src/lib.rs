//! `remuda`: the command line of the remuda task queue. Migrates the schema, enqueues jobs,
//! runs workers for tasks written in any language (commands and HTTP endpoints), inspects
//! jobs, queues and workers, and runs the demo.
//!
//! Exit codes (a contract for scripts): 0 success; 1 task error (with `--wait` and `wait`;
//! `worker --once`: a job failed); 2 bad input or usage; 3 wait timeout; 4 database
//! unreachable or schema mismatch. With `--json`, errors are printed as JSON on stderr too.

/// `println!` that ends the process quietly when stdout is closed (`remuda jobs | head -1`),
/// instead of panicking.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write_out(format_args!($($arg)*), true)
    };
}

/// `print!` with the same care for a closed stdout.
#[macro_export]
macro_rules! out_part {
    ($($arg:tt)*) => {
        $crate::output::write_out(format_args!($($arg)*), false)
    };
}

mod args;
mod commands;
pub use commands::scratch;
pub use executors::supervise;
pub mod config;
mod connect;
pub mod error;
mod executors;
mod output;
mod spec_file;
mod table;
pub mod worker_setup;

use clap::Parser;
use std::process::ExitCode;

/// The `remuda` binary: parses the command line, runs the command, and returns the exit
/// code of the contract above.
pub fn main() -> ExitCode {
    if let Some(code) = executors::supervise::run_if_asked() {
        return code;
    }
    // every subcommand that prints data has --json; its errors are JSON too
    let json = std::env::args().any(|a| a == "--json");
    let cli = match args::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    let _ = e.print();
                    ExitCode::SUCCESS
                }
                _ if json => {
                    output::print_error_json("BAD_INPUT", e.to_string().trim());
                    ExitCode::from(2)
                }
                _ => {
                    let _ = e.print();
                    ExitCode::from(2)
                }
            };
        }
    };
    let worker = matches!(cli.command, args::Command::Worker(_));
    // verify's stderr is for its findings: the pool's warnings about the connections its own
    // faults cut ("Connection could not be recycled") are not
    let quiet_pool = matches!(cli.command, args::Command::Verify(_));
    if let Err(e) = init_logging(cli.verbose, worker, quiet_pool, cli.log_format) {
        if json {
            output::print_error_json("BAD_INPUT", &e);
        } else {
            eprintln!("error: {e}");
        }
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(e) if json => {
            output::print_error_json(e.code(), &e.to_string());
            ExitCode::from(e.exit_code())
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// Logs a worker's doings to stderr as `remuda worker` does (text; `verbose` as its `-v`
/// count), for a worker run by another program (the Python package's `python -m remuda
/// worker`). A second call changes nothing.
pub fn log_worker_to_stderr(verbose: u8) -> Result<(), String> {
    init_logging(verbose, true, false, args::LogFormat::Text)
}

/// Logs go to stderr: warnings, and for a worker what it is doing (leadership, shutdown);
/// `-v` shows info lines (for a worker, one line per job start and end with its outcome and
/// duration), `-vv` debug ones. Colours only when stderr is a terminal. With `quiet_pool`,
/// the connection pool's warnings are left out unless asked for (`-v`, `RUST_LOG`).
fn init_logging(
    verbose: u8,
    worker: bool,
    quiet_pool: bool,
    format: args::LogFormat,
) -> Result<(), String> {
    use std::io::IsTerminal;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let level = match (verbose, worker) {
        (0, false) => tracing::Level::WARN,
        (0, true) | (1, _) => tracing::Level::INFO,
        _ => tracing::Level::DEBUG,
    };
    let filter = match std::env::var("RUST_LOG").ok().filter(|v| !v.trim().is_empty()) {
        Some(spec) => spec.parse::<tracing_subscriber::filter::Targets>().map_err(|e| {
            format!("RUST_LOG={spec:?} is not a log filter ({e}): write levels like warn, or remuda=debug,info")
        })?,
        // a worker says what it does at info, but each job (its lines, its spans) only with -v
        None if worker && verbose == 0 => tracing_subscriber::filter::Targets::new()
            .with_default(level)
            .with_target(remuda::worker::JOB_LOG, tracing::Level::WARN)
            .with_target(remuda::telemetry::tracing_spans::ATTEMPT, tracing::Level::WARN)
            .with_target(remuda::telemetry::tracing_spans::SEND, tracing::Level::WARN),
        None if quiet_pool && verbose == 0 => tracing_subscriber::filter::Targets::new()
            .with_default(level)
            .with_target("deadpool.postgres", tracing::Level::ERROR),
        None => tracing_subscriber::filter::Targets::new().with_default(level),
    };
    let registry = tracing_subscriber::registry().with(filter);
    let _ = match format {
        args::LogFormat::Text => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_ansi(std::io::stderr().is_terminal())
                    .with_target(false),
            )
            .try_init(),
        args::LogFormat::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_writer(std::io::stderr)
                    .with_current_span(false),
            )
            .try_init(),
    };
    Ok(())
}
