//! A step's own retries and time limit ([`JobContext::step_with`]): a step that calls a
//! flaky service is tried again inside the attempt, before its error reaches the job's retry
//! policy (which would run the whole task again, replaying the steps before it).

use crate::retry::Backoff;
use crate::task::{JobContext, TaskError};
use serde::{de::DeserializeOwned, Serialize};
use std::future::Future;
use std::time::Duration;

/// Error code of a step that ran over its [`StepOptions::timeout`] on its last try.
pub const STEP_TIMEOUT: &str = "STEP_TIMEOUT";

/// How a step is run: tries after the first, the wait between tries, and each try's time
/// limit. The default runs it once, without a limit (as [`JobContext::step`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepOptions {
    /// Tries after the first, for an error that is not permanent (a timeout is not).
    pub retries: u32,
    /// The wait before try `n + 1` after try `n` failed.
    pub backoff: Backoff,
    /// Each try's time limit: a try that runs over it is dropped and fails with
    /// [`STEP_TIMEOUT`].
    pub timeout: Option<Duration>,
}

impl StepOptions {
    /// `retries` tries after the first, with the default backoff (exponential from 1 s).
    pub fn retries(retries: u32) -> StepOptions {
        StepOptions {
            retries,
            ..StepOptions::default()
        }
    }

    /// The same, each try limited to `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> StepOptions {
        self.timeout = Some(timeout);
        self
    }

    /// The same, waiting as `backoff` says between tries.
    pub fn backoff(mut self, backoff: Backoff) -> StepOptions {
        self.backoff = backoff;
        self
    }
}

impl JobContext {
    /// [`JobContext::step`] with the step's own retries and time limit: `run` is tried until
    /// it succeeds, fails permanently ([`TaskError::permanent`]), or has been tried
    /// `1 + retries` times, each try cut at `timeout`; only the outcome is recorded. A stop of
    /// the job (cancel, shutdown) ends the waits between tries, and the step's last error is
    /// the attempt's.
    ///
    /// ```no_run
    /// # use remuda::{JobContext, TaskError, step::StepOptions};
    /// # use std::time::Duration;
    /// # async fn run(ctx: JobContext) -> Result<String, TaskError> {
    /// let options = StepOptions::retries(3).timeout(Duration::from_secs(10));
    /// let quote: String = ctx
    ///     .step_with("quote", options, || async { Ok("42.10".to_string()) })
    ///     .await?;
    /// # Ok(quote) }
    /// ```
    pub async fn step_with<T, F, Fut>(
        &self,
        name: &str,
        options: StepOptions,
        mut run: F,
    ) -> Result<T, TaskError>
    where
        T: Serialize + DeserializeOwned,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, TaskError>>,
    {
        if let Err(e) = options.backoff.validate() {
            return Err(TaskError::permanent(
                super::INVALID_STEP,
                format!("step {name:?}: {e}"),
            ));
        }
        self.step(name, || async move {
            let mut tried: u32 = 0;
            loop {
                tried += 1;
                let outcome = match options.timeout {
                    None => run().await,
                    Some(limit) => tokio::time::timeout(limit, run())
                        .await
                        .unwrap_or_else(|_| {
                            Err(TaskError::new(
                                STEP_TIMEOUT,
                                format!(
                                    "step {name:?} ran over its time limit of {} (try {tried})",
                                    crate::duration::format(limit)
                                ),
                            ))
                        }),
                };
                match outcome {
                    Err(e)
                        if tried <= options.retries
                            && e.retryable != Some(false)
                            && e.snooze.is_none()
                            && !self.is_cancelled() =>
                    {
                        let wait = options
                            .backoff
                            .delay(i32::try_from(tried).unwrap_or(i32::MAX));
                        tracing::debug!(step = name, tried, error = %e.message, "remuda: step to be tried again");
                        tokio::select! {
                            _ = tokio::time::sleep(wait) => {}
                            _ = self.cancelled() => return Err(e),
                        }
                    }
                    other => return other,
                }
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A job's context outside a worker, as a task's unit test makes one.
    fn detached() -> JobContext {
        JobContext {
            id: 1,
            kind: "k".into(),
            queue: "default".into(),
            attempt: 1,
            max_attempts: 1,
            worker_id: "w".into(),
            timeout: None,
            cancel: tokio_util::sync::CancellationToken::new(),
            stop: Default::default(),
            workflow: None,
            steps: crate::step::Steps::default(),
            trace: None,
            group: None,
        }
    }

    fn fixed() -> Backoff {
        Backoff::Fixed {
            delay: Duration::from_millis(1),
            jitter: false,
        }
    }

    #[tokio::test]
    async fn a_step_is_tried_again_until_it_succeeds_and_only_its_outcome_is_recorded() {
        let ctx = detached();
        let tries = AtomicU32::new(0);
        let got: u32 = ctx
            .step_with(
                "flaky",
                StepOptions::retries(3).backoff(fixed()),
                || async {
                    let n = tries.fetch_add(1, Ordering::SeqCst) + 1;
                    if n < 3 {
                        Err(TaskError::new("UPSTREAM", format!("try {n}")))
                    } else {
                        Ok(n)
                    }
                },
            )
            .await
            .expect("third try");
        assert_eq!(got, 3);
        // recorded: a second call replays without running
        let again: u32 = ctx
            .step_with("flaky", StepOptions::default(), || async {
                Err(TaskError::new("RAN", "ran again"))
            })
            .await
            .expect("replayed");
        assert_eq!(again, 3);
    }

    #[tokio::test]
    async fn a_permanent_error_is_not_tried_again_and_the_tries_run_out() {
        let ctx = detached();
        let tries = AtomicU32::new(0);
        let err = ctx
            .step_with::<u32, _, _>("bad", StepOptions::retries(5).backoff(fixed()), || async {
                tries.fetch_add(1, Ordering::SeqCst);
                Err(TaskError::permanent("BAD", "no"))
            })
            .await
            .expect_err("permanent");
        assert_eq!(
            (err.code.as_str(), tries.load(Ordering::SeqCst)),
            ("BAD", 1)
        );
        let tries = AtomicU32::new(0);
        let err = ctx
            .step_with::<u32, _, _>("down", StepOptions::retries(2).backoff(fixed()), || async {
                tries.fetch_add(1, Ordering::SeqCst);
                Err(TaskError::new("DOWN", "still"))
            })
            .await
            .expect_err("out of tries");
        assert_eq!(
            (err.code.as_str(), tries.load(Ordering::SeqCst)),
            ("DOWN", 3)
        );
    }

    #[tokio::test]
    async fn a_try_over_its_time_limit_is_dropped_and_fails_with_step_timeout() {
        let ctx = detached();
        let err = ctx
            .step_with::<u32, _, _>(
                "slow",
                StepOptions::default().timeout(Duration::from_millis(20)),
                || async {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    Ok(1)
                },
            )
            .await
            .expect_err("timed out");
        assert_eq!(err.code, STEP_TIMEOUT);
        assert!(err.message.contains("20ms"), "{}", err.message);
    }
}
