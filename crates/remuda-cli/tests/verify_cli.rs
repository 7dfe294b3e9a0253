//! `remuda verify`: this build under faults in private clusters, with a failover, judged by
//! the history checker, the workflow model and the execution log.

mod common;

use common::{code, stderr, BIN};
use std::process::Command;

fn verify(args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .arg("verify")
        .args(args)
        // never the configured database: a wrong one proves it is not used
        .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
        .output()
        .expect("run remuda verify")
}

/// The short run of the test command: every fault, a failover through the multi-host URL,
/// and a clean report with every field of the contract.
#[test]
fn a_short_run_with_a_failover_survives_every_fault_and_reports_clean() {
    let output = verify(&["--duration", "40s", "--failover", "--json"]);
    let text = String::from_utf8_lossy(&output.stdout);
    let report: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {text}\n{}", stderr(&output)));
    assert_eq!(code(&output), 0, "{report:#}\n{}", stderr(&output));
    for field in [
        "jobs",
        "workflows",
        "kills",
        "stops",
        "db_restarts",
        "failovers",
        "lost",
        "illegal_transitions",
        "accepted_twice",
        "workflow_mismatches",
        "stuck",
        "duplicate_runs",
        "duplicate_bound",
    ] {
        assert!(
            report[field].is_u64() || report[field].is_i64(),
            "{field}: {report:#}"
        );
    }
    assert!(report["jobs"].as_u64() > Some(500), "{report:#}");
    // stderr is for findings: not the pool's warnings about connections the faults cut
    assert!(
        !stderr(&output).contains("could not be recycled")
            && !stderr(&output).contains("Connection error"),
        "{}",
        stderr(&output)
    );
    assert!(report["workflows"].as_u64() > Some(10), "{report:#}");
    assert_eq!(report["failovers"], 1, "{report:#}");
    assert_eq!(report["db_restarts"], 1, "{report:#}");
    assert!(report["kills"].as_u64() >= Some(1), "{report:#}");
    for zero in [
        "lost",
        "illegal_transitions",
        "accepted_twice",
        "workflow_mismatches",
        "stuck",
    ] {
        assert_eq!(report[zero], 0, "{zero}: {report:#}");
    }
    assert!(report["duplicate_runs"].as_i64() <= report["duplicate_bound"].as_i64());
}

#[test]
fn no_workers_is_refused_with_the_flag_named() {
    let output = verify(&["--workers", "0", "--duration", "1s"]);
    assert_eq!(code(&output), 2);
    assert!(stderr(&output).contains("--workers"), "{}", stderr(&output));
}
