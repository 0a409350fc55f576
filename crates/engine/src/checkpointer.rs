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
//!
//! The threshold trades the bytes a copy writes against what a long WAL
//! costs every page lookup, and two cases start a round before it:
//!
//! - **The writes repeat a few pages.** SQLite finds a page's newest frame
//!   in one hash table per 4,096 frames, with open addressing, so every
//!   frame of a page sits in the same run of slots: a page written in every
//!   commit (a job queue's list, a counter) appears hundreds of times in
//!   the newest table, and every lookup of it walks them all (measured: 56%
//!   of the writer in `walFindFrame` on a queue). Only starting the WAL over
//!   empties the tables. So once [`EARLY_FRAMES`] frames wait, this thread
//!   reads the page numbers of the newest of them from the WAL index, and
//!   if each page among them was written [`EARLY_REPEATS`] times or more,
//!   it copies and has the WAL started over at once. Copying a page costs
//!   the same now as at the threshold unless it is written again in
//!   between, and the pages these writes do not repeat are not being
//!   written again, so the early round costs only the few hot pages once
//!   more; random writes, whose newest frames are nearly all distinct
//!   pages, keep the threshold (and its savings on large files).
//! - **The writes have stopped.** Once the writer has had nothing to do for
//!   a moment (`writer.rs`, `QUIET`), it asks for a round whatever is
//!   waiting ([`Checkpointer::copy_when_quiet`]): the copy uses a disk with
//!   nothing else to do, and the next burst starts with an empty WAL
//!   instead of one left just under the threshold by the last (a queue
//!   right after a run of random SETs moved 0.30x of redis's jobs, for its
//!   lookups through the SETs' 30,000 frames).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::config::AppendFsync;
use crate::error::Result;

/// WAL frames (pages) after which the WAL is restarted, at the least: 1024
/// frames, SQLite's own default checkpoint size.
const RESTART_FRAMES: u64 = 1024;

/// The shortest pause between two checkpoints: enough for the writer to
/// add a worthwhile amount, short enough that the WAL stays a few MiB.
const MIN_INTERVAL: Duration = Duration::from_millis(20);

/// How long the copy threshold follows the database's size and the free
/// space without a fresh look (a `stat` and a `statvfs`); looked at on
/// every nudge, they were two system calls per commit.
const RESIZE_INTERVAL: Duration = Duration::from_millis(100);

/// Frames a commit adds before the writer wakes this thread between rounds
/// with nothing due yet (see [`Checkpointer::committed`]).
const NUDGE_FRAMES: u64 = 64;

/// Frames waiting after which this thread looks at whether the newest of
/// them repeat a few pages (and how many of the newest it looks at).
pub(crate) const EARLY_FRAMES: u64 = 1024;

/// How many times, on average, each page among the newest
/// [`EARLY_FRAMES`] frames must have been written for a round to start
/// before the threshold. At 8, each page appears 8 times or more in the
/// newest hash table, and copying the pages costs at most an eighth of the
/// frames' own bytes (in 4 KiB pieces of the file: half, with 1 KiB pages).
pub(crate) const EARLY_REPEATS: u64 = 8;

/// Handle to the checkpointer thread.
pub(crate) struct Checkpointer {
    wake: Arc<Wake>,
    /// Raised here, taken by the writer: the WAL is long and mostly copied,
    /// time to start it over.
    pub(crate) restart_due: Arc<AtomicBool>,
    /// The WAL bytes this thread currently lets pile up before copying
    /// (it follows the database's size), for the writer's hard bound.
    pub(crate) copy_threshold: Arc<AtomicU64>,
    /// Raised by the writer once writes have stopped: copy whatever waits
    /// and have the WAL started over.
    quiet: Arc<AtomicBool>,
    /// The WAL's last frame at the last nudge after a commit, and the
    /// database's page size (see [`Checkpointer::committed`]).
    nudged_at: AtomicU64,
    page_size: u64,
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
        let wake = Arc::new(Wake::default());
        let woken = wake.clone();
        let restart_due = Arc::new(AtomicBool::new(false));
        let quiet = Arc::new(AtomicBool::new(false));
        let shared = Flags {
            restart_due: restart_due.clone(),
            quiet: quiet.clone(),
            threshold,
        };
        let shm = WalIndex::new(PathBuf::from(shm));
        let thread = std::thread::Builder::new()
            .name("respite-checkpointer".into())
            .spawn(move || run(conn, &woken, shared, shm, sizing))
            .map_err(crate::EngineError::Thread)?;
        Ok(Checkpointer {
            wake,
            restart_due,
            copy_threshold,
            quiet,
            nudged_at: AtomicU64::new(0),
            page_size,
            thread: Some(thread),
        })
    }

    /// A checkpointer that never copies (`checkpoint = "external"`): no
    /// thread, and nudges go nowhere.
    pub(crate) fn disabled() -> Self {
        Checkpointer {
            wake: Arc::new(Wake::default()),
            restart_due: Arc::new(AtomicBool::new(false)),
            copy_threshold: Arc::new(AtomicU64::new(0)),
            quiet: Arc::new(AtomicBool::new(false)),
            nudged_at: AtomicU64::new(0),
            page_size: 1024,
            thread: None,
        }
    }

    /// Writes have stopped: copies whatever waits, however little, and asks
    /// for the WAL to be started over (see the module's doc); never blocks.
    pub(crate) fn copy_when_quiet(&self) {
        self.quiet.store(true, Ordering::Relaxed);
        self.nudge();
    }

    /// Tells the thread of a commit, given the WAL's frame counts after it.
    /// Between rounds the thread has nothing to decide until enough frames
    /// have arrived, so it is woken only when a copy is due (the frames
    /// waiting have reached the threshold), a round is under way (some
    /// frames are copied), the WAL was started over, the index could not
    /// be read, or [`NUDGE_FRAMES`] frames have been added since the last
    /// nudge (its look at repeated pages comes at most that late). Woken
    /// after every commit, it was a switch to a thread that looked at the
    /// index and went back to sleep, the most of its time between rounds.
    pub(crate) fn committed(&self, frames: Option<WalFrames>) {
        let due = match frames {
            None => true,
            Some(f) => {
                let at = self.nudged_at.load(Ordering::Relaxed);
                let waiting = f.last.saturating_sub(f.backfilled);
                f.backfilled > 0
                    || f.last < at
                    || f.last >= at + NUDGE_FRAMES
                    || waiting.saturating_mul(self.page_size + 24)
                        >= self.copy_threshold.load(Ordering::Relaxed)
            }
        };
        if due {
            self.nudged_at
                .store(frames.map_or(0, |f| f.last), Ordering::Relaxed);
            self.nudge();
        }
    }

    /// Asks for a checkpoint soon; never blocks.
    pub(crate) fn nudge(&self) {
        // No thread: disabled, or stopped. Already asked: the thread has
        // not taken the last nudge yet, and takes this one with it.
        if let Some(t) = &self.thread {
            if !self.wake.asked.swap(true, Ordering::AcqRel) {
                t.thread().unpark();
            }
        }
    }

    /// Stops the thread and waits for it (after its current checkpoint).
    /// A stop's final TRUNCATE needs this: while another connection copies,
    /// SQLite answers a checkpoint with SQLITE_BUSY at once, without waiting.
    pub(crate) fn stop(&mut self) {
        // The thread ends after its current checkpoint.
        if let Some(t) = self.thread.take() {
            self.wake.stop.store(true, Ordering::Release);
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How the writer wakes this thread. A nudge raises `asked` and unparks
/// the thread only when `asked` was down, so a thread already woken (or
/// busy copying) costs the writer one atomic swap; the thread takes the
/// flag and parks when there is none, many nudges during one checkpoint
/// asking for one more checkpoint, not many. Parking sleeps at once: the
/// channel this replaced spun and called `sched_yield` a few times before
/// it slept, about three yields per commit on this thread alone.
#[derive(Default)]
struct Wake {
    asked: AtomicBool,
    stop: AtomicBool,
}

impl Wake {
    /// Waits for a nudge (true) or the stop (false).
    fn wait(&self) -> bool {
        loop {
            if self.stop.load(Ordering::Acquire) {
                return false;
            }
            if self.asked.swap(false, Ordering::AcqRel) {
                return true;
            }
            // An unpark since the swap above returns at once; a spurious
            // return goes round the loop.
            std::thread::park();
        }
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

    /// Whether to look at the newest frames for repeated pages: between
    /// rounds, once [`EARLY_FRAMES`] wait under the threshold, and again
    /// only after half as many more have arrived since the last look.
    fn examine_now(&self, wal: WalFrames, last_examined: u64) -> bool {
        wal.backfilled == 0
            && wal.last >= EARLY_FRAMES
            && wal.last < self.copy_after_frames
            && wal.last >= last_examined + EARLY_FRAMES / 2
    }
}

/// Whether frames whose pages are `pages` repeat few enough pages for an
/// early round: each written [`EARLY_REPEATS`] times or more on average.
fn repeats_enough(pages: &[u32]) -> bool {
    if pages.is_empty() {
        return false;
    }
    let mut distinct = pages.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    (distinct.len() as u64).saturating_mul(EARLY_REPEATS) <= pages.len() as u64
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

    /// The page numbers of frames `first..=last` (1-based), from the WAL
    /// index's page-mapping arrays (SQLite's documented WAL-index layout:
    /// 32 KiB blocks, each 4,096 page numbers then their hash table, the
    /// first block's array shortened by the 136-byte header). Frames up to
    /// `last`, read from the header first, stay as they are until the WAL
    /// starts over; a read that races a restart only gives a wrong estimate.
    pub(crate) fn pages(&mut self, first: u64, last: u64) -> Option<Vec<u32>> {
        if first == 0 || first > last {
            return Some(Vec::new());
        }
        if self.file.is_none() {
            self.file = File::open(&self.path).ok();
        }
        let file = self.file.as_ref()?;
        let mut pages = Vec::with_capacity((last - first + 1) as usize);
        let mut frame = first;
        while frame <= last {
            let (offset, room) = page_slot(frame);
            let n = room.min(last - frame + 1);
            let mut buf = vec![0u8; (n * 4) as usize];
            file.read_exact_at(&mut buf, offset).ok()?;
            pages.extend(
                buf.chunks_exact(4)
                    .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]])),
            );
            frame += n;
        }
        Some(pages)
    }
}

/// Page numbers in the WAL index's first block (4,096 less the header's
/// 136 bytes, in 4-byte words).
const FIRST_BLOCK_FRAMES: u64 = 4096 - 136 / 4;

/// Where frame `frame` (1-based) has its page number in the WAL index, and
/// how many frames from it on have theirs next to it in the same block.
fn page_slot(frame: u64) -> (u64, u64) {
    if frame <= FIRST_BLOCK_FRAMES {
        (136 + 4 * (frame - 1), FIRST_BLOCK_FRAMES - frame + 1)
    } else {
        let rest = frame - FIRST_BLOCK_FRAMES - 1;
        let (block, at) = (rest / 4096 + 1, rest % 4096);
        (block * 32768 + 4 * at, 4096 - at)
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

/// What the checkpointer shares with the writer.
struct Flags {
    restart_due: Arc<AtomicBool>,
    quiet: Arc<AtomicBool>,
    threshold: Arc<AtomicU64>,
}

fn run(conn: Connection, wake: &Wake, flags: Flags, mut index: WalIndex, sizing: Sizing) {
    let mut policy = sizing.policy();
    let mut sized = Instant::now();
    let mut db_file = None;
    // The WAL's last frame when its newest frames were last looked at.
    let mut last_examined = 0u64;
    // A round started early (repeated pages, or writes stopped) asks for
    // the restart once everything is copied, however short the WAL.
    let mut early_round = false;
    while wake.wait() {
        let frames = index.frames();
        if frames.is_some_and(|w| w.backfilled == 0) {
            // Between rounds: follow the database's size (one `stat`, only
            // while no copy is under way, and not at every commit).
            if sized.elapsed() >= RESIZE_INTERVAL {
                policy = sizing.policy();
                sized = Instant::now();
                flags.threshold.store(policy.bytes, Ordering::Relaxed);
            }
            early_round = false;
            if frames.is_some_and(|w| w.last < last_examined) {
                // Started over since.
                last_examined = 0;
            }
        }
        let quiet = flags.quiet.swap(false, Ordering::Relaxed)
            && frames.is_some_and(|w| w.last > w.backfilled);
        let repeated = match frames {
            Some(w) if policy.examine_now(w, last_examined) => {
                last_examined = w.last;
                index
                    .pages(w.last + 1 - EARLY_FRAMES, w.last)
                    .is_some_and(|p| repeats_enough(&p))
            }
            _ => false,
        };
        early_round |= quiet || repeated;
        if !early_round && !policy.copy_now(frames) {
            continue;
        }
        let copied = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get::<_, i64>(1));
        if copied.is_ok() {
            sync_copied(&mut db_file, &sizing.db_path);
        }
        match copied {
            Ok(frames) => {
                let now = index.frames();
                // The writer's RESTART copies what is left itself: a few
                // frames of a few pages, in an early round.
                let nearly_all = now.is_some_and(|w| {
                    w.last > 0 && w.last.saturating_sub(w.backfilled) <= RESTART_TAIL_FRAMES
                });
                if policy.restart_now(frames as u64, now) || (early_round && nearly_all) {
                    flags.restart_due.store(true, Ordering::Relaxed);
                }
            }
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
    fn page_numbers_are_found_where_the_wal_index_keeps_them() {
        // The first block's array starts after the 136-byte header.
        assert_eq!(page_slot(1), (136, 4062));
        assert_eq!(page_slot(4062), (136 + 4 * 4061, 1));
        // Each later block holds 4,096, at the start of its 32 KiB.
        assert_eq!(page_slot(4063), (32768, 4096));
        assert_eq!(page_slot(4063 + 4095), (32768 + 4 * 4095, 1));
        assert_eq!(page_slot(4063 + 4096), (2 * 32768, 4096));
    }

    #[test]
    fn early_rounds_are_for_writes_that_repeat_pages() {
        // A queue: a few pages over and over.
        let hot: Vec<u32> = (0..1024).map(|i| 2 + i % 20).collect();
        assert!(repeats_enough(&hot));
        // Random keys: nearly every frame a different page.
        let random: Vec<u32> = (0..1024).map(|i| (i * 7919) % 14_000).collect();
        assert!(!repeats_enough(&random));
        // Each page 7 times is not enough, 8 is.
        let seven: Vec<u32> = (0..1022).map(|i| i % 146).collect();
        assert!(!repeats_enough(&seven));
        let eight: Vec<u32> = (0..1024).map(|i| i % 128).collect();
        assert!(repeats_enough(&eight));
        assert!(!repeats_enough(&[]));
        let p = Policy {
            bytes: 32 << 20,
            copy_after_frames: 32_000,
            restart_frames: 32_000,
        };
        let w = |last, backfilled| WalFrames { last, backfilled };
        assert!(!p.examine_now(w(EARLY_FRAMES - 1, 0), 0));
        assert!(p.examine_now(w(EARLY_FRAMES, 0), 0));
        // Not again until half as many more have come.
        assert!(!p.examine_now(w(EARLY_FRAMES + 100, 0), EARLY_FRAMES));
        assert!(p.examine_now(w(EARLY_FRAMES + 512, 0), EARLY_FRAMES));
        // Not during a round, nor past the threshold (the round is due).
        assert!(!p.examine_now(w(5000, 10), 0));
        assert!(!p.examine_now(w(32_000, 0), 0));
    }

    #[test]
    fn the_page_numbers_of_a_real_wal_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let conn = crate::schema::open_writer(&path, AppendFsync::No, 1 << 20, 1024).unwrap();
        conn.execute_batch("CREATE TABLE t(k INTEGER PRIMARY KEY, v)")
            .unwrap();
        // 5,000 commits of one row each: past the first block of the index,
        // each commit writing the table's last leaf (and its parent).
        for i in 0..5000 {
            conn.execute("INSERT INTO t VALUES (?1, zeroblob(10))", [i])
                .unwrap();
        }
        let mut shm = path.as_os_str().to_owned();
        shm.push("-shm");
        let mut index = WalIndex::new(PathBuf::from(shm));
        let w = index.frames().unwrap();
        assert!(w.last > FIRST_BLOCK_FRAMES, "{w:?}");
        let pages = index.pages(1, w.last).unwrap();
        assert_eq!(pages.len() as u64, w.last);
        let page_count: u32 = conn
            .query_row("PRAGMA page_count", [], |r| r.get(0))
            .unwrap();
        assert!(
            pages.iter().all(|&p| p >= 1 && p <= page_count),
            "{pages:?}"
        );
        // The newest frames are the last leaf over and over.
        let newest = index.pages(w.last + 1 - EARLY_FRAMES, w.last).unwrap();
        assert!(repeats_enough(&newest));
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
