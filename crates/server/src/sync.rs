//! The one locking helper every module shares.

use std::sync::Mutex;

/// Locks a std mutex, shrugging off poisoning: every value guarded here stays
/// consistent even if a holder panicked.
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
