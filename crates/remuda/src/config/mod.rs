//! Configuration types below the parts that use them (the worker, maintenance, the client's
//! queue settings): what a worker runs with and how long what has ended is kept. A leaf: it
//! names nothing of the crate but names, durations, job states and notification settings.

mod retention;
mod worker;

pub use retention::{Keep, Retention};
pub use worker::{QueueOrder, WorkerConfig, MAX_CONCURRENCY};
