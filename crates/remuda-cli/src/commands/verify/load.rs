//! The load of a verification run, fed while the faults go on: plain, unique, delayed,
//! key-limited, rate-limited and failing jobs, a schedule, and random workflow runs that are
//! signalled, paused and resumed, cancelled; failed jobs retried by hand. Every call may fail
//! while the database is down: what was not acknowledged is not counted, what must happen
//! (a resume, a signal) is tried again until it is.

use super::shapes::{self, Shape};
use remuda::schedule::Schedule;
use remuda::{Client, NewJob};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The schedule the run declares (and removes before it drains).
pub const SCHEDULE: &str = "verify_tick";

/// A workflow run the feeder started: its definition, and what was done to it.
pub struct Run {
    pub id: i64,
    pub shape: Shape,
    /// A cancel was asked for (whether or not it was acknowledged).
    pub cancel_asked: bool,
    /// Signals still to send, by node.
    pending_signals: BTreeMap<String, Instant>,
    /// Paused, to be resumed at this time.
    resume_at: Option<Instant>,
}

/// What the feeder did.
#[derive(Default)]
pub struct Fed {
    /// Jobs whose enqueue was acknowledged.
    pub jobs: BTreeSet<i64>,
    pub runs: Vec<Run>,
    /// Jobs retried by hand.
    pub retried: usize,
    /// Failed runs retried.
    pub retried_runs: usize,
}

/// Feeds until `stop`, then returns what it fed, with every pause resumed and every signal
/// sent (tried until `settle` passes).
pub async fn feed(client: Client, seed: u64, stop: CancellationToken, settle: Duration) -> Fed {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut fed = Fed::default();
    let schedule = Schedule::new(
        SCHEDULE,
        "record",
        "every 2s".parse().expect("a valid pattern"),
    );
    let mut declared = false;
    let mut tick: u64 = 0;
    while !stop.is_cancelled() {
        tick += 1;
        if !declared {
            declared = client.set_schedule(&schedule).await.is_ok() && queues(&client).await;
        }
        if backlog(&client).await < 400 {
            enqueue(&client, &mut rng, tick, &mut fed).await;
        }
        if tick % 3 == 0 {
            start_run(&client, &mut rng, tick, &mut fed).await;
        }
        if tick % 10 == 0 {
            retry_one(&client, &mut fed).await;
        }
        act(&client, &mut fed, false).await;
        tokio::select! {
            _ = stop.cancelled() => {}
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
    }
    let until = Instant::now() + settle;
    while let Err(e) = client.delete_schedule(SCHEDULE).await {
        if matches!(e, remuda::Error::ScheduleNotFound(_)) || Instant::now() > until {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    while act(&client, &mut fed, true).await > 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    fed
}

/// Limits on the queues the mix uses: two running per key, twenty starts a second.
async fn queues(client: &Client) -> bool {
    let limited = remuda::QueueChange {
        key_limit: Some(Some(2)),
        ..Default::default()
    };
    let rated = remuda::QueueChange {
        rate: Some(Some((20, Duration::from_secs(1)))),
        ..Default::default()
    };
    client.change_queue("limited", &limited).await.is_ok()
        && client.change_queue("rated", &rated).await.is_ok()
}

async fn backlog(client: &Client) -> i64 {
    let counted = async {
        let conn = client.database().conn().await.ok()?;
        let row = conn
            .query_one(
                "SELECT count(*) FROM remuda.jobs WHERE state IN ('available', 'scheduled')",
                &[],
            )
            .await
            .ok()?;
        row.try_get::<_, i64>(0).ok()
    };
    tokio::time::timeout(Duration::from_secs(2), counted)
        .await
        .ok()
        .flatten()
        .unwrap_or(i64::MAX)
}

/// One batch of the job mix.
async fn enqueue(client: &Client, rng: &mut fastrand::Rng, tick: u64, fed: &mut Fed) {
    let mut jobs = Vec::new();
    for i in 0..20u64 {
        let n = tick * 20 + i;
        let kind = match rng.u32(..100) {
            0..=59 => "record",
            60..=69 => "slow",
            70..=84 => "flaky",
            _ => "fail",
        };
        let Ok(mut job) = NewJob::new(kind, &json!({ "n": n })) else {
            continue;
        };
        job = match rng.u32(..100) {
            0..=9 => job.unique_key(format!("u{}", rng.u32(..30))),
            10..=19 => job.delay(Duration::from_millis(rng.u64(200..3000))),
            20..=29 => job
                .queue("limited")
                .concurrency_key(format!("k{}", rng.u32(..3))),
            30..=39 => job.queue("rated"),
            40..=44 => job.priority(rng.i32(0..5)),
            _ => job,
        };
        jobs.push(job);
    }
    let sent = tokio::time::timeout(Duration::from_secs(5), client.insert_many(&jobs)).await;
    if let Ok(Ok(ids)) = sent {
        fed.jobs.extend(ids);
    }
}

async fn start_run(client: &Client, rng: &mut fastrand::Rng, tick: u64, fed: &mut Fed) {
    let shape = shapes::random(rng, tick);
    let started = tokio::time::timeout(
        Duration::from_secs(5),
        client.start_workflow_spec(&shape.spec, &json!({}), None),
    )
    .await;
    let Ok(Ok(started)) = started else {
        return;
    };
    let now = Instant::now();
    let pending_signals = shape
        .signals
        .keys()
        .map(|node| (node.clone(), now + Duration::from_millis(rng.u64(0..2500))))
        .collect();
    let mut run = Run {
        id: started.id,
        shape,
        cancel_asked: false,
        pending_signals,
        resume_at: None,
    };
    match rng.u32(..100) {
        0..=7 => {
            run.cancel_asked = true;
            let _ = client.cancel_workflow(run.id).await;
        }
        8..=27 if client.pause_workflow(run.id).await.is_ok() => {
            run.resume_at = Some(now + Duration::from_millis(rng.u64(200..2000)));
        }
        _ => {}
    }
    fed.runs.push(run);
}

/// Retries a failed job of the mix by hand (it runs again; `fail` fails again), and a failed
/// run (its nodes that did not complete run again, and end as before).
async fn retry_one(client: &Client, fed: &mut Fed) {
    let failed_run = async {
        let conn = client.database().conn().await.ok()?;
        let row = conn
            .query_opt(
                "SELECT id FROM remuda.workflows WHERE state = 'failed' AND parent_id IS NULL
                 ORDER BY random() LIMIT 1",
                &[],
            )
            .await
            .ok()??;
        row.try_get::<_, i64>(0).ok()
    };
    if let Some(id) = failed_run.await {
        if client.retry_workflow(id).await.is_ok() {
            fed.retried_runs += 1;
        }
    }
    let found = async {
        let conn = client.database().conn().await.ok()?;
        let row = conn
            .query_opt(
                "SELECT id FROM remuda.jobs WHERE state = 'failed' AND kind = 'fail'
                   AND workflow_id IS NULL AND jsonb_array_length(errors) < 3 LIMIT 1",
                &[],
            )
            .await
            .ok()??;
        row.try_get::<_, i64>(0).ok()
    };
    if let Some(id) = found.await {
        if client.retry(id).await.is_ok() {
            fed.retried += 1;
        }
    }
}

/// Sends due signals and resumes due pauses (all of them when `all`); returns how many are
/// still to do.
async fn act(client: &Client, fed: &mut Fed, all: bool) -> usize {
    let now = Instant::now();
    let mut left = 0;
    for run in &mut fed.runs {
        if let Some(at) = run.resume_at {
            if all || now >= at {
                match client.resume_workflow(run.id).await {
                    Ok(_) | Err(remuda::Error::WorkflowWrongState { .. }) => run.resume_at = None,
                    Err(_) => left += 1,
                }
            }
        }
        let due: Vec<String> = run
            .pending_signals
            .iter()
            .filter(|(_, at)| all || now >= **at)
            .map(|(node, _)| node.clone())
            .collect();
        for node in due {
            let (name, payload) = &run.shape.signals[&node];
            match client.signal_workflow(run.id, name, payload).await {
                Ok(_) | Err(remuda::Error::WorkflowWrongState { .. }) => {
                    run.pending_signals.remove(&node);
                }
                Err(_) => left += 1,
            }
        }
    }
    left
}
