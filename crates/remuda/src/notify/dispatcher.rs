//! The dispatcher, one in every worker: it keeps up to `concurrency` notifications in
//! flight, claiming due rows once half the slots are free, and a writer task writes the
//! outcomes in batches.
//!
//! It wakes when a finalization announces new rows (`remuda_outbox`, sent once per
//! transaction, not per job), when the listener reconnects, and when the next row falls
//! due (a retry's backoff, or a dead sender's lease). A slow receiver holds one slot, not the
//! others.

use super::store::{self, Claimed, Failure};
use super::{email, webhook, NotificationConfig};
use crate::db::listener::Event;
use crate::db::Database;
use futures_util::FutureExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, Notify};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Longest the dispatcher sleeps without looking at the outbox.
const IDLE_LOOK: Duration = Duration::from_secs(30);
/// Outcomes gathered before they are written, at most.
const MARK_BATCH: usize = 500;
/// Longest the in-flight sends get to finish at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// What one attempt came to.
#[derive(Debug)]
pub(crate) enum Attempt {
    /// Delivered.
    Sent,
    /// Not delivered: try again later (after `retry_after` when the receiver said so).
    Failed {
        error: String,
        retry_after: Option<Duration>,
    },
    /// Not delivered and never will be: dead at once.
    Dead(String),
}

/// Bounds of the delivery-latency histogram, in milliseconds (Prometheus `le` buckets).
pub const LATENCY_BUCKETS_MS: [u64; 12] = [
    10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 60_000, 600_000,
];

/// Counts of a dispatcher's work, readable while it runs (for metrics).
#[derive(Debug, Default)]
pub struct NotificationStats {
    /// Notifications delivered.
    pub sent: AtomicU64,
    /// Failed attempts that will be tried again.
    pub retried: AtomicU64,
    /// Notifications given up (out of attempts, gone, or refused).
    pub dead: AtomicU64,
    /// Deliveries per latency bucket (finalization to delivery): bucket `i` counts those of
    /// at most [`LATENCY_BUCKETS_MS`]`[i]`, the last one the rest.
    pub latency_buckets: [AtomicU64; LATENCY_BUCKETS_MS.len() + 1],
    /// Sum of the delivery latencies, in milliseconds.
    pub latency_ms_sum: AtomicU64,
}

impl NotificationStats {
    fn record_latency(&self, ms: f64) {
        let ms = ms.max(0.0);
        let bucket = LATENCY_BUCKETS_MS
            .iter()
            .position(|&b| ms <= b as f64)
            .unwrap_or(LATENCY_BUCKETS_MS.len());
        self.latency_buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.latency_ms_sum.fetch_add(ms as u64, Ordering::Relaxed);
    }
}

/// Everything one dispatcher holds.
pub(crate) struct Dispatcher {
    db: Database,
    config: NotificationConfig,
    id: Arc<str>,
    stats: Arc<NotificationStats>,
    http: reqwest::Client,
    smtp: Option<email::Transport>,
}

impl Dispatcher {
    /// A dispatcher for worker `id`, its HTTP client and SMTP transport set up (the worker
    /// refuses to start when they cannot be).
    pub(crate) fn new(
        db: Database,
        config: NotificationConfig,
        id: Arc<str>,
        stats: Arc<NotificationStats>,
    ) -> crate::Result<Dispatcher> {
        let http = webhook::client(&config).map_err(|e| {
            crate::Error::Setup(format!("notifications: cannot build the HTTP client: {e}"))
        })?;
        let smtp = match &config.smtp {
            Some(smtp) => Some(email::transport(smtp, config.timeout).map_err(|e| {
                crate::Error::Setup(format!(
                    "notifications: cannot set up SMTP to {}: {e}",
                    smtp.host
                ))
            })?),
            None => None,
        };
        Ok(Dispatcher {
            db,
            config,
            id,
            stats,
            http,
            smtp,
        })
    }

    /// The channels this dispatcher can send: webhooks with a secret, email with an SMTP
    /// server. Rows of the others are left to dispatchers that can (no attempt is spent).
    pub(crate) fn channels(&self) -> Vec<&'static str> {
        let mut channels = Vec::new();
        if !self.config.secrets.is_empty() {
            channels.push("webhook");
        }
        if self.smtp.is_some() {
            channels.push("email");
        }
        channels
    }
}

/// Runs the dispatcher until `stop`, then lets the sends in flight finish (briefly) and
/// writes their outcomes. Sends run as tasks of their own and outcomes are written by a
/// writer task, so neither a slow receiver nor a database round trip holds up the others.
pub(crate) async fn run(
    dispatcher: Dispatcher,
    mut events: broadcast::Receiver<Event>,
    stop: CancellationToken,
) {
    let dispatcher = Arc::new(dispatcher);
    let lease_ms = i64::try_from(dispatcher.config.lease().as_millis()).unwrap_or(i64::MAX);
    let limit = dispatcher.config.concurrency;
    let max_attempts = i32::try_from(dispatcher.config.max_attempts).unwrap_or(i32::MAX);
    let channels = dispatcher.channels();
    let (outcomes, written) = (mpsc::unbounded_channel(), Arc::new(Notify::new()));
    let (to_writer, from_sends) = outcomes;
    let writer = tokio::spawn(write_all(dispatcher.clone(), from_sends, written.clone()));
    let mut sends: JoinSet<(Claimed, Attempt)> = JoinSet::new();
    let mut maybe_due = true;
    let mut sleep_until = tokio::time::Instant::now();
    loop {
        if stop.is_cancelled() {
            break;
        }
        // claim when at least half the slots are free: a claim per freed slot would cost a
        // round trip per delivery
        if maybe_due && sends.len() <= limit / 2 {
            let room = limit - sends.len();
            let wanted = i32::try_from(room).unwrap_or(i32::MAX);
            let claim = store::Claim {
                limit: wanted,
                lease_ms,
                dispatcher: &dispatcher.id,
                max_attempts,
                channels: &channels,
            };
            match store::claim(&dispatcher.db, &claim).await {
                Ok(claimed) => {
                    maybe_due = claimed.len() == room;
                    for row in claimed {
                        let d = dispatcher.clone();
                        sends.spawn(async move {
                            let sending = deliver(&d.http, d.smtp.as_ref(), &d.config, &row);
                            // a panic is a failed attempt, written as any other
                            let attempt = std::panic::AssertUnwindSafe(sending)
                                .catch_unwind()
                                .await
                                .unwrap_or_else(|_| Attempt::Failed {
                                    error: "sending it panicked (a bug: please report it)".into(),
                                    retry_after: None,
                                });
                            (row, attempt)
                        });
                    }
                }
                Err(e) => {
                    tracing::warn!("remuda notifications: claiming failed: {e}");
                    maybe_due = false;
                    sleep_until = tokio::time::Instant::now() + Duration::from_secs(1);
                }
            }
        }
        // nothing known to be due: sleep until the next row is (a backoff ending, a dead
        // sender's lease), sends in flight or not
        let idle = !maybe_due;
        if idle && sleep_until <= tokio::time::Instant::now() {
            sleep_until = tokio::time::Instant::now() + next_look(&dispatcher.db).await;
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            Some(joined) = sends.join_next(), if !sends.is_empty() => forward(joined, &to_writer),
            _ = tokio::time::sleep_until(sleep_until), if idle => maybe_due = true,
            // failures were written: their next attempts may be due sooner than the sleep
            _ = written.notified() => {
                maybe_due = true;
                sleep_until = tokio::time::Instant::now();
            }
            event = events.recv() => match event {
                Ok(Event::Notification { channel, .. }) if &*channel == "remuda_outbox" => maybe_due = true,
                Ok(Event::Listening) | Err(broadcast::error::RecvError::Lagged(_)) => maybe_due = true,
                Ok(_) => {}
                Err(broadcast::error::RecvError::Closed) => {
                    // no listener: poll
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    maybe_due = true;
                }
            },
        }
    }
    let grace = SHUTDOWN_GRACE.min(dispatcher.config.timeout);
    let _ = tokio::time::timeout(grace, async {
        while let Some(joined) = sends.join_next().await {
            forward(joined, &to_writer);
        }
    })
    .await;
    // what is still in flight is abandoned: its rows are due again when their leases end
    sends.abort_all();
    drop(to_writer);
    let _ = writer.await;
}

/// Hands a finished send to the writer.
fn forward(
    joined: Result<(Claimed, Attempt), tokio::task::JoinError>,
    to_writer: &mpsc::UnboundedSender<(Claimed, Attempt)>,
) {
    // (an Err is a send cancelled at shutdown: its row is due again when its lease ends)
    if let Ok(done) = joined {
        let _ = to_writer.send(done);
    }
}

/// The writer: takes the outcomes as they come and writes what has gathered in one go (up
/// to [`MARK_BATCH`]), so batches grow while a write is under way.
async fn write_all(
    dispatcher: Arc<Dispatcher>,
    mut outcomes: mpsc::UnboundedReceiver<(Claimed, Attempt)>,
    written: Arc<Notify>,
) {
    while let Some(first) = outcomes.recv().await {
        let mut batch = vec![first];
        while batch.len() < MARK_BATCH {
            match outcomes.try_recv() {
                Ok(more) => batch.push(more),
                Err(_) => break,
            }
        }
        if write_outcomes(&dispatcher, batch).await {
            written.notify_one();
        }
    }
}

/// How long to sleep when nothing is due: until the next row is, at most [`IDLE_LOOK`].
async fn next_look(db: &Database) -> Duration {
    match store::next_due(db).await {
        Ok(Some(ms)) => Duration::from_millis(u64::try_from(ms).unwrap_or(0)).min(IDLE_LOOK),
        Ok(None) => IDLE_LOOK,
        Err(e) => {
            tracing::warn!("remuda notifications: reading the next due time failed: {e}");
            Duration::from_secs(1)
        }
    }
}

/// One attempt at one notification.
async fn deliver(
    http: &reqwest::Client,
    smtp: Option<&email::Transport>,
    config: &NotificationConfig,
    row: &Claimed,
) -> Attempt {
    match row.channel.as_str() {
        "webhook" => webhook::send(http, config, row.id, &row.target, &row.body).await,
        "email" => {
            let sending = email::send(smtp, config.smtp.as_ref(), row.id, &row.target, &row.body);
            match tokio::time::timeout(config.timeout, sending).await {
                Ok(attempt) => attempt,
                Err(_) => Attempt::Failed {
                    error: "SMTP: timed out".into(),
                    retry_after: None,
                },
            }
        }
        other => Attempt::Dead(format!("unknown channel {other:?}")),
    }
}

/// Writes a batch of outcomes: sent rows in one statement, failures in another. A write
/// that fails is logged: the rows' leases run out and they are sent again (at least once).
/// Returns whether it wrote failures (rows due again later).
async fn write_outcomes(dispatcher: &Dispatcher, outcomes: Vec<(Claimed, Attempt)>) -> bool {
    let config = &dispatcher.config;
    let stats = &dispatcher.stats;
    let mut sent = Vec::new();
    let mut failures = Vec::new();
    for (row, attempt) in outcomes {
        match attempt {
            Attempt::Sent => sent.push(row.id),
            Attempt::Failed { error, retry_after } => {
                let attempts = u32::try_from(row.attempts).unwrap_or(u32::MAX);
                let dead = attempts >= config.max_attempts;
                let delay = retry_after.unwrap_or_else(|| config.delay_after(attempts));
                if dead {
                    tracing::warn!(
                        "remuda notifications: {} {} to {} is dead after {attempts} attempts: {error}",
                        row.channel, row.id, row.target
                    );
                    stats.dead.fetch_add(1, Ordering::Relaxed);
                } else {
                    tracing::info!(
                        "remuda notifications: {} {} to {} failed (attempt {attempts}), next in {}: {error}",
                        row.channel, row.id, row.target, crate::duration::format(delay)
                    );
                    stats.retried.fetch_add(1, Ordering::Relaxed);
                }
                failures.push(Failure {
                    id: row.id,
                    attempts: row.attempts,
                    dead,
                    delay_ms: i64::try_from(delay.as_millis()).unwrap_or(i64::MAX),
                    error,
                });
            }
            Attempt::Dead(error) => {
                tracing::warn!(
                    "remuda notifications: {} {} to {} is dead: {error}",
                    row.channel,
                    row.id,
                    row.target
                );
                stats.dead.fetch_add(1, Ordering::Relaxed);
                failures.push(Failure {
                    id: row.id,
                    attempts: row.attempts,
                    dead: true,
                    delay_ms: 0,
                    error,
                });
            }
        }
    }
    if !sent.is_empty() {
        match store::mark_sent(&dispatcher.db, &sent).await {
            Ok(latencies) => {
                // (a row another dispatcher marked already is not counted twice)
                stats.sent.fetch_add(latencies.len() as u64, Ordering::Relaxed);
                for ms in latencies {
                    stats.record_latency(ms);
                }
            }
            Err(e) => tracing::warn!(
                "remuda notifications: marking {} delivered notifications failed (they will be sent again): {e}",
                sent.len()
            ),
        }
    }
    if failures.is_empty() {
        return false;
    }
    if let Err(e) = store::mark_failed(&dispatcher.db, &failures).await {
        tracing::warn!(
            "remuda notifications: recording {} failed attempts failed: {e}",
            failures.len()
        );
    }
    true
}
