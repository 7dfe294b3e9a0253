//! Scratch databases for the Python benchmark, as `remuda bench` makes them: created and
//! migrated beside the given database (`<database>_suffix`), dropped afterwards, so that a
//! benchmark never reads or deletes a user's jobs.

use crate::convert::{error, from_remuda, runtime};
use pyo3::prelude::*;
use remuda_cli::error::CliError;

fn from_cli(e: CliError) -> PyErr {
    match e {
        CliError::Remuda(e) => from_remuda(e),
        CliError::Usage(message) => error("BAD_INPUT", &message),
    }
}

/// Creates (afresh) and migrates `<database>_suffix` beside `database_url`: its URL.
#[pyfunction]
pub fn scratch_database(py: Python<'_>, database_url: &str, suffix: &str) -> PyResult<String> {
    let rt = runtime()?;
    py.allow_threads(|| {
        rt.block_on(async {
            let admin = remuda::Database::new(database_url, 2).map_err(CliError::from)?;
            let db = remuda_cli::scratch::create(&admin, suffix, 2).await?;
            Ok(remuda::db::conninfo(db.config(), None))
        })
    })
    .map_err(from_cli)
}

/// Drops `<database>_suffix` beside `database_url`, if it exists.
#[pyfunction]
pub fn drop_scratch_database(py: Python<'_>, database_url: &str, suffix: &str) -> PyResult<()> {
    let rt = runtime()?;
    py.allow_threads(|| {
        rt.block_on(async {
            let admin = remuda::Database::new(database_url, 2).map_err(CliError::from)?;
            remuda_cli::scratch::drop(&admin, suffix).await
        })
    })
    .map_err(from_cli)
}
