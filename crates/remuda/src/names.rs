//! The rule every kind, queue, worker, capability and schedule name follows, checked where a
//! name comes in (a job, a task, a worker's configuration, a schedule, a workflow node), as
//! `remuda.check_name` checks it in SQL. A leaf: it names nothing of the crate but its error.

use crate::{Error, Result};

/// Longest kind, queue or worker name accepted, in bytes. Names go into indexes, into
/// `pg_notify` payloads (at most 8 000 bytes) and into the CLI's tables.
pub const MAX_NAME: usize = 200;

/// Checks a kind, queue, worker or capability name: not empty or blank, at most
/// [`MAX_NAME`] bytes, no control characters (a tab or newline would break every table and
/// log line that shows it).
pub fn check_name(what: &str, name: &str) -> Result<()> {
    if name.trim().is_empty() {
        return Err(Error::InvalidInput(format!("the {what} name is empty")));
    }
    if name.len() > MAX_NAME {
        return Err(Error::InvalidInput(format!(
            "the {what} name is {} bytes, over the limit of {MAX_NAME}: use a shorter name",
            name.len()
        )));
    }
    if let Some(c) = name.chars().find(|c| c.is_control()) {
        return Err(Error::InvalidInput(format!(
            "the {what} name {name:?} contains the control character {c:?}: names may not contain tabs, newlines or other control characters"
        )));
    }
    Ok(())
}

/// Checks a group name (a tenant, an account: see `NewJob::group`): 1 to `max` bytes, no
/// control characters, as a queue name (a tab or newline broke `remuda queue groups`).
pub fn check_group(group: &str, max: usize) -> std::result::Result<(), String> {
    if group.is_empty() || group.len() > max {
        return Err(format!("the group must be 1 to {max} bytes"));
    }
    if let Some(c) = group.chars().find(|c| c.is_control()) {
        return Err(format!(
            "the group {group:?} contains the control character {c:?}: groups may not contain tabs, newlines or other control characters"
        ));
    }
    Ok(())
}
