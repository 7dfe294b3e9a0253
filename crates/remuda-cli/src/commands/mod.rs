//! One module per group of subcommands; each returns the process exit code.

mod bench;
pub use bench::limits::Limit;
pub use bench::workflows::Shape as WorkflowShape;
mod dashboard;
mod demo;
mod enqueue;
mod history;
mod inspect;
mod maintenance;
mod notifications;
mod queue;
mod schedule;
pub mod scratch;
mod send_span;
pub mod sleep;
pub mod step;
mod top;
mod verify;
mod worker;
mod workflow;

use crate::args::{Cli, Command};
use crate::connect;
use crate::error::CliResult;
use crate::output::print_json;

/// Runs the parsed command line.
pub async fn run(cli: Cli) -> CliResult<u8> {
    let db = &cli.db;
    match cli.command {
        Command::Migrate(flags) => {
            let report = remuda::migrate::run(&connect::database(db).await?).await?;
            if flags.json {
                print_json(&serde_json::json!({
                    "from": report.from, "to": report.to, "applied": report.applied,
                    "resumed": report.resumed, "functions": report.functions
                }));
            } else if report.applied.is_empty() && report.resumed.is_empty() {
                if !report.functions.is_empty() {
                    crate::out!("functions updated: {}", report.functions.join(", "));
                }
                crate::out!("schema is up to date (version {})", report.to);
            } else {
                if !report.resumed.is_empty() {
                    crate::out!(
                        "finished what an earlier run left half-done: {}",
                        report.resumed.join(", ")
                    );
                }
                if !report.applied.is_empty() {
                    crate::out!(
                        "migrated from version {} to {}: {}",
                        report.from,
                        report.to,
                        report.applied.join(", ")
                    );
                }
            }
            Ok(0)
        }
        Command::Enqueue(args) => enqueue::one(db, args).await,
        Command::EnqueueBatch(args) => enqueue::batch(db, args).await,
        Command::Worker(args) => worker::run(db, args).await,
        Command::Job(args) => inspect::job(db, args).await,
        Command::Jobs(args) => inspect::jobs(db, args).await,
        Command::Cancel(args) => inspect::cancel(db, args).await,
        Command::Delete(args) => inspect::delete(db, args).await,
        Command::Stats(args) => inspect::stats(db, args).await,
        Command::Wait(args) => enqueue::wait(db, args).await,
        Command::Retry(args) => inspect::retry(db, args).await,
        Command::Queues(flags) => inspect::queues(db, flags).await,
        Command::Workers(flags) => inspect::workers(db, flags).await,
        Command::Queue(command) => queue::run(db, command).await,
        Command::Cluster(command) => queue::cluster(db, command).await,
        Command::Schedule(command) => schedule::run(db, command).await,
        Command::Schedules(flags) => schedule::list(db, flags).await,
        Command::Workflow(command) => workflow::run(db, command).await,
        Command::Notifications(args) => notifications::run(db, args).await,
        Command::Prune(args) => maintenance::prune(db, args).await,
        Command::Maintenance(flags) => maintenance::status(db, flags).await,
        Command::History(command) => history::run(db, command).await,
        Command::Dashboard(args) => dashboard::run(db, args).await,
        Command::Top(args) => top::run(db, args).await,
        Command::Demo(args) => demo::run(db, args).await,
        Command::Bench(args) => bench::run(db, args).await,
        Command::Verify(args) => verify::run(args).await,
        Command::Step(args) => step::run(args).await,
        Command::Sleep(args) => sleep::run(args).await,
        Command::DatabaseUrl => {
            let database = connect::database(db).await?;
            crate::out!("{}", remuda::db::conninfo(database.config(), None));
            Ok(0)
        }
    }
}

/// In-process workers of `demo` and `bench` run until told to stop; one that ends before
/// has failed. Returns its error, so the command stops at once instead of waiting for jobs
/// that nobody runs.
pub(crate) async fn failed_worker(
    handles: &mut [tokio::task::JoinHandle<remuda::Result<remuda::WorkerReport>>],
) -> Option<crate::error::CliError> {
    let handle = handles.iter_mut().find(|h| h.is_finished())?;
    Some(match handle.await {
        Ok(Err(e)) => e.into(),
        Ok(Ok(_)) => {
            crate::error::CliError::Usage("a worker stopped before it was asked to".into())
        }
        Err(e) => crate::error::CliError::Usage(format!("a worker crashed: {e}")),
    })
}
