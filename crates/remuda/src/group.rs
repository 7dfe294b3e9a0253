//! The fair-share group current in a task: a running job's, or what [`scope`] set. Jobs
//! enqueued and workflows started inside it without a group of their own take it, so a
//! tenant's work keeps its group as it fans out (as trace context does, see
//! [`crate::trace`]).

use std::future::Future;

/// The environment variable a command task finds its job's group in (unset for a job
/// without one); `remuda enqueue` and `remuda workflow start` run inside it take it.
pub const ENV: &str = "REMUDA_JOB_GROUP";

tokio::task_local! {
    static CURRENT: Option<String>;
}

/// The group current in this task: the running job's inside a task, or what [`scope`] set.
pub fn current() -> Option<String> {
    CURRENT.try_with(Clone::clone).ok().flatten()
}

/// Runs `future` with `group` as the current group: jobs it enqueues and workflows it starts
/// without a group of their own take it (`None`: they take none).
/// A plain function, not an `async fn`, for the reason [`crate::trace::scope`] gives.
pub fn scope<F: Future>(
    group: Option<String>,
    future: F,
) -> tokio::task::futures::TaskLocalFuture<Option<String>, F> {
    CURRENT.scope(group, future)
}

/// Refuses the current group when no job could have it (a [`scope`] given an empty name or
/// one with a control character), before anything takes it.
pub(crate) fn check_current() -> crate::Result<()> {
    match current() {
        Some(group) => {
            crate::names::check_group(&group, crate::client::MAX_UNIQUE_KEY).map_err(|what| {
                crate::Error::InvalidInput(format!("the current group (group::scope): {what}"))
            })
        }
        None => Ok(()),
    }
}

/// Calls `f` with `group` as the current group (what [`scope`] does for a future).
pub(crate) fn sync_scope<R>(group: Option<String>, f: impl FnOnce() -> R) -> R {
    CURRENT.sync_scope(group, f)
}
