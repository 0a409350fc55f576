//! Giving the space of deleted keys back to the file system, a little at a
//! time.
//!
//! When a key is deleted, SQLite puts the pages its rows leave empty on the
//! file's free list: later writes take them before the file grows, but the
//! file itself never shrinks. A cache that deleted half its keys, or a disk
//! that filled up and was cleared, keeps its whole size on disk until a
//! `VACUUM` rewrites the file, which takes the write lock for as long as it
//! copies every page (seconds to minutes).
//!
//! New files are made with `auto_vacuum = INCREMENTAL` (`schema.rs`):
//! SQLite then keeps a pointer map (one page of 5-byte entries per about
//! `page_size / 5` pages) saying which page points to each page, so that a
//! page can be moved. `PRAGMA incremental_vacuum(N)` moves up to N pages
//! from the end of the file into free slots nearer its start and cuts the
//! file's tail off: N pages freed, in one small transaction. The file on
//! disk shrinks when the checkpointer has copied that transaction from the
//! WAL (SQLite truncates the database file when a checkpoint copies the
//! whole WAL).
//!
//! The writer runs one such step between two groups when the free pages are
//! at least [`START_FREE_SHARE`] of the file and [`START_FREE_BYTES`], and
//! goes on, one step every [`STEP_EVERY`] at most, until they are down to
//! [`STOP_FREE_SHARE`]: a few free pages are left for the next writes. A
//! step's size adapts so that it takes about [`STEP_TARGET`] (moving a page
//! costs more when it is not in memory, or when it is an interior page
//! whose children's pointer-map entries move with it), so no group waits
//! behind a step for more than a few milliseconds.
//!
//! A file made before this, or with another setting, has `auto_vacuum =
//! NONE`, which only a full `VACUUM` can change; on such a file the free
//! pages are still reused by later writes and counted as room by the disk
//! guard, but the file does not shrink (docs/storage.md says how to convert
//! one). With an external checkpointer (Litestream) the writer does not
//! vacuum either: the file's pages are that process's to copy.

use std::time::{Duration, Instant};

use rusqlite::Connection;

/// Free pages, as a share of the file's pages, from which the writer starts
/// to give them back (1/8).
pub const START_FREE_SHARE: u64 = 8;

/// ...and at least this many bytes of them.
pub const START_FREE_BYTES: u64 = 1 << 20;

/// Free pages the writer leaves, as a share of the file's pages (1/64).
pub const STOP_FREE_SHARE: u64 = 64;

/// The least time between two steps, so that steps take at most a small
/// share of the writer's time while writes keep arriving.
pub const STEP_EVERY: Duration = Duration::from_millis(10);

/// About how long one step should take.
pub const STEP_TARGET: Duration = Duration::from_millis(2);

/// Pages per step: first, fewest, most.
const FIRST_STEP: u64 = 128;
const MIN_STEP: u64 = 8;
const MAX_STEP: u64 = 8192;

/// How often the free pages are counted while no vacuum is under way.
const LOOK_EVERY: Duration = Duration::from_millis(500);

/// The writer's incremental vacuum.
#[derive(Debug)]
pub(crate) struct Vacuum {
    /// Whether the file was made with `auto_vacuum = INCREMENTAL` (and the
    /// writer checkpoints it itself).
    enabled: bool,
    /// Between the start and the stop thresholds.
    active: bool,
    step_pages: u64,
    last: Instant,
}

/// What one step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Step {
    pub pages: u64,
    pub took: Duration,
}

/// Whether the database `conn` is open on can be vacuumed incrementally.
pub(crate) fn incremental(conn: &Connection) -> bool {
    conn.query_row("PRAGMA auto_vacuum", [], |r| r.get::<_, i64>(0))
        .is_ok_and(|mode| mode == 2)
}

/// Whether free pages `free` of a file of `pages` pages of `page_size`
/// bytes are enough to start giving them back.
pub(crate) fn worth_starting(free: u64, pages: u64, page_size: u64) -> bool {
    free.saturating_mul(page_size) >= START_FREE_BYTES
        && free.saturating_mul(START_FREE_SHARE) >= pages
}

/// Whether a vacuum under way is done.
pub(crate) fn done(free: u64, pages: u64) -> bool {
    free.saturating_mul(STOP_FREE_SHARE) <= pages || free == 0
}

/// The next step's size, after one of `pages` took `took`.
fn next_step(pages: u64, took: Duration) -> u64 {
    if took < STEP_TARGET / 2 {
        (pages * 2).min(MAX_STEP)
    } else if took > STEP_TARGET * 2 {
        (pages / 2).max(MIN_STEP)
    } else {
        pages
    }
}

impl Vacuum {
    pub(crate) fn new(enabled: bool) -> Self {
        Vacuum {
            enabled,
            active: false,
            step_pages: FIRST_STEP,
            last: Instant::now(),
        }
    }

    /// Runs one step if one is due: called by the writer between groups,
    /// outside any transaction. `counts` reads the free and total page
    /// counts. Answers the step it ran, if any.
    pub(crate) fn maybe_step(
        &mut self,
        conn: &Connection,
        page_size: u64,
        counts: impl Fn() -> (u64, u64),
    ) -> rusqlite::Result<Option<Step>> {
        if !self.enabled {
            return Ok(None);
        }
        let every = if self.active { STEP_EVERY } else { LOOK_EVERY };
        if self.last.elapsed() < every {
            return Ok(None);
        }
        self.last = Instant::now();
        let (free, pages) = counts();
        if !self.active {
            if !worth_starting(free, pages, page_size) {
                return Ok(None);
            }
            self.active = true;
            tracing::info!(
                free_pages = free,
                pages,
                "giving free pages back to the file system, a step at a time"
            );
        }
        if done(free, pages) {
            self.active = false;
            tracing::info!(pages, free_pages = free, "free pages given back");
            return Ok(None);
        }
        let keep = pages / STOP_FREE_SHARE;
        let n = self.step_pages.min(free.saturating_sub(keep)).max(1);
        let started = Instant::now();
        let result = run_step(conn, n);
        let took = started.elapsed();
        self.last = Instant::now();
        match result {
            Ok(()) => {
                self.step_pages = next_step(n.max(self.step_pages), took);
                Ok(Some(Step { pages: n, took }))
            }
            Err(e) => {
                // A full disk (the WAL cannot grow) or a busy lock: try
                // again later, from the start thresholds.
                self.active = false;
                self.step_pages = FIRST_STEP;
                Err(e)
            }
        }
    }
}

/// `PRAGMA incremental_vacuum(n)`, in its own transaction. The pragma
/// answers one (empty) row per page it frees, and frees the next page only
/// when asked for the next row, so every row is read. (A pragma's argument
/// cannot be a bound parameter.)
fn run_step(conn: &Connection, n: u64) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare(&format!("PRAGMA incremental_vacuum({n})"))?;
    let mut rows = stmt.query([])?;
    while rows.next()?.is_some() {}
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_at_an_eighth_and_a_mebibyte_and_stops_at_a_sixty_fourth() {
        // 1,000 free pages of 1 KiB: under 1 MiB.
        assert!(!worth_starting(1_000, 4_000, 1024));
        assert!(worth_starting(1_024, 8_192, 1024));
        assert!(!worth_starting(1_024, 8_193, 1024));
        assert!(!done(1_024, 8_192));
        assert!(done(128, 8_192));
        assert!(done(0, 0));
    }

    #[test]
    fn steps_grow_while_fast_and_shrink_while_slow() {
        assert_eq!(next_step(128, Duration::from_micros(100)), 256);
        assert_eq!(next_step(128, Duration::from_millis(2)), 128);
        assert_eq!(next_step(128, Duration::from_millis(10)), 64);
        assert_eq!(next_step(MAX_STEP, Duration::ZERO), MAX_STEP);
        assert_eq!(next_step(MIN_STEP, Duration::from_secs(1)), MIN_STEP);
    }

    #[test]
    fn a_step_frees_pages_and_the_file_shrinks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "PRAGMA page_size = 1024; PRAGMA auto_vacuum = INCREMENTAL;
             CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
             INSERT INTO t SELECT i, zeroblob(200) FROM n;
             DELETE FROM t WHERE k > 4000;",
        )
        .unwrap();
        assert!(incremental(&conn));
        let count = |sql: &str| conn.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap() as u64;
        let free = count("PRAGMA freelist_count");
        let pages = count("PRAGMA page_count");
        assert!(worth_starting(free, pages, 1024), "{free} of {pages}");
        run_step(&conn, 100).unwrap();
        // 100 free pages gone from the file (and the pointer-map pages
        // that described them, if the cut reached one).
        assert_eq!(count("PRAGMA freelist_count"), free - 100);
        let after = count("PRAGMA page_count");
        assert!(
            after <= pages - 100 && after >= pages - 102,
            "{pages} -> {after}"
        );
        let mut v = Vacuum::new(true);
        v.last -= LOOK_EVERY;
        let counts = || (count("PRAGMA freelist_count"), count("PRAGMA page_count"));
        let step = v.maybe_step(&conn, 1024, counts).unwrap().unwrap();
        assert_eq!(step.pages, FIRST_STEP);
        assert!(count("PRAGMA page_count") <= after - FIRST_STEP);
        // Not again before STEP_EVERY.
        assert_eq!(v.maybe_step(&conn, 1024, counts).unwrap(), None);
        let rows = count("SELECT count(*) FROM t");
        assert_eq!(rows, 4000);
        assert_eq!(
            conn.query_row("PRAGMA integrity_check", [], |r| r.get::<_, String>(0))
                .unwrap(),
            "ok"
        );
    }

    #[test]
    fn a_file_without_auto_vacuum_is_left_alone() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY)")
            .unwrap();
        assert!(!incremental(&conn));
        let mut v = Vacuum::new(incremental(&conn));
        v.last -= LOOK_EVERY;
        assert_eq!(
            v.maybe_step(&conn, 1024, || (1 << 20, 1 << 20)).unwrap(),
            None
        );
    }
}
