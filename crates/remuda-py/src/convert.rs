//! Crossing the boundary: the shared tokio runtime, remuda's errors as Python's
//! `remuda.RemudaError`, JSON text in and out.

use pyo3::prelude::*;
use std::sync::OnceLock;

/// The one runtime every client and worker of the process runs on.
pub fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("remuda")
        .build()
        .map_err(|e| error("SETUP", &format!("cannot start the tokio runtime: {e}")))?;
    Ok(RUNTIME.get_or_init(|| rt))
}

/// Runs `future` on the runtime with the GIL released, so that Python threads go on.
pub fn block_on<F, T>(py: Python<'_>, future: F) -> PyResult<T>
where
    F: std::future::Future<Output = remuda::Result<T>> + Send,
    T: Send,
{
    let rt = runtime()?;
    py.allow_threads(|| rt.block_on(future))
        .map_err(from_remuda)
}

/// `remuda.RemudaError(code, message)` (for `BAD_INPUT`, the subclass that is also a
/// `ValueError`), made in Python: the classes live in the package.
pub fn error(code: &str, message: &str) -> PyErr {
    Python::with_gil(|py| {
        let class = py.import("remuda.errors").and_then(|m| m.getattr("make"));
        match class.and_then(|c| c.call1((code, message))) {
            Ok(instance) => PyErr::from_value(instance),
            Err(e) => e,
        }
    })
}

/// A remuda error with the code scripts and the CLI know it by.
pub fn from_remuda(e: remuda::Error) -> PyErr {
    use remuda::Error as E;
    let code = match &e {
        E::WaitTimeout { .. } | E::WorkflowWaitTimeout { .. } => "WAIT_TIMEOUT",
        E::NotFound(_) | E::WorkflowNotFound(_) | E::ScheduleNotFound(_) => "NOT_FOUND",
        E::WrongState { .. } | E::WorkflowWrongState { .. } => "WRONG_STATE",
        E::WorkflowDrift { .. } => "DRIFT",
        E::InvalidWorkflow(_) => "INVALID_SPEC",
        E::QueueFull(_) => "QUEUE_FULL",
        E::UniqueConflict(_) => "UNIQUE_CONFLICT",
        E::SchemaMissing | E::SchemaTooOld { .. } | E::SchemaTooNew { .. } => "SCHEMA",
        E::InvalidInput(_) | E::Json(_) => "BAD_INPUT",
        e if e.is_bad_data() => "BAD_INPUT",
        _ => "DATABASE",
    };
    error(code, &remuda::error_chain(&e))
}

/// JSON text parsed, or a `BAD_INPUT` error saying which value was not JSON.
pub fn parse<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> PyResult<T> {
    serde_json::from_str(text).map_err(|e| error("BAD_INPUT", &format!("{what}: {e}")))
}

/// A value as JSON text.
pub fn text(value: &impl serde::Serialize) -> PyResult<String> {
    serde_json::to_string(value)
        .map_err(|e| error("BAD_INPUT", &format!("cannot encode JSON: {e}")))
}
