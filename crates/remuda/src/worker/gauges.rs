//! A worker's gauges and delivery counters, read at each scrape of its client's metrics:
//! jobs running and slots, and the notifications its dispatcher sent, retried and gave up.
//! The collector holds the worker weakly: once the worker has stopped it reports nothing.

use super::Shared;
use crate::notify::NotificationStats;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

/// What a worker reports at each scrape.
#[derive(Debug)]
pub(crate) struct WorkerGauges {
    pub shared: Weak<Shared>,
    pub notifications: Arc<NotificationStats>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Worker({})", self.worker_id)
    }
}

impl Collector for WorkerGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(shared) = self.shared.upgrade() else {
            return Ok(());
        };
        let worker = [("worker", shared.worker_id.to_string())];
        let concurrency = shared.config.concurrency as i64;
        let free = shared.slots.available_permits() as i64;
        for (name, help, value) in [
            (
                "remuda_worker_running",
                "Jobs this worker runs now",
                concurrency - free,
            ),
            (
                "remuda_worker_concurrency",
                "Jobs this worker runs at once at most",
                concurrency,
            ),
        ] {
            let gauge = ConstGauge::new(value);
            let mut metric = encoder.encode_descriptor(name, help, None, gauge.metric_type())?;
            gauge.encode(metric.encode_family(&worker)?)?;
        }
        let n = &self.notifications;
        for (name, help, value) in [
            (
                "remuda_notifications_sent",
                "Notifications delivered",
                &n.sent,
            ),
            (
                "remuda_notifications_retried",
                "Failed deliveries to be tried again",
                &n.retried,
            ),
            (
                "remuda_notifications_dead",
                "Notifications given up",
                &n.dead,
            ),
        ] {
            let counter = ConstCounter::new(value.load(Ordering::Relaxed));
            let mut metric = encoder.encode_descriptor(name, help, None, counter.metric_type())?;
            counter.encode(metric.encode_family(&worker)?)?;
        }
        Ok(())
    }
}
