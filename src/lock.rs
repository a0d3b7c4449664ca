//! Poison-tolerant locking of the crate's `std` mutexes.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `m`, also when a thread panicked while holding it: every critical section that uses
/// this leaves its data consistent (single inserts, removes and replacements), so a poisoned
/// lock is still safe to use, and one panicking request must not take the gateway down.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
