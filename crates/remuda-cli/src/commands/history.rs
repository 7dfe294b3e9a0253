//! `remuda history on|off|check`: verification mode (see `remuda::verify`).

use crate::args::{DbArgs, HistoryCommand};
use crate::connect;
use crate::error::CliResult;
use crate::output::print_json;
use remuda::verify::{check, set_history, Finding};

/// Runs one `history` subcommand: 0, or 1 when `check` found something.
pub async fn run(db: &DbArgs, command: HistoryCommand) -> CliResult<u8> {
    let database = connect::database(db).await?;
    match command {
        HistoryCommand::On => {
            set_history(&database, true).await?;
            crate::out!(
                "verification mode on: every job's state changes are recorded in remuda.history"
            );
            Ok(0)
        }
        HistoryCommand::Off => {
            set_history(&database, false).await?;
            crate::out!("verification mode off (the history recorded so far stays)");
            Ok(0)
        }
        HistoryCommand::Check(args) => {
            let report = check(&database, args.slack).await?;
            if args.json {
                print_json(&report);
            } else {
                crate::out!(
                    "{} jobs and {} workflow runs with a recorded history",
                    report.jobs,
                    report.workflows
                );
                for (class, findings) in [
                    ("illegal transition", &report.illegal_transitions),
                    ("accepted twice", &report.accepted_twice),
                    ("lost", &report.lost),
                    ("stuck", &report.stuck),
                ] {
                    say(class, findings);
                }
                if report.is_clean() {
                    crate::out!("nothing found");
                }
            }
            Ok(if report.is_clean() { 0 } else { 1 })
        }
    }
}

fn say(class: &str, findings: &[Finding]) {
    for finding in findings {
        crate::out!("{class}: {}: {}", finding.subject(), finding.what);
    }
}
