//! `remuda prune` and `remuda maintenance`.

use crate::args::{DbArgs, JsonFlag, PruneArgs};
use crate::connect;
use crate::error::CliResult;
use crate::output::print_json;
use remuda::maintenance::Retention;

pub async fn prune(db: &DbArgs, args: PruneArgs) -> CliResult<u8> {
    let defaults = Retention::default();
    let retention = Retention {
        completed: args.completed.unwrap_or(defaults.completed),
        failed: args.failed.unwrap_or(defaults.failed),
        cancelled: args.cancelled.unwrap_or(defaults.cancelled),
        expired: args.expired.unwrap_or(defaults.expired),
        ..defaults
    };
    let client = connect::client(db).await?;
    let pruned = client.prune(&retention, args.dry_run).await?;
    if args.json {
        print_json(&serde_json::json!({"deleted": pruned, "dry_run": args.dry_run}));
    } else {
        crate::out!(
            "{} {} jobs: {} completed, {} failed, {} cancelled, {} expired; {} workflow runs; {} notifications; {} activity minutes; {} audit entries; {} set-aside failures",
            if args.dry_run {
                "would delete"
            } else {
                "deleted"
            },
            pruned.total(),
            pruned.completed,
            pruned.failed,
            pruned.cancelled,
            pruned.expired,
            pruned.workflows,
            pruned.notifications,
            pruned.activity,
            pruned.audit,
            pruned.failures
        );
    }
    Ok(0)
}

pub async fn status(db: &DbArgs, flags: JsonFlag) -> CliResult<u8> {
    let client = connect::client(db).await?;
    let status = client.maintenance_status().await?;
    if flags.json {
        print_json(&status);
        return Ok(0);
    }
    match &status.leader {
        Some(l) => crate::out!(
            "leader        {} since {} (term {}{})",
            l.worker,
            l.since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            l.term,
            if l.current {
                ""
            } else {
                ", lease expired: none leads now"
            }
        ),
        None => crate::out!("leader        none yet: no worker with maintenance has run"),
    }
    for d in &status.duties {
        crate::out!(
            "{:<13} {} ({:.1} ms): {}{}",
            d.duty,
            d.started_at
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            d.duration_ms,
            if d.ok { "" } else { "FAILED: " },
            d.result
        );
    }
    Ok(0)
}
