//! Criterion benches of the hot paths against a real PostgreSQL (a fresh migrated database,
//! found as the tests find theirs): bulk enqueue by COPY and by one INSERT, and the round trip
//! of one job through an idle worker (enqueue → claim → run → completion → `wait` returns).
//! `remuda bench` measures the whole system; these isolate the pieces.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use remuda::testing::TestDatabase;
use remuda::{JobContext, NewJob, Task, TaskError, Worker, WorkerConfig};
use std::time::Duration;

struct Noop;

impl Task for Noop {
    const KIND: &'static str = "noop";
    type Args = serde_json::Value;
    type Output = ();

    async fn run(&self, _ctx: JobContext, _args: serde_json::Value) -> Result<(), TaskError> {
        Ok(())
    }
}

fn jobs(n: usize) -> Vec<NewJob> {
    (0..n)
        .map(|i| NewJob::from_json("noop", remuda::Jsonb(format!("{{\"i\":{i}}}"))))
        .collect()
}

fn hot_paths(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (db, client) = runtime.block_on(async {
        let db = TestDatabase::new().await.expect("test database");
        let client = db.client().await.expect("client");
        (db, client)
    });

    let mut group = c.benchmark_group("enqueue");
    group.throughput(Throughput::Elements(1000));
    group.bench_function("insert_bulk (COPY), 1000 jobs", |b| {
        b.to_async(&runtime).iter_batched(
            || jobs(1000),
            |batch| {
                let client = client.clone();
                async move { client.insert_bulk(&batch).await.expect("insert") }
            },
            BatchSize::SmallInput,
        )
    });
    group.bench_function("insert_many (one INSERT), 1000 jobs", |b| {
        b.to_async(&runtime).iter_batched(
            || jobs(1000),
            |batch| {
                let client = client.clone();
                async move { client.insert_many(&batch).await.expect("insert") }
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();

    // Only the round-trip jobs are runnable from here on.
    runtime.block_on(async {
        let conn = client.database().conn().await.expect("conn");
        conn.batch_execute("TRUNCATE remuda.jobs")
            .await
            .expect("truncate");
    });
    let stop = tokio_util::sync::CancellationToken::new();
    let token = stop.clone();
    let worker = Worker::new(client.clone())
        .config(WorkerConfig {
            concurrency: 16,
            ..WorkerConfig::default()
        })
        .register(Noop);
    let handle = runtime.spawn(worker.run(async move { token.cancelled().await }));
    runtime.block_on(async { tokio::time::sleep(Duration::from_millis(300)).await });
    c.bench_function("round trip: enqueue, run, wait for the result", |b| {
        b.to_async(&runtime).iter(|| {
            let client = client.clone();
            async move {
                let id = client
                    .insert(NewJob::new("noop", &1).expect("job"))
                    .await
                    .expect("insert");
                client
                    .wait(id, Duration::from_secs(10))
                    .await
                    .expect("done")
            }
        })
    });
    stop.cancel();
    let _ = runtime.block_on(handle);
    drop(client);
    drop(db);
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(5));
    targets = hot_paths
}
criterion_main!(benches);
