//! The checkpointer thread: copies the WAL back into the database file off
//! the write path.
//!
//! In WAL mode every commit appends to the `-wal` file, and a checkpoint
//! copies those pages into the database so the WAL can start over. Run on
//! the writer thread, a checkpoint of tens of megabytes stalls every write
//! queued behind it (measured under a TTL-churn load: p99.9 of 70 ms with a
//! 64 MiB threshold). A PASSIVE checkpoint, though, may run on another
//! connection *while* the writer appends: it never takes the write lock and
//! never waits for readers. So the writer only nudges this thread after its
//! commits, and this thread copies the WAL with PASSIVE checkpoints, often.
//!
//! How often to copy is the other half of the cost of a write. A PASSIVE
//! checkpoint writes every page the WAL holds once, however many frames of
//! it the WAL has: copying after every commit writes each page twice (once
//! to the WAL, once to the database), while letting
//! [`EngineConfig::checkpoint_wal_bytes`](crate::EngineConfig) pile up
//! first copies a page that many writes dirtied once for all of them. So
//! this thread reads the WAL's frame counts from the WAL index (the `-shm`
//! file, whose header layout is part of SQLite's documented file format)
//! and starts copying only once that much is waiting; then it keeps copying
//! until the WAL is started over.
//!
//! Under constant writes a PASSIVE checkpoint never *completes* (new frames
//! arrive while it copies), so the WAL would never start over and would grow
//! until the writer's hard bound, whose TRUNCATE then stalled writes for
//! ~50 ms (most of it the `ftruncate` freeing the file's blocks). Starting
//! the WAL over needs the write lock, which the writer holds nearly all the
//! time under load, so this thread cannot do it itself (a RESTART from here
//! only waited and gave up). Instead, once the WAL holds enough frames
//! (`RESTART_FRAMES`, or the copy threshold if larger) and this thread has
//! copied them, it raises a flag, and the writer, between two batches, runs a
//! RESTART checkpoint: with nearly every frame already copied here, that
//! takes a millisecond or two, and the WAL starts over from its beginning
//! without being truncated. The writer keeps the hard bound (TRUNCATE past
//! `wal_checkpoint_bytes`) for when this thread cannot keep up.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use rusqlite::Connection;

use crate::config::AppendFsync;
use crate::error::Result;

/// WAL frames (pages) after which the WAL is restarted, at the least: 1024
/// frames, SQLite's own default checkpoint size.
const RESTART_FRAMES: u64 = 1024;

/// The shortest pause between two checkpoints: enough for the writer to
/// add a worthwhile amount, short enough that the WAL stays a few MiB.
const MIN_INTERVAL: Duration = Duration::from_millis(20);

/// Handle to the checkpointer thread.
pub(crate) struct Checkpointer {
    nudge: Sender<()>,
    /// Raised here, taken by the writer: the WAL is long and mostly copied,
    /// time to start it over.
    pub(crate) restart_due: Arc<AtomicBool>,
    /// The WAL bytes this thread currently lets pile up before copying
    /// (it follows the database's size), for the writer's hard bound.
    pub(crate) copy_threshold: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Opens a connection for checkpoints and starts the thread, which
    /// copies the WAL once `copy_after_bytes` of it, or `copy_after_percent`
    /// of the database file's size if more, wait to be copied; never later
    /// than half of `wal_bound` (the writer's bound, 0 for none) or a
    /// quarter of the file system's free space.
    pub(crate) fn start(
        path: &Path,
        fsync: AppendFsync,
        copy_after_bytes: u64,
        copy_after_percent: u64,
        wal_bound: u64,
    ) -> Result<Self> {
        let conn = Connection::open(path)?;
        // The checkpoint writes the database file; with `always` it must
        // reach the disk before the WAL is reused.
        let sync = match fsync {
            AppendFsync::Always => "FULL",
            AppendFsync::Everysec | AppendFsync::No => "NORMAL",
        };
        conn.pragma_update(None, "synchronous", sync)?;
        conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        let page_size: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
        let page_size = page_size.max(512) as u64;
        let mut shm = path.as_os_str().to_owned();
        shm.push("-shm");
        let sizing = Sizing {
            db_path: path.to_path_buf(),
            page_size: page_size.max(512),
            min_bytes: copy_after_bytes,
            percent: copy_after_percent,
            max_bytes: if wal_bound == 0 {
                u64::MAX
            } else {
                wal_bound / 2
            },
        };
        let copy_threshold = Arc::new(AtomicU64::new(sizing.policy().bytes));
        let threshold = copy_threshold.clone();
        // At most one nudge waits: many commits during one checkpoint ask
        // for one more checkpoint, not many.
        let (nudge, rx) = crossbeam_channel::bounded(1);
        let restart_due = Arc::new(AtomicBool::new(false));
        let flag = restart_due.clone();
        let shm = WalIndex::new(PathBuf::from(shm));
        let thread = std::thread::Builder::new()
            .name("respite-checkpointer".into())
            .spawn(move || run(conn, rx, flag, shm, sizing, threshold))
            .map_err(crate::EngineError::Thread)?;
        Ok(Checkpointer {
            nudge,
            restart_due,
            copy_threshold,
            thread: Some(thread),
        })
    }

    /// A checkpointer that never copies (`checkpoint = "external"`): no
    /// thread, and nudges go nowhere.
    pub(crate) fn disabled() -> Self {
        let (nudge, _) = crossbeam_channel::bounded(1);
        Checkpointer {
            nudge,
            restart_due: Arc::new(AtomicBool::new(false)),
            copy_threshold: Arc::new(AtomicU64::new(0)),
            thread: None,
        }
    }

    /// Asks for a checkpoint soon; never blocks.
    pub(crate) fn nudge(&self) {
        // Full: a checkpoint is already asked for. Disconnected: shutting
        // down. Neither needs anything done.
        let _ = self.nudge.try_send(());
    }

    /// Stops the thread and waits for it (after its current checkpoint).
    /// A stop's final TRUNCATE needs this: while another connection copies,
    /// SQLite answers a checkpoint with SQLITE_BUSY at once, without waiting.
    pub(crate) fn stop(&mut self) {
        // Closing the channel ends the thread after its current checkpoint.
        let (dead, _) = crossbeam_channel::bounded(1);
        self.nudge = dead;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How the copy threshold follows the database's size.
struct Sizing {
    db_path: PathBuf,
    page_size: u64,
    /// The threshold's floor, in bytes.
    min_bytes: u64,
    /// The threshold as a percentage of the database file's size.
    percent: u64,
    /// The threshold's ceiling: half the writer's WAL bound.
    max_bytes: u64,
}

/// The smallest threshold the free-space cap may lower it to.
const MIN_THRESHOLD_BYTES: u64 = 1 << 20;

impl Sizing {
    /// The copy threshold in bytes for a database file of `db_bytes` on a
    /// file system with `free_bytes` free. The ceilings keep the WAL from
    /// growing with the database (every page lookup searches the frames not
    /// yet copied) and from filling a small or nearly full disk before it
    /// is copied.
    fn threshold_bytes(&self, db_bytes: u64, free_bytes: u64) -> u64 {
        if self.min_bytes == 0 {
            // Copy after every commit.
            return 0;
        }
        self.min_bytes
            .max(db_bytes.saturating_mul(self.percent) / 100)
            .min(self.max_bytes)
            .min((free_bytes / 4).max(MIN_THRESHOLD_BYTES))
    }

    /// The policy for the database file as it is now.
    fn policy(&self) -> Policy {
        let db_bytes = std::fs::metadata(&self.db_path)
            .map(|m| m.len())
            .unwrap_or(0);
        let free = crate::disk::free_bytes(&self.db_path).unwrap_or(u64::MAX);
        let bytes = self.threshold_bytes(db_bytes, free);
        // A frame is a page and its 24-byte header.
        let frames = bytes / (self.page_size + 24);
        Policy {
            bytes,
            copy_after_frames: frames,
            restart_frames: frames.max(RESTART_FRAMES),
        }
    }
}

/// When to copy and when to ask for a restart, in WAL frames.
#[derive(Debug, Clone, Copy)]
struct Policy {
    /// The threshold in bytes, as INFO reports it.
    bytes: u64,
    /// Start copying once this many frames wait (0: after every commit).
    copy_after_frames: u64,
    /// Ask the writer to start the WAL over once it holds this many frames
    /// and this thread has copied them.
    restart_frames: u64,
}

impl Policy {
    /// Whether to run a PASSIVE checkpoint now, given the WAL's state. Once
    /// a round has started (something is copied and the WAL has not been
    /// started over), it goes on until the restart, so what arrives during
    /// a copy is copied too and the writer's RESTART has little left to do.
    fn copy_now(&self, wal: Option<WalFrames>) -> bool {
        match wal {
            Some(w) => {
                w.backfilled > 0 || w.last.saturating_sub(w.backfilled) >= self.copy_after_frames
            }
            // The index could not be read (not created yet, or a torn
            // read): copying is always safe.
            None => true,
        }
    }
}

impl Policy {
    /// Whether to ask the writer to start the WAL over, after a copy that
    /// saw `frames` frames, given the WAL's state now. Only once the WAL is
    /// long enough and nearly all of it is copied: the writer's RESTART
    /// copies whatever is left itself, on the write path, and a long copy
    /// here lets many frames arrive meanwhile (a first version asked right
    /// after the first copy of a 200 MB WAL, and the writer's RESTART then
    /// copied the tens of MB written during it: a commit p99 of 5.7 ms).
    fn restart_now(&self, frames: u64, now: Option<WalFrames>) -> bool {
        frames >= self.restart_frames
            && now.is_some_and(|w| w.last.saturating_sub(w.backfilled) <= RESTART_TAIL_FRAMES)
    }
}

/// The most frames the writer's RESTART may be left to copy.
pub(crate) const RESTART_TAIL_FRAMES: u64 = 512;

/// The two counters of the WAL index this thread decides by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WalFrames {
    /// The last valid frame of the WAL (`mxFrame`).
    pub(crate) last: u64,
    /// Frames already copied into the database (`nBackfill`).
    pub(crate) backfilled: u64,
}

/// The WAL index (`-shm` file), read for its header only.
pub(crate) struct WalIndex {
    path: PathBuf,
    file: Option<File>,
}

impl WalIndex {
    pub(crate) fn new(path: PathBuf) -> Self {
        WalIndex { path, file: None }
    }

    /// Reads `mxFrame` and `nBackfill`. SQLite's documented WAL-index layout:
    /// two copies of a 48-byte header (`mxFrame` at byte 16 of each, in
    /// native byte order, which a writer updates one after the other), then
    /// the checkpoint information, whose first field is `nBackfill` (byte
    /// 96). A read that finds the two copies different raced a commit and
    /// is discarded.
    pub(crate) fn frames(&mut self) -> Option<WalFrames> {
        if self.file.is_none() {
            self.file = File::open(&self.path).ok();
        }
        let mut buf = [0u8; 100];
        self.file.as_ref()?.read_exact_at(&mut buf, 0).ok()?;
        parse_wal_index(&buf)
    }
}

/// The counters of a WAL-index header (see [`WalIndex::frames`]).
fn parse_wal_index(buf: &[u8; 100]) -> Option<WalFrames> {
    let u32_at = |at: usize| u32::from_ne_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]);
    // iVersion 3007000 marks an initialised index.
    if u32_at(0) != 3_007_000 || buf[0..48] != buf[48..96] {
        return None;
    }
    Some(WalFrames {
        last: u64::from(u32_at(16)),
        backfilled: u64::from(u32_at(96)),
    })
}

fn run(
    conn: Connection,
    rx: Receiver<()>,
    restart_due: Arc<AtomicBool>,
    mut index: WalIndex,
    sizing: Sizing,
    threshold: Arc<AtomicU64>,
) {
    let mut policy = sizing.policy();
    let mut db_file = None;
    while rx.recv().is_ok() {
        let frames = index.frames();
        if frames.is_some_and(|w| w.backfilled == 0) {
            // Between rounds: follow the database's size (one `stat`, only
            // while no copy is under way).
            policy = sizing.policy();
            threshold.store(policy.bytes, Ordering::Relaxed);
        }
        if !policy.copy_now(frames) {
            continue;
        }
        let copied = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get::<_, i64>(1));
        if copied.is_ok() {
            sync_copied(&mut db_file, &sizing.db_path);
        }
        match copied {
            Ok(frames) if policy.restart_now(frames as u64, index.frames()) => {
                restart_due.store(true, Ordering::Relaxed)
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "background checkpoint failed"),
        }
        std::thread::sleep(MIN_INTERVAL);
    }
}

/// Flushes the pages a PASSIVE checkpoint copied into the database file
/// to the disk, here, off the write path. SQLite fsyncs the database file
/// only at the end of a checkpoint that copied the whole WAL, which under
/// constant writes is the writer's RESTART: without this, that fsync would
/// flush every page this thread copied during the round (tens of MB), and
/// the writer, and every commit queued behind it, would wait for it
/// (measured: pauses of 90-290 ms over 1M keys). A failure is left to the
/// RESTART's own fsync, which reports it.
fn sync_copied(file: &mut Option<File>, path: &Path) {
    if file.is_none() {
        *file = File::open(path).ok();
    }
    if let Some(f) = file {
        if let Err(e) = f.sync_data() {
            tracing::debug!(error = %e, "fsync of the copied pages failed; the restart syncs them");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(last: u32, backfilled: u32) -> [u8; 100] {
        let mut buf = [0u8; 100];
        buf[0..4].copy_from_slice(&3_007_000u32.to_ne_bytes());
        buf[16..20].copy_from_slice(&last.to_ne_bytes());
        let (a, b) = buf.split_at_mut(48);
        b[..48].copy_from_slice(&a[..48]);
        buf[96..100].copy_from_slice(&backfilled.to_ne_bytes());
        buf
    }

    #[test]
    fn reads_the_wal_index_header() {
        let w = parse_wal_index(&header(500, 20)).unwrap();
        assert_eq!(
            w,
            WalFrames {
                last: 500,
                backfilled: 20
            }
        );
        // The two copies differ: a commit was updating it.
        let mut torn = header(500, 20);
        torn[16] ^= 1;
        assert_eq!(parse_wal_index(&torn), None);
        // Not initialised.
        assert_eq!(parse_wal_index(&[0u8; 100]), None);
    }

    #[test]
    fn copies_once_enough_waits_then_until_the_restart() {
        let p = Policy {
            bytes: 536_000,
            copy_after_frames: 1000,
            restart_frames: 1000,
        };
        let at = |last, backfilled| p.copy_now(Some(WalFrames { last, backfilled }));
        assert!(!at(999, 0));
        assert!(at(1000, 0));
        // A round under way goes on whatever is left.
        assert!(at(1200, 1000));
        assert!(at(1000, 1000));
        // Unknown state: copy.
        assert!(p.copy_now(None));
        // Threshold 0: after every commit, as SQLite's PASSIVE loop would.
        let eager = Policy {
            bytes: 0,
            copy_after_frames: 0,
            restart_frames: RESTART_FRAMES,
        };
        assert!(eager.copy_now(Some(WalFrames {
            last: 1,
            backfilled: 0
        })));
    }

    #[test]
    fn restarts_only_once_nearly_everything_is_copied() {
        let p = Policy {
            bytes: 536_000,
            copy_after_frames: 1000,
            restart_frames: 1000,
        };
        let now = |last, backfilled| Some(WalFrames { last, backfilled });
        assert!(p.restart_now(1000, now(1500, 1000)));
        // Too much arrived during the copy: copy again first.
        assert!(!p.restart_now(1000, now(5000, 1000)));
        // Too short a WAL to be worth restarting.
        assert!(!p.restart_now(900, now(900, 900)));
        // Unknown state: let the next round decide.
        assert!(!p.restart_now(1000, None));
    }

    #[test]
    fn the_threshold_is_bounded_whatever_the_database_size() {
        let roomy = u64::MAX;
        let sizing = Sizing {
            db_path: PathBuf::from("/nonexistent"),
            page_size: 512,
            min_bytes: 32 << 20,
            percent: 0,
            max_bytes: 64 << 20,
        };
        assert_eq!(sizing.threshold_bytes(1 << 20, roomy), 32 << 20);
        assert_eq!(sizing.threshold_bytes(10 << 30, roomy), 32 << 20);
        // A percentage may raise it, never past half the WAL's bound.
        let percent = Sizing {
            db_path: sizing.db_path.clone(),
            percent: 200,
            ..sizing
        };
        assert_eq!(percent.threshold_bytes(20 << 20, roomy), 40 << 20);
        assert_eq!(percent.threshold_bytes(10 << 30, roomy), 64 << 20);
        // Nor past a quarter of the free space (but not below 1 MiB).
        assert_eq!(percent.threshold_bytes(10 << 30, 40 << 20), 10 << 20);
        assert_eq!(percent.threshold_bytes(10 << 30, 0), 1 << 20);
        // 0 means after every commit, whatever the size.
        let eager = Sizing {
            min_bytes: 0,
            ..sizing
        };
        assert_eq!(eager.threshold_bytes(100 << 20, roomy), 0);
        // A missing file is an empty one.
        assert_eq!(eager.policy().copy_after_frames, 0);
    }

    #[test]
    fn the_wal_index_of_a_real_database_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let conn = crate::schema::open_writer(&path, AppendFsync::No, 1 << 20, 4096).unwrap();
        conn.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (randomblob(10000));")
            .unwrap();
        let mut shm = path.as_os_str().to_owned();
        shm.push("-shm");
        let mut index = WalIndex::new(PathBuf::from(shm));
        let before = index.frames().unwrap();
        assert!(before.last >= 3, "{before:?}");
        assert_eq!(before.backfilled, 0);
        conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
            .unwrap();
        let after = index.frames().unwrap();
        assert_eq!(after.backfilled, after.last, "{after:?}");
    }
}
