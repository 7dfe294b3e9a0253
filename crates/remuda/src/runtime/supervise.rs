//! Supervision of a worker's background tasks (heartbeat, listener dispatch, settings,
//! producer, maintenance). Each runs until the worker stops it; one that ends before — a
//! panic, or a loop that returned — leaves the worker half alive, and a half-alive worker is
//! dangerous: with a silent heartbeat its jobs would be rescued and run twice while it still
//! runs them. So the first such failure is reported here, and the worker then stops its jobs
//! at once, gives them back and ends with [`Error::WorkerFailed`](crate::Error::WorkerFailed).

use super::lock;
use std::future::Future;
use std::sync::{Arc, Mutex};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The background tasks of one worker are expected to run until this is cancelled.
pub(crate) fn until(stop: &CancellationToken) -> impl Fn() -> bool + Send + 'static {
    let stop = stop.clone();
    move || !stop.is_cancelled()
}

/// The first background failure of a worker, if any.
#[derive(Default)]
pub(crate) struct Failures {
    /// Cancelled at the first failure.
    pub failed: CancellationToken,
    reason: Mutex<Option<String>>,
}

impl Failures {
    /// What failed first.
    pub fn reason(&self) -> Option<String> {
        lock(&self.reason).clone()
    }

    fn report(&self, reason: String) {
        let mut first = lock(&self.reason);
        if first.is_none() {
            tracing::error!("remuda worker: {reason}; stopping");
            *first = Some(reason);
        }
        self.failed.cancel();
    }
}

/// Spawns background task `name`, reporting to `failures` if it ends (or panics) while
/// `expected` says it should still run. Aborting the returned handle aborts the task too.
pub(crate) fn spawn(
    name: &'static str,
    task: impl Future<Output = ()> + Send + 'static,
    expected: impl Fn() -> bool + Send + 'static,
    failures: Arc<Failures>,
) -> JoinHandle<()> {
    let inner = AbortOnDrop(tokio::spawn(task));
    tokio::spawn(async move {
        let mut inner = inner;
        let ended = (&mut inner.0).await;
        if !expected() {
            return;
        }
        failures.report(match ended {
            Ok(()) => format!("its {name} task ended on its own"),
            Err(e) if e.is_panic() => {
                let panic = e.into_panic();
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".into());
                format!("its {name} task panicked: {message}")
            }
            Err(e) => format!("its {name} task failed: {e}"),
        });
    })
}

/// Aborts the task it holds when dropped: the supervising task's abort reaches it.
pub(crate) struct AbortOnDrop(pub JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A place where a test can make background task `task` fail (see
/// `testing::fail_background_task`); nothing at all without the `testing` feature.
#[inline]
pub(crate) fn fault_point(task: &'static str) {
    #[cfg(feature = "testing")]
    if crate::testing::background_task_should_fail(task) {
        panic!("injected failure of the {task} task");
    }
    #[cfg(not(feature = "testing"))]
    let _ = task;
}
