//! CLIENT PAUSE: the server-wide hold on commands, until a deadline or
//! CLIENT UNPAUSE. A paused command waits before it is planned, on its
//! connection, after the replies to what came before it have been sent;
//! the connection asks [`Pause::holds`] before each command, telling it
//! whether that command writes (only writes wait under PAUSE WRITE).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use crate::sync::lock;

/// The server-wide CLIENT PAUSE.
#[derive(Default)]
pub struct Pause {
    /// Until when, and whether every command (ALL) or only writes wait.
    state: Mutex<Option<(Instant, bool)>>,
    /// A quick check for every command: a pause is (or was) set.
    active: AtomicBool,
    /// Wakes waiting connections at CLIENT UNPAUSE.
    notify: tokio::sync::Notify,
    /// Connections waiting for the pause to end (INFO counts them among
    /// `blocked_clients`, as redis does).
    waiting: std::sync::atomic::AtomicUsize,
}

/// Counts a connection as waiting on a pause while it lives.
struct Waiting<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Pause {
    /// Whether a command must wait now; ends an expired pause. Under
    /// WRITE only a command that `writes` says writes waits (the caller
    /// knows the commands: see `command::dispatch::held_under_write_pause`).
    pub fn holds(&self, writes: impl FnOnce() -> bool) -> bool {
        if !self.active.load(Ordering::Relaxed) {
            return false;
        }
        let mut st = lock(&self.state);
        match *st {
            Some((until, _)) if Instant::now() >= until => {
                *st = None;
                self.active.store(false, Ordering::Relaxed);
                false
            }
            Some((_, true)) => true,
            Some((_, false)) => {
                drop(st);
                writes()
            }
            None => false,
        }
    }

    /// Whether any pause is set (the fast paths go the general way then).
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Connections waiting for the pause to end now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Waits until the pause ends (its deadline or CLIENT UNPAUSE).
    pub async fn wait(&self) {
        self.waiting.fetch_add(1, Ordering::Relaxed);
        // Dropped however the wait ends (the connection may be killed).
        let _waiting = Waiting(&self.waiting);
        loop {
            let until = match *lock(&self.state) {
                Some((until, _)) => until,
                None => return,
            };
            let woken = self.notify.notified();
            tokio::select! {
                _ = tokio::time::sleep_until(until.into()) => {}
                _ = woken => {}
            }
            let mut st = lock(&self.state);
            if st.is_some_and(|(u, _)| Instant::now() >= u) {
                *st = None;
                self.active.store(false, Ordering::Relaxed);
            }
        }
    }

    /// Pauses until `until` (or the later end of a pause in force), and
    /// returns when the pause ends.
    pub fn pause(&self, until: Instant, all: bool) -> Instant {
        let mut st = lock(&self.state);
        // A pause never shortens one already in force, nor weakens it
        // (redis keeps the later end and the stronger type).
        let (until, all) = match *st {
            Some((u, a)) => (u.max(until), a || all),
            None => (until, all),
        };
        *st = Some((until, all));
        self.active.store(true, Ordering::Relaxed);
        self.notify.notify_waiters();
        until
    }

    /// CLIENT UNPAUSE: the pause ends now.
    pub fn unpause(&self) {
        *lock(&self.state) = None;
        self.active.store(false, Ordering::Relaxed);
        self.notify.notify_waiters();
    }
}
