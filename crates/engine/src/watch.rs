//! Version counters for the keys clients WATCH, so EXEC can tell whether a
//! watched key changed since.
//!
//! Everything here happens on the writer thread, in the order of the write
//! queue: WATCH registers a key and remembers its version, every operation
//! raises the version of the watched keys it touched as it runs, and EXEC
//! compares versions just before it runs its transaction. So "written after
//! WATCH" means exactly "after WATCH in the writer's order". Only watched
//! keys are counted, and a key's entry goes away when its last watcher
//! does.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;

use crate::cache::Touched;

struct Watched {
    version: u64,
    watchers: usize,
}

/// The watched keys of every connection.
#[derive(Default)]
pub struct Watches {
    /// Entries in `map`, readable without the lock: the writer skips all
    /// work while nobody watches anything.
    entries: AtomicUsize,
    map: Mutex<HashMap<(u32, Bytes), Watched>>,
}

impl Watches {
    fn map(&self) -> MutexGuard<'_, HashMap<(u32, Bytes), Watched>> {
        // Every change is one map call: a poisoned lock is still whole.
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts watching a key; returns its current version.
    pub fn watch(&self, db: u32, key: &Bytes) -> u64 {
        let mut map = self.map();
        let entry = map.entry((db, key.clone())).or_insert(Watched {
            version: 0,
            watchers: 0,
        });
        entry.watchers += 1;
        let version = entry.version;
        self.entries.store(map.len(), Ordering::Release);
        version
    }

    /// Stops one watch of a key.
    pub fn unwatch(&self, db: u32, key: &Bytes) {
        let mut map = self.map();
        let id = (db, key.clone());
        if let Some(entry) = map.get_mut(&id) {
            entry.watchers -= 1;
            if entry.watchers == 0 {
                map.remove(&id);
            }
        }
        self.entries.store(map.len(), Ordering::Release);
    }

    /// Whether the key's version moved past `version`.
    pub fn changed(&self, db: u32, key: &Bytes, version: u64) -> bool {
        self.map()
            .get(&(db, key.clone()))
            .is_none_or(|entry| entry.version != version)
    }

    /// The watched keys of one database, or of all (for FLUSHDB and
    /// FLUSHALL, which change only the watched keys that exist, as in
    /// Redis).
    pub(crate) fn keys_in(&self, db: Option<u32>) -> Vec<(u32, Bytes)> {
        if self.entries.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        self.map()
            .keys()
            .filter(|(d, _)| db.is_none_or(|db| *d == db))
            .cloned()
            .collect()
    }

    /// Raises the versions of the watched keys among `touched`.
    pub(crate) fn touch(&self, touched: &Touched) {
        if self.entries.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut map = self.map();
        for (db, key) in touched.keys() {
            if let Some(entry) = map.get_mut(&(*db, key.clone())) {
                entry.version += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_move_only_for_watched_touched_keys() {
        let w = Watches::default();
        let k = Bytes::from_static(b"k");
        let other = Bytes::from_static(b"other");
        let v = w.watch(0, &k);
        let mut t = Touched::default();
        t.key(0, b"other");
        t.key(1, b"k");
        w.touch(&t);
        assert!(!w.changed(0, &k, v), "another key, another db");
        let mut t = Touched::default();
        t.key(0, b"k");
        w.touch(&t);
        assert!(w.changed(0, &k, v));
        // A second watcher starts from the current version; the entry
        // lives until both are gone.
        let v2 = w.watch(0, &k);
        w.unwatch(0, &k);
        assert!(!w.changed(0, &k, v2));
        w.unwatch(0, &k);
        assert!(w.changed(0, &k, v2), "no entry: nothing to compare");
        assert!(w.keys_in(None).is_empty());
        let v = w.watch(3, &other);
        assert_eq!(w.keys_in(Some(3)), vec![(3, other.clone())]);
        assert!(w.keys_in(Some(0)).is_empty());
        // `all` alone (a flush) changes nothing here: the flush lists the
        // watched keys that existed.
        let mut all = Touched::default();
        all.all();
        w.touch(&all);
        assert!(!w.changed(3, &other, v));
    }
}
