//! Many workers on one table: every job runs exactly once and none is lost.

mod common;

use common::{fast_config, setup, start};
use remuda::{JobContext, JobState, NewJob, Task, TaskError, Worker};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const JOBS: usize = 20_000;
const WORKERS: usize = 4;

/// Counts executions per job index.
struct Count {
    seen: Arc<Vec<AtomicU32>>,
}

impl Task for Count {
    const KIND: &'static str = "count";
    type Args = usize;
    type Output = ();

    async fn run(&self, _ctx: JobContext, i: usize) -> Result<(), TaskError> {
        self.seen[i].fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_workers_run_twenty_thousand_jobs_each_exactly_once() {
    let (db, client) = setup().await;
    let jobs: Vec<NewJob> = (0..JOBS)
        .map(|i| NewJob::new("count", &i).expect("job"))
        .collect();
    client.insert_many(&jobs).await.expect("insert");
    let seen: Arc<Vec<AtomicU32>> = Arc::new((0..JOBS).map(|_| AtomicU32::new(0)).collect());
    let mut workers = Vec::new();
    let mut stats = Vec::new();
    for _ in 0..WORKERS {
        // each worker its own client and pool, as separate processes would have
        let own = db.client().await.expect("client");
        let worker = Worker::new(own)
            .config(fast_config())
            .concurrency(50)
            .register(Count { seen: seen.clone() });
        stats.push(worker.stats());
        workers.push(start(worker));
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let stats = client.queue_stats().await.expect("stats");
        let completed = stats
            .iter()
            .map(|s| s.count(JobState::Completed))
            .sum::<i64>();
        if completed == JOBS as i64 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "only {completed} of {JOBS} completed in time"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut total = 0;
    for worker in workers {
        let report = worker.shutdown().await;
        assert!(report.completed > 0, "every worker took part: {report:?}");
        total += report.completed;
    }
    assert_eq!(total, JOBS as u64);
    let written: u64 = stats.iter().map(|s| s.written.load(Ordering::SeqCst)).sum();
    assert_eq!(written, JOBS as u64, "every outcome written once");
    let counts: Vec<u32> = seen.iter().map(|c| c.load(Ordering::SeqCst)).collect();
    let wrong: Vec<(usize, u32)> = counts
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, c)| *c != 1)
        .take(10)
        .collect();
    assert!(
        wrong.is_empty(),
        "jobs not run exactly once (index, runs): {wrong:?}"
    );
}
