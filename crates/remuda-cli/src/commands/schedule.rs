//! `remuda schedule add|pause|resume|trigger|delete` and `remuda schedules`.

use crate::args::{DbArgs, JsonFlag, ScheduleAddArgs, ScheduleCommand};
use crate::connect;
use crate::error::{CliError, CliResult};
use crate::output::print_json;
use crate::table::{Align, Table};
use remuda::schedule::{Declared, Pattern, Schedule, ScheduleInfo};

pub async fn run(db: &DbArgs, command: ScheduleCommand) -> CliResult<u8> {
    let s = match command {
        ScheduleCommand::Add(args) => return add(db, *args).await,
        ScheduleCommand::Pause(ref s)
        | ScheduleCommand::Resume(ref s)
        | ScheduleCommand::Trigger(ref s)
        | ScheduleCommand::Delete(ref s) => s,
    };
    let client = connect::client(db).await?;
    let (text, fields) = match command {
        ScheduleCommand::Pause(_) => {
            client.pause_schedule(&s.name).await?;
            ("paused".to_string(), serde_json::json!({"paused": true}))
        }
        ScheduleCommand::Resume(_) => {
            let next = client.resume_schedule(&s.name).await?;
            (
                format!("resumed; next run at {}", next.to_rfc3339()),
                serde_json::json!({"paused": false, "next_run_at": next}),
            )
        }
        ScheduleCommand::Trigger(_) => {
            let id = client.trigger_schedule(&s.name).await?;
            (
                format!("triggered: job {id}"),
                serde_json::json!({"job_id": id}),
            )
        }
        // (Add returned above)
        ScheduleCommand::Delete(_) | ScheduleCommand::Add(_) => {
            client.delete_schedule(&s.name).await?;
            ("deleted".to_string(), serde_json::json!({"deleted": true}))
        }
    };
    done(s.json, &s.name, &text, fields)
}

/// Prints the outcome of an action on schedule `name`.
fn done(json: bool, name: &str, text: &str, fields: serde_json::Value) -> CliResult<u8> {
    if json {
        let mut value = serde_json::json!({"name": name});
        if let (Some(map), serde_json::Value::Object(extra)) = (value.as_object_mut(), fields) {
            map.extend(extra);
        }
        print_json(&value);
    } else {
        crate::out!("schedule {name} {text}");
    }
    Ok(0)
}

/// The schedule the flags describe, checked before anything is written.
fn schedule_of(args: &ScheduleAddArgs) -> CliResult<Schedule> {
    let bad = |flag: &str, e: remuda::Error| CliError::Usage(format!("{flag}: {e}"));
    let pattern = if let Some(cron) = &args.cron {
        Pattern::cron(cron).map_err(|e| bad("--cron", e))?
    } else if let Some(every) = &args.every {
        Pattern::every(every).map_err(|e| bad("--every", e))?
    } else if let Some(daily) = &args.daily {
        Pattern::daily(daily).map_err(|e| bad("--daily", e))?
    } else {
        let text = args.pattern.as_deref().unwrap_or_default();
        text.parse().map_err(|e| bad("--pattern", e))?
    };
    let mut schedule = Schedule::new(&args.name, &args.kind, pattern);
    if let Some(text) = &args.args {
        schedule.args = serde_json::from_str(text).map_err(|e| {
            CliError::Usage(format!(
                "--args is not valid JSON ({e}): give an object, like '{{\"scope\": \"all\"}}'"
            ))
        })?;
    }
    if let Some(queue) = &args.queue {
        schedule.queue = queue.clone();
    }
    if let Some(priority) = args.priority {
        schedule.priority = priority;
    }
    schedule.max_attempts = args.max_attempts;
    schedule.group = args.group.clone();
    if let Some(tz) = &args.tz {
        schedule.zone = tz.parse().map_err(|e| bad("--tz", e))?;
    }
    if let Some(catch_up) = &args.catch_up {
        schedule.catch_up = catch_up.parse().map_err(|e| bad("--catch-up", e))?;
    }
    if let Some(limit) = args.catch_up_limit {
        schedule.catch_up_limit = limit;
    }
    if let Some(overlap) = &args.overlap {
        schedule.overlap = overlap.parse().map_err(|e| bad("--overlap", e))?;
    }
    schedule.validate()?;
    Ok(schedule)
}

async fn add(db: &DbArgs, args: ScheduleAddArgs) -> CliResult<u8> {
    let schedule = schedule_of(&args)?;
    let client = connect::client(db).await?;
    let declared = client.set_schedule(&schedule).await?;
    let info = client
        .schedule(&schedule.name)
        .await?
        .ok_or_else(|| remuda::Error::ScheduleNotFound(schedule.name.clone()))?;
    let what = match declared {
        Declared::Created(_) => "created",
        Declared::Changed(_) => "replaced",
        Declared::Unchanged => "unchanged",
    };
    if args.json {
        let mut value = serde_json::to_value(&info).map_err(remuda::Error::from)?;
        if let Some(map) = value.as_object_mut() {
            map.insert("change".into(), what.into());
        }
        print_json(&value);
    } else {
        crate::out!(
            "schedule {} {what}: {} in {}, next run at {}{}",
            info.name,
            info.pattern,
            info.tz,
            info.next_run_at.to_rfc3339(),
            info.tz
                .parse::<remuda::schedule::Zone>()
                .ok()
                .filter(|z| *z != remuda::schedule::Zone::UTC)
                .map(|z| format!(" ({})", z.clock(info.next_run_at)))
                .unwrap_or_default()
        );
    }
    Ok(0)
}

pub async fn list(db: &DbArgs, flags: JsonFlag) -> CliResult<u8> {
    let client = connect::client(db).await?;
    let schedules = client.schedules().await?;
    if flags.json {
        print_json(&schedules);
    } else {
        print_schedules(&schedules);
    }
    Ok(0)
}

fn print_schedules(schedules: &[ScheduleInfo]) {
    if schedules.is_empty() {
        crate::out!("no schedules: add one with `remuda schedule add` or [schedules.NAME] in a worker config");
        return;
    }
    let mut table = Table::new(&[
        ("NAME", Align::Left),
        ("KIND", Align::Left),
        ("QUEUE", Align::Left),
        ("PATTERN", Align::Left),
        ("TZ", Align::Left),
        ("NEXT RUN (UTC)", Align::Left),
        ("NEXT RUN (ITS ZONE)", Align::Left),
        ("LAST RUN", Align::Left),
        ("RUNS", Align::Right),
        ("PAUSED", Align::Left),
    ]);
    for s in schedules {
        let local =
            s.tz.parse::<remuda::schedule::Zone>()
                .map_or_else(|_| "-".into(), |zone| zone.clock(s.next_run_at));
        table.row(vec![
            s.name.clone(),
            s.kind.clone(),
            s.queue.clone(),
            s.pattern.clone(),
            s.tz.clone(),
            s.next_run_at
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            local,
            s.last_run_at.map_or("-".into(), |t| {
                t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            }),
            s.runs.to_string(),
            if s.paused { "yes" } else { "no" }.into(),
        ]);
    }
    table.print();
}
