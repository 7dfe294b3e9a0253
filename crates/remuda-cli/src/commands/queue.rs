//! `remuda queue pause|resume|set|show|group|groups` and `remuda cluster set|show`.

use crate::args::{ClusterCommand, DbArgs, QueueCommand};
use crate::connect;
use crate::error::CliResult;
use crate::output::print_json;
use remuda::{QueueChange, QueueSettings};

pub async fn run(db: &DbArgs, command: QueueCommand) -> CliResult<u8> {
    let client = connect::client(db).await?;
    let name = match &command {
        QueueCommand::Pause(q) | QueueCommand::Resume(q) | QueueCommand::Show(q) => &q.queue,
        QueueCommand::Set(args) => &args.queue,
        QueueCommand::Group(args) => &args.queue,
        QueueCommand::Groups(q) => &q.queue,
    };
    remuda::client::check_name("queue", name)?;
    let known = client.queue_stats().await?.iter().any(|s| &s.queue == name);
    if !known {
        let what = match &command {
            QueueCommand::Show(_) | QueueCommand::Groups(_) => "showing the defaults",
            _ => "its settings are created now (a queue exists as soon as a job or a setting names it)",
        };
        eprintln!("note: queue {name:?} has no jobs and no settings: {what}");
    }
    let (settings, json) = match command {
        QueueCommand::Pause(q) => (client.pause_queue(&q.queue).await?, q.json),
        QueueCommand::Resume(q) => (client.resume_queue(&q.queue).await?, q.json),
        QueueCommand::Set(args) => {
            let change = QueueChange {
                paused: None,
                max_running: args.max_running.map(|l| l.0),
                key_limit: args.key_limit.map(|l| l.0),
                rate: args.rate.map(|r| r.0),
                rate_per: args.rate_per,
                rate_burst: args.rate_burst,
                max_depth: args.max_depth.map(|l| l.0),
                fairness: args.fairness,
                retain_completed: args.retain_completed.map(|r| r.0),
                retain_failed: args.retain_failed.map(|r| r.0),
                retain_cancelled: args.retain_cancelled.map(|r| r.0),
                retain_expired: args.retain_expired.map(|r| r.0),
            };
            if change == QueueChange::default() {
                return Err(crate::error::CliError::Usage(
                    "nothing to set: give --max-running, --key-limit, --rate, --max-depth, --fairness or --retain-completed (--retain-failed, --retain-cancelled, --retain-expired)".into(),
                ));
            }
            (client.change_queue(&args.queue, &change).await?, args.json)
        }
        QueueCommand::Show(q) => (client.queue(&q.queue).await?, q.json),
        QueueCommand::Group(args) => return group(&client, args).await,
        QueueCommand::Groups(q) => {
            let groups = client.queue_groups(&q.queue).await?;
            if client.queue(&q.queue).await?.fairness == remuda::Fairness::None {
                eprintln!(
                    "note: fair share is off on queue {:?}: its jobs start in priority order and the fair shares below are not applied (remuda queue set {} --fairness group)",
                    q.queue, q.queue
                );
            }
            print_groups(&groups, q.json, false);
            return Ok(0);
        }
    };
    let counts = client
        .queue_stats()
        .await?
        .into_iter()
        .find(|s| s.queue == settings.name);
    if json {
        let mut value = serde_json::to_value(&settings).unwrap_or_default();
        if let Some(map) = value.as_object_mut() {
            let jobs: serde_json::Map<String, serde_json::Value> = remuda::JobState::ALL
                .iter()
                .map(|s| {
                    let n = counts.as_ref().map_or(0, |c| c.count(*s));
                    (s.as_str().to_string(), n.into())
                })
                .collect();
            map.insert("jobs".into(), jobs.into());
        }
        print_json(&value);
    } else {
        print_settings(&settings);
        if let Some(c) = counts {
            let parts: Vec<String> = remuda::JobState::ALL
                .iter()
                .map(|s| format!("{} {}", c.count(*s), s))
                .collect();
            crate::out!("jobs          {}", parts.join(", "));
        }
    }
    Ok(0)
}

fn print_settings(s: &QueueSettings) {
    let limit = |l: Option<i32>| l.map_or_else(|| "none".to_string(), |n| n.to_string());
    crate::out!("queue         {}", s.name);
    crate::out!("paused        {}", s.paused);
    crate::out!("max_running   {}", limit(s.max_running));
    crate::out!("key_limit     {}", limit(s.key_limit));
    crate::out!(
        "rate          {}",
        s.rate.map_or_else(
            || "none".to_string(),
            |(n, p)| format!(
                "{n}/{} per {}{}",
                remuda::duration::format(p),
                s.rate_per.as_str(),
                s.rate_burst
                    .map(|b| format!(", at most {b} at once"))
                    .unwrap_or_default()
            )
        )
    );
    crate::out!("max_depth     {}", limit(s.max_depth));
    crate::out!("fairness      {}", s.fairness.as_str());
    let keep = |k: Option<remuda::maintenance::Keep>| {
        k.map_or_else(|| "the workers' default".to_string(), |k| k.to_string())
    };
    let r = &s.retention;
    crate::out!(
        "retention     completed {}, failed {}, cancelled {}, expired {}",
        keep(r.completed),
        keep(r.failed),
        keep(r.cancelled),
        keep(r.expired)
    );
}

/// `remuda queue group Q G --weight W`: sets the weight, and says so when the queue does not
/// share by group yet.
async fn group(client: &remuda::Client, args: crate::args::QueueGroupArgs) -> CliResult<u8> {
    let group = client
        .set_group_weight(&args.queue, Some(&args.group), args.weight)
        .await?;
    if client.queue(&args.queue).await?.fairness == remuda::Fairness::None {
        eprintln!(
            "note: queue {:?} does not share its starts by group yet: remuda queue set {} --fairness group",
            args.queue, args.queue
        );
    }
    print_groups(std::slice::from_ref(&group), args.json, true);
    Ok(0)
}

/// Groups as a table, or as JSON (`one`: the group just set, as one object).
fn print_groups(groups: &[remuda::GroupShare], json: bool, one: bool) {
    if json {
        match groups.first() {
            Some(group) if one => print_json(group),
            _ => print_json(&groups),
        }
        return;
    }
    crate::out!(
        "{:<24} {:>8} {:>8} {:>8} {:>11} {:>7} {:>7}",
        "group",
        "weight",
        "running",
        "waiting",
        "~starts/min",
        "share",
        "fair"
    );
    for g in groups {
        crate::out!(
            "{:<24} {:>8} {:>8} {:>8} {:>11} {:>6.1}% {:>6.1}%",
            group_label(g.group.as_deref()),
            g.weight,
            g.running,
            g.waiting,
            g.starts_last_minute,
            g.share * 100.0,
            g.fair_share * 100.0
        );
    }
}

/// A group as the table shows it: `(none)` for the jobs without a group, and a group whose
/// own name is written in parentheses quoted, so that it cannot pass for them.
fn group_label(group: Option<&str>) -> std::borrow::Cow<'_, str> {
    match group {
        None => "(none)".into(),
        Some(name) if name.starts_with('(') || name.starts_with('"') => format!("{name:?}").into(),
        Some(name) => name.into(),
    }
}

pub async fn cluster(db: &DbArgs, command: ClusterCommand) -> CliResult<u8> {
    let client = connect::client(db).await?;
    let (settings, json) = match command {
        ClusterCommand::Set(args) => (
            client.set_cluster_max_running(args.max_running.0).await?,
            args.json,
        ),
        ClusterCommand::Show(flags) => (client.cluster().await?, flags.json),
    };
    if json {
        print_json(&settings);
    } else {
        crate::out!(
            "max_running   {}",
            settings
                .max_running
                .map_or_else(|| "none".to_string(), |n| n.to_string())
        );
    }
    Ok(0)
}
