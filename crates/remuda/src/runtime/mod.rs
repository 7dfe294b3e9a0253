//! What the long-running parts of a worker (its own tasks, maintenance, the dispatcher) share
//! to run: supervision of background tasks and mutexes that survive a panic. A leaf below
//! `worker` and `maintenance`.

pub(crate) mod supervise;

use std::sync::Mutex;

/// Locks a mutex, recovering it if a panicking thread poisoned it (the maps stay usable).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
