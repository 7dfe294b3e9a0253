//! Schedules declared in Python (`@app.schedule`): each is a `[schedules.NAME]` table of the
//! worker config as JSON, read by the config's own code, so both ways of declaring one take
//! the same keys and say the same errors. Checked when declared, and declared (created or
//! replaced) by the worker as it starts.

use crate::convert::error;
use pyo3::prelude::*;
use remuda::schedule::Schedule;
use remuda_cli::config::schedules::ScheduleSection;

/// The schedule `table` declares under `name`; its jobs go to `queue` unless it names one.
/// Errors say `schedule NAME: …`, the key first where one is wrong.
pub fn from_table(
    name: &str,
    table: serde_json::Value,
    queue: Option<&str>,
) -> Result<Schedule, String> {
    // (the config's errors name the table, and the schedule's own checks the schedule)
    let own = |e: String| {
        let e = e
            .strip_prefix(&format!("[schedules.{name}] "))
            .unwrap_or(&e);
        let e = e.strip_prefix(&format!("schedule {name}: ")).unwrap_or(e);
        format!("schedule {name}: {e}")
    };
    let section: ScheduleSection = serde_json::from_value(table).map_err(|e| own(e.to_string()))?;
    section.schedule(name, queue).map_err(own)
}

/// Checks a schedule as `@app.schedule` declares it (`table` as JSON text): `BAD_INPUT`
/// saying what is wrong, at declaration rather than when a worker starts.
#[pyfunction]
#[pyo3(signature = (name, table, queue = None))]
pub fn check_schedule(name: &str, table: &str, queue: Option<&str>) -> PyResult<()> {
    let table: serde_json::Value = crate::convert::parse("schedule", table)?;
    from_table(name, table, queue)
        .map(|_| ())
        .map_err(|e| error("BAD_INPUT", &e))
}
