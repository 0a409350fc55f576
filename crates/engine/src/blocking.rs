//! Clients blocked on keys (BLPOP and friends), and how a write serves them.
//!
//! A blocking command first tries once, as a write operation on the writer
//! thread. When it finds nothing to pop it registers a [`Waiter`] here, in
//! that same operation, so no write can fall between the failed try and the
//! registration. From then on every write operation the writer runs is
//! followed by a look at the keys it touched: for each touched key that has
//! waiters, the writer asks them in the order they blocked (Redis's first
//! blocked, first served) to serve themselves from that key, in the same
//! transaction as the write that readied it. A waiter that pops something
//! is taken off every key it waits on; its reply goes out only once that
//! transaction has committed ([`Waiter::finish`]), like any write's. So a
//! popped element is part of committed state before any client sees it: a
//! crash either keeps it in the list or it was handed out after its pop was
//! durable, never both, never neither. What one serve writes (BLMOVE pushes
//! to its destination) readies more keys, which are served in turn.
//!
//! A waiter costs nothing while it waits: an entry in two maps, and a
//! parked task on the server side. The writer pays one atomic load per
//! operation while no client is blocked, and a map lookup per touched key
//! while some are. Cancelling (timeout, CLIENT UNBLOCK, a disconnect) is the
//! waiter's own business; the writer skips and drops waiters that no longer
//! wait, and the canceller removes its entry with [`Blocking::remove`].

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use crate::cache::Touched;
use crate::error::Result;
use crate::txn::Txn;

/// A blocked client, as the writer sees it.
pub trait Waiter: Send + Sync {
    /// Tries to serve the client from `key` of `db`, which a write has just
    /// changed, inside the writer's open transaction. Returns whether it
    /// was served; then [`Waiter::finish`] follows once the transaction
    /// ends. An error fails the transaction only if the waiter wrote.
    fn serve(&self, txn: &mut Txn<'_, '_>, db: u32, key: &[u8]) -> Result<bool>;
    /// The transaction that served the waiter has committed (`Ok`) or was
    /// rolled back (the error to answer with).
    fn finish(&self, outcome: Result<()>);
    /// Whether it still waits to be served (not cancelled, not served).
    fn waiting(&self) -> bool;
}

/// A registered waiter.
struct Entry {
    keys: Vec<(u32, Bytes)>,
    waiter: Arc<dyn Waiter>,
}

#[derive(Default)]
struct Inner {
    /// For each key, the ids of its waiters in the order they blocked.
    by_key: HashMap<(u32, Bytes), VecDeque<u64>>,
    entries: HashMap<u64, Entry>,
    next_id: u64,
}

/// The registry of blocked clients, shared by the writer and the server.
#[derive(Default)]
pub struct Blocking {
    inner: Mutex<Inner>,
    /// Registered waiters: the writer's quick "anyone blocked?" check.
    count: AtomicUsize,
}

impl Blocking {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a waiter on `keys` (duplicates count once). Call it on
    /// the writer, from the operation that found nothing to pop. Returns
    /// the id to [`Blocking::remove`] it with.
    pub fn register(&self, keys: Vec<(u32, Bytes)>, waiter: Arc<dyn Waiter>) -> u64 {
        let mut inner = self.lock();
        inner.next_id += 1;
        let id = inner.next_id;
        let mut unique: Vec<(u32, Bytes)> = Vec::with_capacity(keys.len());
        for k in keys {
            if !unique.contains(&k) {
                unique.push(k);
            }
        }
        for k in &unique {
            inner.by_key.entry(k.clone()).or_default().push_back(id);
        }
        inner.entries.insert(
            id,
            Entry {
                keys: unique,
                waiter,
            },
        );
        self.count.fetch_add(1, Ordering::Relaxed);
        id
    }

    /// Takes a waiter off every key it waits on (served, or cancelled).
    pub fn remove(&self, id: u64) {
        let mut inner = self.lock();
        let Some(entry) = inner.entries.remove(&id) else {
            return;
        };
        for k in entry.keys {
            if let Some(q) = inner.by_key.get_mut(&k) {
                q.retain(|&i| i != id);
                if q.is_empty() {
                    inner.by_key.remove(&k);
                }
            }
        }
        self.count.fetch_sub(1, Ordering::Relaxed);
    }

    /// How many waiters are registered.
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Whether no client is blocked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The keys of `touched` that have waiters, each once, in the order
    /// they were touched (every waited-on key after a flush or swap).
    pub(crate) fn ready_keys(&self, touched: &Touched) -> Vec<(u32, Bytes)> {
        let inner = self.lock();
        if touched.is_all() {
            return inner.by_key.keys().cloned().collect();
        }
        let mut out: Vec<(u32, Bytes)> = Vec::new();
        for k in touched.keys() {
            if inner.by_key.contains_key(k) && !out.contains(k) {
                out.push(k.clone());
            }
        }
        out
    }

    /// The waiters of one key, in the order they blocked.
    pub(crate) fn queue(&self, db: u32, key: &Bytes) -> Vec<(u64, Arc<dyn Waiter>)> {
        let inner = self.lock();
        let Some(q) = inner.by_key.get(&(db, key.clone())) else {
            return Vec::new();
        };
        q.iter()
            .filter_map(|id| inner.entries.get(id).map(|e| (*id, e.waiter.clone())))
            .collect()
    }
}
