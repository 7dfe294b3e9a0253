//! remuda: a durable task queue for PostgreSQL.
//!
//! Jobs are read from one table, `remuda.jobs`, partitioned in two: the jobs that can still
//! run, which any number of workers on any number of machines claim with `FOR UPDATE SKIP
//! LOCKED`, wake on LISTEN/NOTIFY, run with retries, timeouts and panic safety, and end in
//! batches that move them to the finished jobs, kept by day. A job is never lost: a
//! worker that dies has its jobs rescued, and a worker that stops gives them back.
//!
//! - [`Client`] enqueues (one, many, or inside your transaction), inspects, cancels, retries
//!   and waits for results.
//! - [`Task`] is the code a job runs; [`Worker`] runs tasks.
//! - [`migrate::run`] creates or upgrades the schema.
//! - [`testing::TestDatabase`] gives each test its own migrated database.
//!
//! ```no_run
//! use remuda::{Client, JobContext, Task, TaskError, Worker};
//!
//! struct Greet;
//! impl Task for Greet {
//!     const KIND: &'static str = "greet";
//!     type Args = String;
//!     type Output = String;
//!     async fn run(&self, _ctx: JobContext, name: String) -> Result<String, TaskError> {
//!         Ok(format!("hello, {name}"))
//!     }
//! }
//!
//! # async fn demo() -> remuda::Result<()> {
//! let client = Client::connect("postgres://localhost/app").await?;
//! let id = client.enqueue::<Greet>(&"world".to_string()).await?;
//! let worker = tokio::spawn(Worker::new(client.clone()).register(Greet).run_until_signal());
//! let job = client.wait(id, std::time::Duration::from_secs(5)).await?;
//! assert_eq!(job.result, Some(remuda::JobResult::Ok("hello, world".into())));
//! # drop(worker); Ok(()) }
//! ```

pub mod client;
mod config;
pub mod db;
pub mod duration;
mod error;
pub mod group;
pub mod job;
pub mod maintenance;
pub mod metrics;
pub mod migrate;
mod names;
pub mod notify;
pub mod retry;
mod runtime;
pub mod schedule;
pub mod sql;
pub mod step;
pub mod task;
pub mod telemetry;
#[cfg(feature = "testing")]
pub mod testing;
pub mod trace;
pub mod verify;
pub mod worker;
pub mod workflow;

pub use client::{
    BulkAction, BulkOutcome, Client, ClusterSettings, Fairness, Formation, FormationParts,
    GroupShare, Inserted, JobFilter, JobPage, MinuteActivity, NewJob, QueueActivity, QueueChange,
    QueueRetention, QueueSettings, QueueStats, RatePer, RetryOptions, Throughput, Unique,
    WorkerInfo, COUNT_CAP, DEFAULT_PAGE, MAX_PAGE,
};
pub use db::{Database, Jsonb};
pub use error::{error_chain, Error, Result};
pub use job::{AttemptError, ErrorInfo, Job, JobResult, JobState, Step};
pub use retry::Backoff;
pub use task::{DynTask, JobContext, StopReason, StopSignal, Task, TaskError, TaskOptions};
pub use trace::TraceContext;
pub use worker::{QueueOrder, Worker, WorkerConfig, WorkerReport, WorkerStats};
