//! Poison-tolerant locking of the crate's `std` locks.
//!
//! Every `Mutex` and `RwLock` of the crate is taken through these (`clippy.toml` bans
//! `Mutex::lock`, `RwLock::read` and `RwLock::write` elsewhere): every critical section that
//! uses them leaves its data consistent (single inserts, removes and replacements), so a
//! poisoned lock is still safe to use, and one panicking request must not take the gateway
//! down.
#![allow(
    clippy::disallowed_methods,
    reason = "the one place that takes std locks directly"
)]

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Locks `m`, also when a thread panicked while holding it.
pub(crate) fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Read-locks `l`, also when a thread panicked while holding it.
pub(crate) fn read<T: ?Sized>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

/// Write-locks `l`, also when a thread panicked while holding it.
pub(crate) fn write<T: ?Sized>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}
