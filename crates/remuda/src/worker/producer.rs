//! The producer: claims jobs for free concurrency slots and starts them. One claim statement
//! per queue fills up to the free slots (`claim.sql`, one round trip; a queue with limits goes
//! through `claim_limited.sql`, and a paused one is skipped). Queues take turns (weighted
//! round robin) or go in order (strict). It claims again at once while claims come back full;
//! when its queues run dry it sleeps until a `remuda_insert` notification for one of them, a
//! reconnect of the listener, or the poll interval. It claims nothing while the worker is
//! fenced, and after a failed claim it first releases jobs claimed without an answer.

use super::claim::{claim, claim_limited, release_orphans, walk_by_kind};
use super::executor::{self, Claimed};
use super::{Running, Shared};
use crate::runtime::lock;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A claim made right after a `remuda_insert` notification can find nothing: PostgreSQL may
/// deliver the notification a moment before the inserting transaction is visible to new
/// snapshots (observed here: about 1 wake-up in 4 in a one-job-at-a-time loop, each then
/// waiting out the poll interval; under heavy load the moment can last milliseconds). So an
/// empty claim after a notification is retried 1, 2, 4, … 32 ms later (63 ms in all) before
/// the producer sleeps again. Each retry is one probe of an empty index.
const RECHECKS: u32 = 6;

/// How long a producer that has more work than slots waits for more slots to free up, so
/// that claims stay large instead of one row each.
const FILL_WAIT: Duration = Duration::from_millis(2);

pub(crate) async fn run(shared: Arc<Shared>, stop: CancellationToken, drained: CancellationToken) {
    let kinds: Vec<String> = shared.tasks.keys().cloned().collect();
    let defaults: Vec<i32> = kinds
        .iter()
        .map(|k| shared.tasks.get(k).map_or(1, |t| t.options.max_attempts))
        .collect();
    let queues = shared.config.queues.clone();
    // round robin: the queue each round starts with, each queue as often as its weight
    let rotation: Vec<usize> = (0..queues.len())
        .flat_map(|i| {
            let weight = shared
                .config
                .queue_weights
                .get(&queues[i])
                .copied()
                .unwrap_or(1);
            std::iter::repeat_n(i, weight.max(1) as usize)
        })
        .collect();
    let mut start = 0usize;
    let mut error_delay = Duration::from_millis(100);
    let mut more = true;
    // as if notified at start: a job announced just before this worker subscribed may still be
    // invisible to its first claim (see RECHECKS)
    let mut notified = true;
    let mut rechecks = 0u32;
    let mut drain_confirmed = false;
    // draining: since when this worker waits for retries to fall due
    let mut retry_wait_since: Option<std::time::Instant> = None;
    // draining: whether it claimed again for a retry found available after a claim
    let mut looked_again = false;
    // per key-limited queue: the last concurrency key served (keys take turns from there)
    let mut cursors: std::collections::HashMap<String, String> = Default::default();
    // per key-limited queue: when its last deep claim was (see claim_limited.sql)
    let mut deep_claims: std::collections::HashMap<String, std::time::Instant> = Default::default();
    // per plain queue: whether its claims walk by kind, and since when (see walk_by_kind)
    let mut walks: std::collections::HashMap<String, (std::time::Instant, bool)> =
        Default::default();
    // a claim failed: its statement may have committed with the answer lost
    let mut uncertain = false;
    loop {
        if stop.is_cancelled() {
            return;
        }
        crate::runtime::supervise::fault_point("producer");
        // fenced: claim nothing until the heartbeat gets through (it wakes us)
        if shared.fenced.load(Ordering::SeqCst) {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = shared.wake.notified() => {}
                _ = tokio::time::sleep(shared.config.poll_interval) => {}
            }
            continue;
        }
        if uncertain {
            // (waits for the completer, which waits for the database: never past a stop)
            let checked = tokio::select! {
                _ = stop.cancelled() => return,
                checked = release_orphans(&shared) => checked,
            };
            shared.stats.orphan_checks.fetch_add(1, Ordering::Relaxed);
            match checked {
                Ok(released) => {
                    uncertain = false;
                    if released > 0 {
                        tracing::warn!("remuda producer: released {released} jobs claimed by a statement whose answer was lost");
                    }
                }
                Err(e) => {
                    tracing::warn!(
                        "remuda producer: cannot check for jobs claimed without an answer: {e}"
                    );
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tokio::time::sleep(jittered(error_delay)) => {}
                    }
                    error_delay = (error_delay * 2).min(MAX_ERROR_DELAY);
                    continue;
                }
            }
        }
        // A slot must be free; when work is waiting, let a few more free up first.
        if shared.slots.available_permits() == 0 {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = shared.slot_freed.notified() => {}
            }
            continue;
        }
        if more {
            let want = shared.fill_target as u32;
            if (shared.slots.available_permits() as u32) < want {
                let _ = tokio::time::timeout(FILL_WAIT, shared.slots.acquire_many(want)).await;
            }
        }
        more = false;
        let mut failed = false;
        let mut claimed = 0usize;
        // a rate-limited queue that came back short: when its bucket will have refilled
        let mut tokens_due: Option<Duration> = None;
        for offset in 0..queues.len() {
            let first = match shared.config.queue_order {
                super::QueueOrder::Strict => 0,
                super::QueueOrder::RoundRobin => rotation[start % rotation.len()],
            };
            let queue = &queues[(first + offset) % queues.len()];
            let free = shared
                .slots
                .available_permits()
                .min(shared.config.claim_batch);
            if free == 0 {
                more = true;
                break;
            }
            let settings = shared.settings.queue(queue);
            if settings.as_ref().is_some_and(|s| s.paused) {
                continue;
            }
            let cluster_cap = shared.settings.cluster_max_running().is_some();
            let limited = cluster_cap || settings.as_ref().is_some_and(|s| s.limits_claims());
            let epoch = shared.epoch.load(Ordering::SeqCst);
            // keys take turns from the cursor, or groups share by weight; caps and a
            // queue-wide rate need neither. A deep claim (jobs without a key or group looked
            // for through the whole queue) at most once a poll interval per queue
            let fair = settings
                .as_ref()
                .is_some_and(|s| s.fairness != crate::Fairness::None);
            let keyed = fair
                || settings.as_ref().is_some_and(|s| {
                    s.key_limit.is_some()
                        || (s.rate.is_some() && s.rate_per != crate::RatePer::Queue)
                });
            let deep = keyed
                && deep_claims
                    .get(queue)
                    .is_none_or(|at| at.elapsed() >= shared.config.poll_interval);
            if deep {
                deep_claims.insert(queue.clone(), std::time::Instant::now());
            }
            let claiming = async {
                if limited {
                    let keyed =
                        keyed.then(|| (cursors.get(queue).map_or("", String::as_str), deep));
                    let (jobs, last_key) =
                        claim_limited(&shared, queue, &kinds, &defaults, free as i64, keyed)
                            .await?;
                    Ok::<_, crate::Error>((jobs, last_key))
                } else {
                    let by_kind = match walks.get(queue) {
                        Some((at, by_kind)) if at.elapsed() < shared.config.poll_interval => {
                            *by_kind
                        }
                        _ => {
                            let limit = shared.config.claim_batch as i64;
                            let by_kind = walk_by_kind(&shared, queue, &kinds, limit).await?;
                            walks.insert(queue.clone(), (std::time::Instant::now(), by_kind));
                            by_kind
                        }
                    };
                    Ok((
                        claim(&shared, queue, &kinds, &defaults, free as i64, by_kind).await?,
                        None,
                    ))
                }
            };
            match claiming.await.map(|(jobs, last_key)| {
                if let Some(key) = last_key {
                    cursors.insert(queue.clone(), key);
                }
                jobs
            }) {
                Ok(jobs) => {
                    let full = jobs.len() == free;
                    // short but not empty: the tokens may have run out (an empty claim of a
                    // drained queue waits for a notification or the poll, not the tokens)
                    if !full && !jobs.is_empty() {
                        if let Some(wait) = settings.as_ref().and_then(|s| refill_wait(s, free)) {
                            tokens_due = Some(tokens_due.map_or(wait, |w| w.min(wait)));
                        }
                    }
                    // a fair claim takes each group's share of the slots it asked for, as
                    // far as that group has jobs this worker may run: short but not empty,
                    // the others may have more
                    if full || (fair && !jobs.is_empty()) {
                        more = true;
                    }
                    claimed += jobs.len();
                    #[cfg(feature = "testing")]
                    if !jobs.is_empty() {
                        crate::testing::fault::pass("claimed").await;
                    }
                    for job in jobs {
                        start_job(&shared, job, epoch);
                    }
                    // strict order: a later queue is claimed from only once every earlier one
                    // came back short (slots that free up meanwhile go to the first queue)
                    if full && shared.config.queue_order == super::QueueOrder::Strict {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!("remuda producer: claim from queue {queue} failed: {e}");
                    failed = true;
                    // only a claim whose answer was lost may have taken jobs: a refused one
                    // (it has a SQLSTATE) took nothing, and needs no scan for orphans
                    uncertain |= e.outcome_unknown();
                    break;
                }
            }
        }
        if shared.config.queue_order == super::QueueOrder::RoundRobin {
            start = start.wrapping_add(1);
        }
        if failed {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(jittered(error_delay)) => {}
            }
            error_delay = (error_delay * 2).min(MAX_ERROR_DELAY);
            continue;
        }
        error_delay = Duration::from_millis(100);
        let idle = shared.slots.available_permits() == shared.config.concurrency;
        if claimed == 0 && !more && idle && shared.config.exit_when_drained {
            // outcomes still being written may make jobs available again (a retry without
            // backoff): wait for them, then look once more
            let (done, written) = tokio::sync::oneshot::channel();
            if shared
                .completer
                .send(super::completer::Outcome::Flush(done))
                .await
                .is_ok()
            {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = written => {}
                }
            }
            if !drain_confirmed {
                drain_confirmed = true;
                continue;
            }
            // a retry falls due soon: wait for it (the leader promotes it), then drain on;
            // but never longer than drain_wait and two promotions in all, should no leader
            // promote it (every worker with maintenance off)
            let patience = shared.config.drain_wait + shared.config.promote_interval * 2;
            let since = *retry_wait_since.get_or_insert_with(std::time::Instant::now);
            #[cfg(feature = "testing")]
            crate::testing::fault::pass("drain check").await;
            let Left {
                next_retry: due,
                available_retry,
            } = match since.elapsed() < patience {
                true => left(&shared, &kinds).await,
                false => Left::default(),
            };
            // a retry promoted after the claim that found nothing: one more look takes it
            // (a second that finds it still there cannot: another worker's, or held back)
            if available_retry && !looked_again {
                looked_again = true;
                continue;
            }
            if let Some(due) = due {
                drain_confirmed = false;
                // (each wait for a retry gets its own extra look: one taken earlier by a
                // retry this worker cannot claim must not cost the next its run)
                looked_again = false;
                let wait = (due - chrono::Utc::now())
                    .to_std()
                    .unwrap_or_default()
                    .max(Duration::from_millis(50));
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = shared.wake.notified() => {}
                    _ = tokio::time::sleep(wait + Duration::from_millis(20)) => {}
                }
                continue;
            }
            drained.cancel();
            return;
        }
        if claimed > 0 {
            drain_confirmed = false;
            retry_wait_since = None;
            looked_again = false;
        }
        if claimed > 0 {
            rechecks = 0;
        } else if notified && rechecks < RECHECKS {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_millis(1 << rechecks)) => {}
            }
            rechecks += 1;
            continue;
        }
        if !more {
            notified = tokio::select! {
                _ = stop.cancelled() => return,
                _ = shared.wake.notified() => true,
                // draining: look again as soon as a running job ends
                _ = shared.slot_freed.notified(), if shared.config.exit_when_drained => false,
                _ = tokio::time::sleep(tokens_due.unwrap_or(shared.config.poll_interval).min(shared.config.poll_interval)) => false,
            };
            rechecks = 0;
        }
    }
}

/// How long a rate-limited queue that came back short (`free` slots wanted) waits before
/// its next claim: until a quarter of the tokens it could use have come back, at least 5 ms
/// (not at the next poll, which for a period shorter than `poll_interval` would leave the
/// rate unused; and not a token at a time, a claim per token). It can use no more than its
/// bucket holds (the burst): waiting for more would lose what the full bucket no longer
/// takes. `None` for a queue without a rate limit.
fn refill_wait(settings: &crate::QueueSettings, free: usize) -> Option<Duration> {
    let (n, period) = settings.rate?;
    let n = u32::try_from(n).ok().filter(|&n| n > 0)?;
    let held = settings
        .rate_burst
        .and_then(|b| u32::try_from(b).ok())
        .unwrap_or(n)
        .clamp(1, n);
    let wanted = u32::try_from(free).unwrap_or(u32::MAX).clamp(1, held);
    Some((period * wanted / n / 4).max(Duration::from_millis(5)))
}

/// Longest wait between attempts while the database fails.
const MAX_ERROR_DELAY: Duration = Duration::from_secs(5);

/// `delay` plus up to 25% at random, so that workers cut off together do not come back in step.
fn jittered(delay: Duration) -> Duration {
    delay + delay.mul_f64(fastrand::f64() / 4.0)
}

/// Registers the job as running (before its executor exists, so that the orphan check and
/// cancels see it at once) and starts it, unless the worker was fenced since the claim was
/// sent (`epoch`): then the job may already be rescued (claimed before a death verdict), and
/// it is given back, guarded. The check and the registration happen under the lock that
/// fencing takes, so a fence cannot slip between them.
fn start_job(shared: &Arc<Shared>, job: Claimed, epoch: u64) {
    // Only the producer takes slots, so one is free for every claimed row; if that ever
    // fails, give the job back rather than run over the limit.
    let Ok(permit) = shared.slots.clone().try_acquire_owned() else {
        give_back(shared, job);
        return;
    };
    let stop = Running::new((job.attempt, job.started_at));
    {
        let mut running = lock(&shared.running);
        if shared.fenced.load(Ordering::SeqCst) || shared.epoch.load(Ordering::SeqCst) != epoch {
            drop(running);
            drop(permit);
            give_back(shared, job);
            return;
        }
        // an earlier run of this job still ending here (taken from this worker and given
        // back to it, its outcome stale) leaves the map, where the check of its runs and a
        // shutdown would find it: it is stopped now, as that check stops a run taken over
        if let Some(earlier) = running.insert(job.id, stop.clone()) {
            earlier.stop(crate::task::StopReason::Cancel, shared.config.cancel_grace);
        }
        // every job was asked to stop before this one was registered
        if shared.stopping.load(Ordering::SeqCst) {
            stop.soft.cancel();
        }
    }
    // a cancel of this run heard before it was registered (not one of an earlier run)
    let early = lock(&shared.early_cancels).remove(&job.id);
    if early.is_some_and(|(attempt, _)| attempt.is_none_or(|a| a == job.attempt)) {
        stop.stop(crate::task::StopReason::Cancel, shared.config.cancel_grace);
    }
    tokio::spawn(executor::execute(shared.clone(), job, stop, permit));
}

/// Releases a claimed job without running it (guarded by worker and attempt).
fn give_back(shared: &Arc<Shared>, job: Claimed) {
    let shared = shared.clone();
    tokio::spawn(async move {
        let _ = shared
            .completer
            .send(super::completer::Outcome::Release { run: job.run() })
            .await;
    });
}

/// What a draining worker may still have to run: when the first retry of its queues and
/// kinds that falls due within `drain_wait` does, and whether one is available now.
#[derive(Default)]
struct Left {
    next_retry: Option<chrono::DateTime<chrono::Utc>>,
    available_retry: bool,
}

/// [`Left`] for this worker's queues and kinds (a draining worker waits for such retries). A
/// failed lookup counts as none: the worker then stops as drained, and the job stays
/// scheduled for the next run.
async fn left(shared: &Shared, kinds: &[String]) -> Left {
    let window = i64::try_from(shared.config.drain_wait.as_millis()).unwrap_or(i64::MAX);
    let Ok(conn) = shared.db.conn().await else {
        return Left::default();
    };
    let Ok(row) = conn
        .query_one(
            crate::sql::SCHEDULED_LEFT,
            &[&shared.config.queues, &kinds, &window],
        )
        .await
    else {
        return Left::default();
    };
    Left {
        next_retry: row.try_get("next_retry").ok().flatten(),
        available_retry: row.try_get("available_retry").unwrap_or(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_claim_waits_for_the_tokens_its_bucket_can_hold_not_more() {
        let mut settings = crate::QueueSettings::new("q");
        assert_eq!(refill_wait(&settings, 32), None, "no rate, no wait");
        settings.rate = Some((100, Duration::from_secs(1)));
        // a quarter of the refill of 32 tokens
        assert_eq!(refill_wait(&settings, 32), Some(Duration::from_millis(80)));
        // a bucket of 1 holds no more than the one token: a claim at each, not 12 a second
        settings.rate_burst = Some(1);
        assert_eq!(refill_wait(&settings, 32), Some(Duration::from_millis(5)));
        settings.rate_burst = Some(20);
        assert_eq!(refill_wait(&settings, 32), Some(Duration::from_millis(50)));
    }
}
