//! SIGINT and SIGTERM for [`Worker::run_until_signal`](super::Worker::run_until_signal),
//! listened for from the moment it is called.

use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::watch;

/// Starts listening for SIGINT and SIGTERM now (so the default action, death, no longer
/// applies) and counts each one into `count`, from a task of its own.
pub(super) fn listen(count: watch::Sender<u32>) -> tokio::task::JoinHandle<()> {
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
