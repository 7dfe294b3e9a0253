//! The worker's start-up statements (the schema check, its schedules, its notification
//! defaults, its registration) ride out a server restart that begins while they run: a worker
//! started just as the database restarts (a deploy, a crash, a replacement process started by
//! a supervisor at that moment) waits for it as a running worker does, instead of exiting on
//! the first lost connection. A database never reached stays an error at once: a wrong
//! address or a server that is not there is told without a wait.

use crate::{Error, Result};
use std::future::Future;
use std::time::Duration;

/// How long start-up waits for a server it reached and lost before it gives up.
pub(crate) const PATIENCE: Duration = Duration::from_secs(60);

/// Runs `step` until it succeeds; tries it again after a transient error once the server has
/// been reached (an earlier step succeeded, or the server itself answered or hung up), for
/// up to `patience`. Each step must be safe to run twice (reads and upserts).
pub(crate) async fn ride_out_restart<T, F, Fut>(
    reached: &mut bool,
    patience: Duration,
    mut step: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let until = tokio::time::Instant::now() + patience;
    let mut pause = Duration::from_millis(100);
    let mut warned = false;
    loop {
        match step().await {
            Ok(value) => {
                *reached = true;
                return Ok(value);
            }
            Err(e) if retry(&e, *reached) && tokio::time::Instant::now() + pause < until => {
                *reached = true;
                if !warned {
                    tracing::warn!(
                        "remuda worker: the database went away while the worker started ({e}); waiting for it up to {}",
                        crate::duration::format(patience)
                    );
                    warned = true;
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Whether start-up tries again after `e`: a transient error from a server that was there
/// (reached before, or it hung up or said it is starting up or shutting down).
fn retry(e: &Error, reached: bool) -> bool {
    e.is_transient() && (reached || server_went_away(e))
}

fn server_went_away(e: &Error) -> bool {
    match e {
        Error::Db(db) => db.is_closed() || db.code().is_some_and(|c| c.code().starts_with("57")),
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
        let mut reached = false;
        let mut tries = 0;
        let result: Result<()> = ride_out_restart(&mut reached, PATIENCE, || {
            tries += 1;
            async { Err(unreachable()) }
        })
        .await;
        assert!(result.is_err());
        assert_eq!(tries, 1);
    }

    #[tokio::test]
    async fn a_server_reached_before_is_waited_for_until_it_answers() {
        let mut reached = true;
        let mut tries = 0;
        let result = ride_out_restart(&mut reached, PATIENCE, || {
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
    async fn a_server_that_stays_away_past_the_patience_is_an_error() {
        let mut reached = true;
        let mut tries = 0;
        let patience = Duration::from_secs(1);
        let started = tokio::time::Instant::now();
        let result: Result<()> = ride_out_restart(&mut reached, patience, || {
            tries += 1;
            async { Err(unreachable()) }
        })
        .await;
        assert!(result.is_err());
        assert!(started.elapsed() < patience);
        assert_eq!(
            tries, 4,
            "tried after 100, 200 and 400 ms; the next pause ends past it"
        );
    }

    #[tokio::test]
    async fn bad_input_is_not_tried_again() {
        let mut reached = true;
        let mut tries = 0;
        let result: Result<()> = ride_out_restart(&mut reached, PATIENCE, || {
            tries += 1;
            async { Err(Error::InvalidInput("no".into())) }
        })
        .await;
        assert!(result.is_err());
        assert_eq!(tries, 1);
    }
}
