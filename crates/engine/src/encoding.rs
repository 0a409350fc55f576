//! The encoding thresholds: redis 7.0's `hash-max-listpack-entries` and
//! friends, which decide when a collection stops being "compact".
//!
//! respite stores every collection the same way (rows of one table per
//! type), but it keeps redis's distinction because clients can see it:
//! OBJECT ENCODING reports `listpack`/`intset` or `hashtable`/`skiplist`,
//! and HSCAN, SSCAN and ZSCAN answer a compact collection whole with
//! cursor 0, as redis-server does. A write that takes a collection past a
//! threshold sets its `ENC_BIG` flag (see `schema.rs`); like redis's
//! conversion, that never goes back, and a threshold changed later (CONFIG
//! SET) applies to the writes after it, not to collections already past
//! the old one.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

/// The thresholds in force, shared by the writer and the server's CONFIG.
#[derive(Debug)]
pub struct Thresholds {
    /// `hash-max-listpack-entries`.
    pub hash_entries: AtomicI64,
    /// `hash-max-listpack-value`: the longest field or value.
    pub hash_value: AtomicUsize,
    /// `set-max-intset-entries`.
    pub set_entries: AtomicI64,
    /// `zset-max-listpack-entries`.
    pub zset_entries: AtomicI64,
    /// `zset-max-listpack-value`: the longest member.
    pub zset_value: AtomicUsize,
    /// `stream-node-max-entries`: where a stream starts a new node (see
    /// `stream.rs`).
    pub stream_node_entries: AtomicI64,
    /// `stream-node-max-bytes`.
    pub stream_node_bytes: AtomicI64,
}

impl Default for Thresholds {
    /// redis 7.0's defaults.
    fn default() -> Self {
        Thresholds {
            hash_entries: AtomicI64::new(512),
            hash_value: AtomicUsize::new(64),
            set_entries: AtomicI64::new(512),
            zset_entries: AtomicI64::new(128),
            zset_value: AtomicUsize::new(64),
            stream_node_entries: AtomicI64::new(100),
            stream_node_bytes: AtomicI64::new(4096),
        }
    }
}

impl Thresholds {
    pub(crate) fn hash_entries(&self) -> i64 {
        self.hash_entries.load(Ordering::Relaxed)
    }
    pub(crate) fn hash_value(&self) -> usize {
        self.hash_value.load(Ordering::Relaxed)
    }
    pub(crate) fn set_entries(&self) -> i64 {
        self.set_entries.load(Ordering::Relaxed)
    }
    pub(crate) fn zset_entries(&self) -> i64 {
        self.zset_entries.load(Ordering::Relaxed)
    }
    pub(crate) fn zset_value(&self) -> usize {
        self.zset_value.load(Ordering::Relaxed)
    }
    /// The stream node limits in force.
    pub fn stream_nodes(&self) -> NodeLimits {
        NodeLimits {
            entries: self.stream_node_entries.load(Ordering::Relaxed),
            bytes: self.stream_node_bytes.load(Ordering::Relaxed),
        }
    }
}

/// `stream-node-max-entries` and `stream-node-max-bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeLimits {
    /// Entries, live and deleted, that fill a node (0: no limit).
    pub entries: i64,
    /// Bytes that fill a node (0: listpack's own limit).
    pub bytes: i64,
}
