//! SIGINT and SIGTERM for [`Worker::run_until_signal`](super::Worker::run_until_signal),
//! listened for from the moment it is called.

use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::watch;

/// SIGINT and SIGTERM listened for since this was made (the default action, death, no
/// longer applies), counted: see [`Worker::run_until_signals`](super::Worker::run_until_signals).
pub struct ShutdownSignals {
    pub(super) seen: watch::Receiver<u32>,
    pub(super) listening: tokio::task::JoinHandle<()>,
}

impl ShutdownSignals {
    /// Starts listening now. Needs a Tokio runtime.
    pub fn listen() -> ShutdownSignals {
        let (count, seen) = watch::channel(0u32);
        ShutdownSignals {
            seen,
            listening: listen(count),
        }
    }
}

/// Starts listening for SIGINT and SIGTERM now and counts each one into `count`, from a task
/// of its own.
fn listen(count: watch::Sender<u32>) -> tokio::task::JoinHandle<()> {
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    tokio::spawn(async move {
        let (mut term, mut int) = (term.ok(), int.ok());
        loop {
            tokio::select! {
                Some(()) = next(&mut term) => {}
                Some(()) = next(&mut int) => {}
                else => return,
            }
            count.send_modify(|n| *n += 1);
        }
    })
}

async fn next(signal: &mut Option<Signal>) -> Option<()> {
    match signal {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}
