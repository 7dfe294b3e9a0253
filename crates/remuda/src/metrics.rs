//! Prometheus metrics of one process: what its client enqueued, what its workers ran (how
//! long jobs waited and ran, how long their outcomes took to be written), what its leader
//! rescued, and its workers' gauges and notification deliveries — one registry per
//! [`Client`](crate::Client), encoded in the text exposition format by [`Metrics::encode`]
//! (`remuda worker --metrics-bind`, the dashboard's `/metrics`).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::{Arc, Mutex};

/// The labels of a job's metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JobLabels {
    /// Its queue.
    pub queue: String,
    /// Its kind.
    pub kind: String,
}

/// Upper bounds of the time histograms, in seconds: 1 ms to 5 min.
pub const BUCKETS: [f64; 16] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

fn histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

type Histograms = Family<JobLabels, Histogram, fn() -> Histogram>;

/// The metrics of one process (cheap to clone: every clone records into the same registry).
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Mutex<Registry>,
    enqueued: Family<JobLabels, Counter>,
    completed: Family<JobLabels, Counter>,
    failed: Family<JobLabels, Counter>,
    retried: Family<JobLabels, Counter>,
    rescued: Family<JobLabels, Counter>,
    wait: Histograms,
    run: Histograms,
    lag: Histogram,
    spans: SpanCounts,
}

/// What became of the spans of attempts this process exported ([`crate::telemetry`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct SpanCounts {
    /// Taken by the collector.
    pub exported: Counter,
    /// Dropped before they were sent: the queue was full.
    pub dropped: Counter,
    /// Sent and refused, or never taken: tries used up, the stop's deadline passed.
    pub failed: Counter,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

/// The handles of one queue and kind, taken once and kept (recording is then a few atomic
/// additions, no lookup).
#[derive(Clone, Debug)]
pub(crate) struct JobMetrics {
    pub completed: Counter,
    pub failed: Counter,
    pub retried: Counter,
    pub wait: Histogram,
    pub run: Histogram,
}

impl Metrics {
    /// An empty registry with remuda's metrics in it.
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let counters = |registry: &mut Registry, name: &str, help: &str| {
            let family = Family::<JobLabels, Counter>::default();
            registry.register(name, help, family.clone());
            family
        };
        let enqueued = counters(
            &mut registry,
            "remuda_jobs_enqueued",
            "Jobs enqueued by this process",
        );
        let completed = counters(
            &mut registry,
            "remuda_jobs_completed",
            "Attempts that completed",
        );
        let failed = counters(
            &mut registry,
            "remuda_jobs_failed",
            "Attempts that failed for good",
        );
        let retried = counters(
            &mut registry,
            "remuda_jobs_retried",
            "Attempts that failed and will be retried",
        );
        let rescued = counters(
            &mut registry,
            "remuda_jobs_rescued",
            "Jobs of lost workers rescued by this process's leader",
        );
        let wait = Histograms::new_with_constructor(histogram as fn() -> Histogram);
        registry.register(
            "remuda_job_wait_seconds",
            "From when a job could run to its start",
            wait.clone(),
        );
        let run = Histograms::new_with_constructor(histogram as fn() -> Histogram);
        registry.register(
            "remuda_job_run_seconds",
            "How long attempts ran",
            run.clone(),
        );
        let lag = histogram();
        registry.register(
            "remuda_completion_lag_seconds",
            "From an attempt's end to its outcome being written",
            lag.clone(),
        );
        let spans = SpanCounts::default();
        for (name, help, counter) in [
            (
                "remuda_spans_exported",
                "Spans of attempts the OTLP collector took",
                &spans.exported,
            ),
            (
                "remuda_spans_dropped",
                "Spans of attempts dropped unsent: the export queue was full",
                &spans.dropped,
            ),
            (
                "remuda_spans_failed",
                "Spans of attempts the collector refused or never took",
                &spans.failed,
            ),
        ] {
            registry.register(name, help, counter.clone());
        }
        Metrics {
            inner: Arc::new(Inner {
                registry: Mutex::new(registry),
                enqueued,
                completed,
                failed,
                retried,
                rescued,
                wait,
                run,
                lag,
                spans,
            }),
        }
    }

    fn labels(queue: &str, kind: &str) -> JobLabels {
        JobLabels {
            queue: queue.to_string(),
            kind: kind.to_string(),
        }
    }

    /// The handles of jobs of `kind` in `queue`.
    pub(crate) fn job(&self, queue: &str, kind: &str) -> JobMetrics {
        let labels = Metrics::labels(queue, kind);
        let i = &self.inner;
        JobMetrics {
            completed: i.completed.get_or_create(&labels).clone(),
            failed: i.failed.get_or_create(&labels).clone(),
            retried: i.retried.get_or_create(&labels).clone(),
            wait: i.wait.get_or_create(&labels).clone(),
            run: i.run.get_or_create(&labels).clone(),
        }
    }

    /// Counts `n` jobs of `kind` enqueued in `queue`.
    pub(crate) fn enqueued(&self, queue: &str, kind: &str, n: u64) {
        self.inner
            .enqueued
            .get_or_create(&Metrics::labels(queue, kind))
            .inc_by(n);
    }

    /// Counts `n` rescued jobs of `kind` in `queue`.
    pub(crate) fn rescued(&self, queue: &str, kind: &str, n: u64) {
        self.inner
            .rescued
            .get_or_create(&Metrics::labels(queue, kind))
            .inc_by(n);
    }

    /// The completion-lag histogram.
    pub(crate) fn lag(&self) -> &Histogram {
        &self.inner.lag
    }

    /// The counts of exported spans.
    pub(crate) fn spans(&self) -> &SpanCounts {
        &self.inner.spans
    }

    /// Adds metrics read at each scrape (a worker's gauges, its notification deliveries).
    pub fn register_collector(&self, collector: Box<dyn Collector>) {
        self.lock().register_collector(collector);
    }

    /// Every metric, in the Prometheus text exposition format (ending `# EOF`).
    pub fn encode(&self) -> String {
        let mut text = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut text, &self.lock()) {
            tracing::warn!("remuda: cannot encode the metrics: {e}");
        }
        text
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.inner
            .registry
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
