//! Group-commit statistics, for INFO and for the tests that prove batching.
//!
//! The writer records one sample per commit: how many operations the batch
//! held and how long the COMMIT (and so, with `appendfsync always`, the
//! fsync) took. Both go into HdrHistograms so INFO can report p50/p99/max
//! without keeping samples.

use std::sync::Mutex;

use hdrhistogram::Histogram;

/// Counters and histograms owned by the writer, read by INFO.
pub struct Stats {
    inner: Mutex<Inner>,
}

struct Inner {
    batches: u64,
    ops: u64,
    failed_ops: u64,
    failed_commits: u64,
    expired_keys: u64,
    checkpoints: u64,
    wal_pause_us_max: u64,
    wal_restart_us_max: u64,
    wal_peak_bytes: u64,
    vacuum_pages: u64,
    vacuum_step_us_max: u64,
    evict_step_us_max: u64,
    lock_waits: u64,
    lock_wait_us_max: u64,
    checkpoint_seen: Option<std::time::Instant>,
    ops_per_batch: Histogram<u64>,
    commit_us: Histogram<u64>,
}

/// A copy of the statistics at one moment.
#[derive(Debug, Clone, Default)]
pub struct StatsSnapshot {
    /// Committed transactions that held at least one operation.
    pub batches: u64,
    /// Operations run by the writer (committed or not).
    pub ops: u64,
    /// Operations that failed alone and were rolled back to their savepoint.
    pub failed_ops: u64,
    /// Transactions that could not be committed (a failed COMMIT, or a
    /// BEGIN that failed, counted once per operation it refused).
    pub failed_commits: u64,
    /// Keys deleted by the active-expiry sweep.
    pub expired_keys: u64,
    /// WAL checkpoints the writer ran.
    pub checkpoints: u64,
    /// Operations per batch: median.
    pub ops_per_batch_p50: u64,
    /// Operations per batch: 99th percentile.
    pub ops_per_batch_p99: u64,
    /// Operations per batch: largest.
    pub ops_per_batch_max: u64,
    /// Operations per batch: mean.
    pub ops_per_batch_mean: f64,
    /// COMMIT latency in microseconds: median.
    pub commit_us_p50: u64,
    /// COMMIT latency in microseconds: 99th percentile.
    pub commit_us_p99: u64,
    /// COMMIT latency in microseconds: longest.
    pub commit_us_max: u64,
    /// The longest pause the writer made between two groups for the WAL
    /// (waiting for the checkpointer to catch up, or starting the WAL over),
    /// in microseconds.
    pub wal_pause_us_max: u64,
    /// The longest RESTART checkpoint the writer ran (part of a pause), in
    /// microseconds.
    pub wal_restart_us_max: u64,
    /// Pages the incremental vacuum gave back to the file system.
    pub vacuum_pages: u64,
    /// The longest incremental vacuum step, in microseconds.
    pub vacuum_step_us_max: u64,
    /// The longest eviction step (its transaction and commit included), in
    /// microseconds.
    pub evict_step_us_max: u64,
    /// The largest size the WAL file was seen at, in bytes.
    pub wal_peak_bytes: u64,
    /// Times the writer found the write lock taken by another process (an
    /// external checkpointer) and waited for it.
    pub lock_waits: u64,
    /// The longest of those waits, in microseconds.
    pub lock_wait_us_max: u64,
    /// How long ago the writer last saw the WAL copied or started over, by
    /// itself or by another process (None: not since the start).
    pub checkpoint_seen_ago: Option<std::time::Duration>,
}

impl Stats {
    pub(crate) fn new() -> Self {
        // Bounds: a batch of up to 1M ops, a commit of up to 100 s; values
        // past them are clamped rather than refused.
        let hist = |max| Histogram::new_with_bounds(1, max, 3).expect("static histogram bounds");
        Stats {
            inner: Mutex::new(Inner {
                batches: 0,
                ops: 0,
                failed_ops: 0,
                failed_commits: 0,
                expired_keys: 0,
                checkpoints: 0,
                wal_pause_us_max: 0,
                wal_restart_us_max: 0,
                wal_peak_bytes: 0,
                vacuum_pages: 0,
                vacuum_step_us_max: 0,
                evict_step_us_max: 0,
                lock_waits: 0,
                lock_wait_us_max: 0,
                checkpoint_seen: None,
                ops_per_batch: hist(1 << 20),
                commit_us: hist(100_000_000),
            }),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        // A poisoned lock only means a panic elsewhere mid-update; the
        // counters are still usable.
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut guard)
    }

    pub(crate) fn record_commit(&self, ops: u64, failed_ops: u64, commit_us: u64, ok: bool) {
        self.with(|s| {
            s.ops += ops;
            s.failed_ops += failed_ops;
            if ok {
                s.batches += 1;
                s.ops_per_batch.saturating_record(ops.max(1));
                s.commit_us.saturating_record(commit_us.max(1));
            } else {
                s.failed_commits += 1;
            }
        });
    }

    pub(crate) fn record_expired(&self, n: u64) {
        self.with(|s| s.expired_keys += n);
    }

    pub(crate) fn record_checkpoint(&self) {
        self.with(|s| {
            s.checkpoints += 1;
            s.checkpoint_seen = Some(std::time::Instant::now());
        });
    }

    /// A pause of the writer between groups for the WAL.
    pub(crate) fn record_wal_pause(&self, us: u64) {
        self.with(|s| s.wal_pause_us_max = s.wal_pause_us_max.max(us));
    }

    /// A RESTART checkpoint the writer ran, of `us` microseconds.
    pub(crate) fn record_wal_restart(&self, us: u64) {
        self.with(|s| s.wal_restart_us_max = s.wal_restart_us_max.max(us));
    }

    /// An incremental vacuum step that freed `pages` in `us` microseconds.
    pub(crate) fn record_vacuum(&self, pages: u64, us: u64) {
        self.with(|s| {
            s.vacuum_pages += pages;
            s.vacuum_step_us_max = s.vacuum_step_us_max.max(us);
        });
    }

    /// An eviction step of `us` microseconds.
    pub(crate) fn record_evict_step(&self, us: u64) {
        self.with(|s| s.evict_step_us_max = s.evict_step_us_max.max(us));
    }

    /// A wait of the writer for the write lock another process held.
    pub(crate) fn record_lock_wait(&self, us: u64) {
        self.with(|s| {
            s.lock_waits += 1;
            s.lock_wait_us_max = s.lock_wait_us_max.max(us);
        });
    }

    /// The WAL was seen copied or started over just now.
    pub(crate) fn record_checkpoint_seen(&self) {
        self.with(|s| s.checkpoint_seen = Some(std::time::Instant::now()));
    }

    /// The WAL file's size, seen by the writer.
    pub(crate) fn record_wal_size(&self, bytes: u64) {
        self.with(|s| s.wal_peak_bytes = s.wal_peak_bytes.max(bytes));
    }

    /// Zeroes every counter and histogram (CONFIG RESETSTAT).
    pub(crate) fn reset(&self) {
        self.with(|s| {
            s.batches = 0;
            s.ops = 0;
            s.failed_ops = 0;
            s.failed_commits = 0;
            s.expired_keys = 0;
            s.checkpoints = 0;
            s.wal_pause_us_max = 0;
            s.wal_restart_us_max = 0;
            s.wal_peak_bytes = 0;
            s.vacuum_step_us_max = 0;
            s.evict_step_us_max = 0;
            s.lock_waits = 0;
            s.lock_wait_us_max = 0;
            s.ops_per_batch.reset();
            s.commit_us.reset();
        });
    }

    /// A consistent copy of every figure.
    pub fn snapshot(&self) -> StatsSnapshot {
        self.with(|s| StatsSnapshot {
            batches: s.batches,
            ops: s.ops,
            failed_ops: s.failed_ops,
            failed_commits: s.failed_commits,
            expired_keys: s.expired_keys,
            checkpoints: s.checkpoints,
            ops_per_batch_p50: s.ops_per_batch.value_at_quantile(0.5),
            ops_per_batch_p99: s.ops_per_batch.value_at_quantile(0.99),
            ops_per_batch_max: s.ops_per_batch.max(),
            ops_per_batch_mean: s.ops_per_batch.mean(),
            commit_us_p50: s.commit_us.value_at_quantile(0.5),
            commit_us_p99: s.commit_us.value_at_quantile(0.99),
            commit_us_max: s.commit_us.max(),
            wal_pause_us_max: s.wal_pause_us_max,
            wal_restart_us_max: s.wal_restart_us_max,
            wal_peak_bytes: s.wal_peak_bytes,
            vacuum_pages: s.vacuum_pages,
            vacuum_step_us_max: s.vacuum_step_us_max,
            evict_step_us_max: s.evict_step_us_max,
            lock_waits: s.lock_waits,
            lock_wait_us_max: s.lock_wait_us_max,
            checkpoint_seen_ago: s.checkpoint_seen.map(|t| t.elapsed()),
        })
    }
}
