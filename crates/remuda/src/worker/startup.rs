//! The worker's start-up statements (the schema check, its schedules, its notification
//! defaults, its registration) ride out a server restart that begins while they run: a worker
//! started just as the database restarts (a deploy, a crash, a replacement process started by
//! a supervisor at that moment) waits for it as a running worker does, instead of exiting on
//! the first lost connection. A database never reached stays an error at once: a wrong
//! address or a server that is not there is told without a wait.

use crate::{Error, Result};
use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;

/// How long a start-up waits, in all, for a server it reached and lost before it gives up.
pub(crate) const PATIENCE: Duration = Duration::from_secs(60);

/// One start-up: whether the server was reached yet, and until when it is waited for.
pub(crate) struct Start {
    reached: bool,
    until: Instant,
    warned: bool,
}

impl Start {
    pub(crate) fn new() -> Start {
        Start::with_patience(PATIENCE)
    }

    fn with_patience(patience: Duration) -> Start {
        Start {
            reached: false,
            until: Instant::now() + patience,
            warned: false,
        }
    }

    /// Runs `step` until it succeeds; tries it again after a transient error once the server
    /// has been reached (an earlier step succeeded, or the server itself hung up or said it
    /// is shutting down or starting up), until the start-up's patience runs out. Each step
    /// must be safe to run twice (reads and upserts).
    pub(crate) async fn step<T, F, Fut>(&mut self, mut step: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let mut pause = Duration::from_millis(100);
        loop {
            match step().await {
                Ok(value) => {
                    self.reached = true;
                    return Ok(value);
                }
                Err(e) if retry(&e, self.reached) && Instant::now() + pause < self.until => {
                    self.reached = true;
                    if !self.warned {
                        tracing::warn!(
                            "remuda worker: the database went away while the worker started ({e}); waiting for it up to {}",
                            crate::duration::format(PATIENCE)
                        );
                        self.warned = true;
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Whether start-up tries again after `e`: a transient error from a server that was there
/// (reached before, or it hung up or said it is shutting down or cannot take connections yet).
fn retry(e: &Error, reached: bool) -> bool {
    e.is_transient() && (reached || server_went_away(e))
}

fn server_went_away(e: &Error) -> bool {
    match e {
        // 57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot connect now
        Error::Db(db) => {
            db.is_closed()
                || db
                    .code()
                    .is_some_and(|c| ["57P01", "57P02", "57P03"].contains(&c.code()))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unreachable() -> Error {
        Error::Unreachable {
            target: "remuda@nowhere".into(),
            reason: "connection refused".into(),
        }
    }

    #[tokio::test]
    async fn a_server_never_reached_is_an_error_at_once() {
        let mut start = Start::new();
        let mut tries = 0;
        let result: Result<()> = start
            .step(|| {
                tries += 1;
                async { Err(unreachable()) }
            })
            .await;
        assert!(result.is_err());
        assert_eq!(tries, 1);
    }

    #[tokio::test]
    async fn a_server_reached_before_is_waited_for_until_it_answers() {
        let mut start = Start::new();
        start.step(|| async { Ok(()) }).await.expect("reached");
        let mut tries = 0;
        let result = start
            .step(|| {
                tries += 1;
                let answer = if tries < 3 {
                    Err(unreachable())
                } else {
                    Ok(tries)
                };
                async move { answer }
            })
            .await;
        assert_eq!(result.ok(), Some(3));
    }

    #[tokio::test]
    async fn the_patience_is_one_for_the_whole_start_up() {
        let mut start = Start::with_patience(Duration::from_millis(300));
        // a first step that took the whole patience (a slow answer)
        start
            .step(|| async {
                tokio::time::sleep(Duration::from_millis(400)).await;
                Ok(())
            })
            .await
            .expect("reached");
        let mut tries = 0;
        let result: Result<()> = start
            .step(|| {
                tries += 1;
                async { Err(unreachable()) }
            })
            .await;
        assert!(result.is_err());
        assert_eq!(tries, 1, "a later step gets no patience of its own");
    }

    #[tokio::test]
    async fn bad_input_is_not_tried_again() {
        let mut start = Start::new();
        start.step(|| async { Ok(()) }).await.expect("reached");
        let mut tries = 0;
        let result: Result<()> = start
            .step(|| {
                tries += 1;
                async { Err(Error::InvalidInput("no".into())) }
            })
            .await;
        assert!(result.is_err());
        assert_eq!(tries, 1);
    }
}
