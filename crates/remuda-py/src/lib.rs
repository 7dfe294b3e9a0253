//! `remuda._native`: the Rust core under the `remuda` Python package. The client (enqueue,
//! wait, workflows) and the worker runtime (claims, heartbeats, fencing, retries, batched
//! completions) run in Rust on one tokio runtime; only task bodies run in Python, handed to
//! the package's dispatcher (a thread pool, an asyncio loop or a process pool).
//!
//! Everything crosses the boundary as JSON text, which both sides parse with their fastest
//! parser; errors arrive in Python as `remuda.RemudaError(code, message)`.

mod bench;
mod client;
mod convert;
mod options;
mod schedules;
mod worker;

use pyo3::prelude::*;

/// The module: the `Client` and `Worker` classes.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<client::Client>()?;
    m.add_class::<client::Waiting>()?;
    m.add_class::<worker::Worker>()?;
    m.add_class::<worker::Done>()?;
    m.add_class::<worker::Steps>()?;
    m.add_function(wrap_pyfunction!(client::database_url, m)?)?;
    m.add_function(wrap_pyfunction!(client::finish_waits, m)?)?;
    m.add_function(wrap_pyfunction!(schedules::check_schedule, m)?)?;
    m.add_function(wrap_pyfunction!(options::check_send, m)?)?;
    m.add_function(wrap_pyfunction!(worker::supervise, m)?)?;
    m.add_function(wrap_pyfunction!(worker::log_worker, m)?)?;
    m.add_function(wrap_pyfunction!(bench::scratch_database, m)?)?;
    m.add_function(wrap_pyfunction!(bench::drop_scratch_database, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
