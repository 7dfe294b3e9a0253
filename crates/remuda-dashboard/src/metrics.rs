//! `/metrics` in the Prometheus (OpenMetrics) text format: the dashboard process's own
//! metrics (jobs enqueued through the API) and gauges read from the database at each scrape —
//! jobs per queue and state, each queue's lag, the groups of each fair queue (their jobs,
//! weight and shares), workers alive and what they run, schedules, notifications waiting and
//! given up. Workers serve their counters and histograms
//! themselves (`remuda worker --metrics-bind`).

use crate::error::ApiResult;
use crate::State;
use axum::extract::State as S;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use remuda::metrics::Metrics;
use remuda::JobState;
use std::sync::atomic::AtomicU64;

/// The content type of the OpenMetrics text format.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

const OUTBOX: &str = include_str!("sql/outbox_counts.sql");

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueState {
    queue: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabel {
    queue: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupLabel {
    queue: String,
    /// Empty for the jobs without a group.
    group: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupState {
    queue: String,
    group: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WorkerLabel {
    worker: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: String,
}

/// A response in the OpenMetrics text format.
pub fn respond(text: String) -> Response {
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response()
}

/// `metrics`, with more families added before the end.
fn joined(metrics: &Metrics, more: &Registry) -> String {
    let mut text = metrics.encode();
    if text.ends_with("# EOF\n") {
        text.truncate(text.len() - "# EOF\n".len());
    }
    let mut gauges = String::new();
    if prometheus_client::encoding::text::encode(&mut gauges, more).is_err() {
        tracing::warn!("remuda dashboard: cannot encode the database gauges");
    }
    text + &gauges
}

/// `GET /metrics`.
pub(crate) async fn scrape(S(state): S<State>) -> ApiResult<Response> {
    let client = &state.client;
    let (queues, workers, schedules) = tokio::try_join!(
        state.counts.get(client),
        client.workers(),
        client.schedules()
    )?;
    let db = |e: tokio_postgres::Error| crate::ApiError::from(remuda::Error::from(e));
    let conn = client.database().conn().await?;
    let outbox = conn
        .query_one(OUTBOX, &[&remuda::COUNT_CAP])
        .await
        .map_err(db)?;
    drop(conn);
    let mut registry = Registry::default();
    let jobs = Family::<QueueState, Gauge>::default();
    registry.register(
        "remuda_queue_jobs",
        "Jobs per queue and state (final states counted up to 10 000)",
        jobs.clone(),
    );
    let lag = Family::<QueueLabel, Gauge<f64, AtomicU64>>::default();
    registry.register(
        "remuda_queue_lag_seconds",
        "Age of each queue's oldest available job",
        lag.clone(),
    );
    let now = chrono::Utc::now();
    for q in queues.iter() {
        for s in JobState::ALL {
            let labels = QueueState {
                queue: q.queue.clone(),
                state: s.as_str().into(),
            };
            jobs.get_or_create(&labels).set(q.count(s));
        }
        let behind = q
            .oldest_available
            .map_or(0.0, |t| (now - t).num_milliseconds().max(0) as f64 / 1000.0);
        lag.get_or_create(&QueueLabel {
            queue: q.queue.clone(),
        })
        .set(behind);
    }
    groups(&mut registry, client, &queues[..]).await?;
    let alive = Gauge::<i64>::default();
    registry.register("remuda_workers", "Workers alive", alive.clone());
    alive.set(workers.iter().filter(|w| w.alive).count() as i64);
    let running = Family::<WorkerLabel, Gauge>::default();
    registry.register(
        "remuda_worker_running",
        "Jobs each live worker ran at its last heartbeat",
        running.clone(),
    );
    for w in workers.iter().filter(|w| w.alive) {
        running
            .get_or_create(&WorkerLabel {
                worker: w.id.clone(),
            })
            .set(w.running);
    }
    let scheduled = Family::<StateLabel, Gauge>::default();
    registry.register(
        "remuda_schedules",
        "Schedules, active or paused",
        scheduled.clone(),
    );
    for (label, paused) in [("active", false), ("paused", true)] {
        let n = schedules.iter().filter(|s| s.paused == paused).count() as i64;
        scheduled
            .get_or_create(&StateLabel {
                state: label.into(),
            })
            .set(n);
    }
    let notifications = Family::<StateLabel, Gauge>::default();
    registry.register(
        "remuda_notifications",
        "Notifications waiting to be sent (pending) and given up (dead, counted up to 10 000)",
        notifications.clone(),
    );
    for state in ["pending", "dead"] {
        let n: i64 = outbox.try_get(state).map_err(db)?;
        notifications
            .get_or_create(&StateLabel {
                state: state.into(),
            })
            .set(n);
    }
    Ok(respond(joined(client.metrics(), &registry)))
}

/// The groups of every queue with fair share on: their waiting and running jobs, weights,
/// share of the starts over the last minute and the share their weight gives them (one series
/// per group and queue: a queue of 1 000 tenants adds 5 000).
async fn groups(
    registry: &mut Registry,
    client: &remuda::Client,
    queues: &[remuda::QueueStats],
) -> ApiResult<()> {
    let jobs = Family::<GroupState, Gauge>::default();
    registry.register(
        "remuda_group_jobs",
        "Jobs of each group of a fair queue, waiting (available) and running (group \"\": the jobs without a group)",
        jobs.clone(),
    );
    let weight = Family::<GroupLabel, Gauge<f64, AtomicU64>>::default();
    registry.register(
        "remuda_group_weight",
        "Weight of each group of a fair queue",
        weight.clone(),
    );
    let share = Family::<GroupLabel, Gauge<f64, AtomicU64>>::default();
    registry.register(
        "remuda_group_share",
        "Each group's part of its fair queue's starts over the last minute (0 to 1, estimated)",
        share.clone(),
    );
    let fair = Family::<GroupLabel, Gauge<f64, AtomicU64>>::default();
    registry.register(
        "remuda_group_fair_share",
        "The part of its fair queue's starts each group's weight entitles it to (0 to 1)",
        fair.clone(),
    );
    for q in queues
        .iter()
        .filter(|q| q.settings.fairness == remuda::Fairness::Group)
    {
        for g in client.queue_groups(&q.queue).await? {
            let group = g.group.unwrap_or_default();
            for (state, n) in [("available", g.waiting), ("running", g.running)] {
                jobs.get_or_create(&GroupState {
                    queue: q.queue.clone(),
                    group: group.clone(),
                    state: state.into(),
                })
                .set(n);
            }
            let label = GroupLabel {
                queue: q.queue.clone(),
                group,
            };
            weight.get_or_create(&label).set(g.weight);
            share.get_or_create(&label).set(g.share);
            fair.get_or_create(&label).set(g.fair_share);
        }
    }
    Ok(())
}
