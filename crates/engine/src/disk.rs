//! The disk under the database: how much of it respite uses, when it stops
//! taking writes that would use more, and how it gets out of a full disk.
//!
//! Two guards, both answered at the door (the server refuses the commands
//! Redis marks `denyoom`, the ones that may grow the data, before they are
//! queued) so that what can free space keeps working: DEL, UNLINK,
//! FLUSHDB, FLUSHALL, expiry and every read.
//!
//! - **`maxdisk`**: a byte budget for the database's live pages plus its
//!   WAL. Live pages, not the file's size: pages freed by a deletion are
//!   reused by later writes, so a DEL makes room at once though the file
//!   does not shrink. Over budget, writes get Redis's OOM error worded for
//!   disk. 0 (the default) means no budget.
//! - **A full disk**: SQLite needs room even to delete (a deletion appends
//!   pages to the WAL). So at open the engine sets aside a reserve file
//!   beside the database. The first time a write fails because the disk is
//!   full, the group it was in is rolled back and answered with the error,
//!   the reserve is deleted (its space is what the deletions that follow
//!   write into), and writes are refused as on a full disk. Once a
//!   checkpoint has truncated the WAL, writes are taken again as soon as
//!   they can succeed: the pages the deletions freed inside the database
//!   file take new data without the file growing, so the file system only
//!   needs a little room for the WAL; the reserve comes back, smaller if
//!   the room is short, and grows back to its size when there is room (see
//!   [`Disk::try_recover`]). A restart on a full disk finds the reserve
//!   still there (or gone, and then takes no writes until there is room
//!   for it).
//!
//! Every storage failure of a commit (disk full or another I/O error) is
//! counted for INFO.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::EngineError;

/// The disk's state as the writer keeps it and the server reads it.
#[derive(Debug)]
pub struct Disk {
    /// The reserve file.
    reserve_path: PathBuf,
    /// Its size; 0: no reserve.
    reserve_bytes: u64,
    /// `maxdisk`; 0: no budget.
    maxdisk: AtomicU64,
    /// Live pages plus WAL, in bytes, as of the last measurement.
    used: AtomicU64,
    /// Free pages inside the database file (SQLite's freelist), in bytes,
    /// as of the last measurement: room for new data without the file
    /// growing.
    free_pages: AtomicU64,
    /// The disk filled up and the reserve is released.
    full: AtomicBool,
    /// Commits that failed for a storage error (I/O, disk full).
    io_errors: AtomicU64,
    /// Times the disk was found full.
    full_events: AtomicU64,
}

impl Disk {
    /// The state for the database at `db`, with its reserve made (or found)
    /// beside it.
    pub(crate) fn new(db: &Path, reserve_bytes: u64, maxdisk: u64) -> Disk {
        let mut path = db.as_os_str().to_owned();
        path.push(".reserve");
        let disk = Disk {
            reserve_path: PathBuf::from(path),
            reserve_bytes,
            maxdisk: AtomicU64::new(maxdisk),
            used: AtomicU64::new(0),
            free_pages: AtomicU64::new(0),
            full: AtomicBool::new(false),
            io_errors: AtomicU64::new(0),
            full_events: AtomicU64::new(0),
        };
        if !disk.make_reserve() {
            tracing::error!(
                path = %disk.reserve_path.display(),
                bytes = reserve_bytes,
                "no room for the disk reserve: writes are refused until there is"
            );
            disk.full.store(true, Ordering::Relaxed);
        }
        disk
    }

    /// The reserve file's path.
    pub fn reserve_path(&self) -> &Path {
        &self.reserve_path
    }

    /// Makes the reserve file if it is missing; false if the disk has no
    /// room for it.
    fn make_reserve(&self) -> bool {
        self.make_reserve_of(self.reserve_bytes)
    }

    /// Makes the reserve file `bytes` long unless it is already that long;
    /// false if the disk has no room for it.
    fn make_reserve_of(&self, bytes: u64) -> bool {
        if bytes == 0 {
            return true;
        }
        if std::fs::metadata(&self.reserve_path).is_ok_and(|m| m.len() >= bytes) {
            return true;
        }
        // Not a sparse file: the blocks must really be taken. fallocate
        // takes them without writing them (a start costs no 16 MiB of
        // writes); where the file system cannot, zeros are written.
        let write = || -> std::io::Result<()> {
            let mut f = File::create(&self.reserve_path)?;
            if allocate(&f, bytes) {
                return f.sync_all();
            }
            let chunk = vec![0u8; 64 * 1024];
            let mut left = bytes;
            while left > 0 {
                let n = left.min(chunk.len() as u64) as usize;
                f.write_all(&chunk[..n])?;
                left -= n as u64;
            }
            f.sync_all()
        };
        match write() {
            Ok(()) => true,
            Err(_) => {
                let _ = std::fs::remove_file(&self.reserve_path);
                false
            }
        }
    }

    /// Whether a write that may grow the data must be refused now, and
    /// with which error.
    pub fn refusal(&self) -> Option<EngineError> {
        if self.full.load(Ordering::Relaxed) {
            return Some(EngineError::DiskFull);
        }
        let max = self.maxdisk.load(Ordering::Relaxed);
        (max > 0 && self.used.load(Ordering::Relaxed) > max).then_some(EngineError::OverMaxDisk)
    }

    /// `maxdisk` in force.
    pub fn maxdisk(&self) -> u64 {
        self.maxdisk.load(Ordering::Relaxed)
    }

    /// Sets `maxdisk` (CONFIG SET).
    pub fn set_maxdisk(&self, bytes: u64) {
        self.maxdisk.store(bytes, Ordering::Relaxed);
    }

    /// Live pages plus WAL at the last measurement.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Whether the disk is full (the reserve released).
    pub fn is_full(&self) -> bool {
        self.full.load(Ordering::Relaxed)
    }

    /// Commits that failed for a storage error.
    pub fn io_errors(&self) -> u64 {
        self.io_errors.load(Ordering::Relaxed)
    }

    /// Times the disk was found full.
    pub fn full_events(&self) -> u64 {
        self.full_events.load(Ordering::Relaxed)
    }

    /// Free pages inside the database file at the last measurement, in
    /// bytes.
    pub fn free_pages_bytes(&self) -> u64 {
        self.free_pages.load(Ordering::Relaxed)
    }

    /// Records a new measurement (the writer, after commits): live pages
    /// plus WAL, and the database's free pages.
    pub(crate) fn set_used(&self, bytes: u64, free_pages_bytes: u64) {
        self.used.store(bytes, Ordering::Relaxed);
        self.free_pages.store(free_pages_bytes, Ordering::Relaxed);
    }

    /// A commit or statement failed with `e`: counted, and if the disk is
    /// full, the reserve is released so that deletions can proceed.
    pub(crate) fn storage_failed(&self, e: &rusqlite::Error) {
        self.io_errors.fetch_add(1, Ordering::Relaxed);
        if e.sqlite_error_code() != Some(rusqlite::ErrorCode::DiskFull) {
            tracing::error!(error = %e, "storage error");
            return;
        }
        if self.full.swap(true, Ordering::Relaxed) {
            return;
        }
        self.full_events.fetch_add(1, Ordering::Relaxed);
        let released = self.reserve_bytes > 0 && std::fs::remove_file(&self.reserve_path).is_ok();
        tracing::error!(
            reserve = %self.reserve_path.display(),
            released_bytes = if released { self.reserve_bytes } else { 0 },
            "the disk is full: writes that add data are refused; DEL, UNLINK, FLUSHDB, \
             FLUSHALL and expiry go on in the space of the released reserve"
        );
    }

    /// After a truncating checkpoint (the WAL's file space given back): if
    /// the disk was full and writes can succeed again, puts the reserve back
    /// and takes them.
    ///
    /// Deletions free pages inside the database file, not on the file
    /// system: SQLite keeps them on its freelist and new data goes there
    /// before the file grows. So a write needs file-system room only for the
    /// WAL frames it appends (the checkpointer copies the WAL early while
    /// free space is short: see checkpointer.rs) and for whatever the free
    /// pages cannot hold. Writes are taken again once the file system has
    /// [`MIN_ROOM`] left beside the reserve; the reserve comes back at its
    /// full size if there is room for it and as much again, else at half
    /// the room (grown again later by [`Disk::top_up_reserve`]), so that a
    /// small disk that one deletion freed takes writes at once rather than
    /// waiting for room it may never get.
    pub(crate) fn try_recover(&self) {
        if !self.full.load(Ordering::Relaxed) {
            return;
        }
        let room = free_bytes(&self.reserve_path).unwrap_or(0);
        let reserve = if room >= self.reserve_bytes.saturating_mul(2) {
            self.reserve_bytes
        } else {
            self.reserve_bytes.min(room / 2)
        };
        if room.saturating_sub(reserve) < MIN_ROOM {
            return;
        }
        if self.make_reserve_of(reserve) {
            self.full.store(false, Ordering::Relaxed);
            tracing::warn!(
                free_bytes = room,
                free_pages_bytes = self.free_pages_bytes(),
                reserve_bytes = reserve,
                "the disk has room again: writes are taken"
            );
        }
    }

    /// Grows a reserve that [`Disk::try_recover`] put back short to its full
    /// size, once the file system has room for the rest and as much again.
    pub(crate) fn top_up_reserve(&self) {
        if self.reserve_bytes == 0 || self.full.load(Ordering::Relaxed) {
            return;
        }
        let have = std::fs::metadata(&self.reserve_path).map_or(0, |m| m.len());
        let missing = self.reserve_bytes.saturating_sub(have);
        if missing == 0 {
            return;
        }
        let room = free_bytes(&self.reserve_path).unwrap_or(0);
        if room >= missing.saturating_mul(2) && self.make_reserve() {
            tracing::info!(
                reserve_bytes = self.reserve_bytes,
                "the disk reserve is whole again"
            );
        }
    }
}

/// The file-system room, beside the reserve, that a full disk must have
/// again before writes are taken: enough for the WAL of a few groups.
const MIN_ROOM: u64 = 2 * 1024 * 1024;

/// Takes `len` bytes of blocks for `f` with `posix_fallocate`; false if
/// the file system cannot (then the caller writes zeros), or has no room
/// (then writing fails too).
fn allocate(f: &File, len: u64) -> bool {
    use std::os::fd::AsRawFd;
    let Ok(len) = libc::off_t::try_from(len) else {
        return false;
    };
    // SAFETY: `f` is an open file; posix_fallocate only extends it.
    unsafe { libc::posix_fallocate(f.as_raw_fd(), 0, len) == 0 }
}

/// Bytes of the file at `path` that are in the OS page cache, counted once
/// however many connections map them (`mincore` over a fresh mapping of the
/// file: it reports the page cache, not this mapping's own page tables).
pub(crate) fn cached_bytes(path: &Path) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let file = File::open(path).ok()?;
    let len = usize::try_from(file.metadata().ok()?.len()).ok()?;
    if len == 0 {
        return Some(0);
    }
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .ok()
        .filter(|&p| p > 0)?;
    // SAFETY: a fresh read-only shared mapping of an open file, never
    // dereferenced here; unmapped below.
    let map = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if map == libc::MAP_FAILED {
        return None;
    }
    let mut vec = vec![0u8; len.div_ceil(page)];
    // SAFETY: `map` is a mapping of `len` bytes and `vec` holds one byte
    // per page of it, as mincore requires.
    let rc = unsafe { libc::mincore(map, len, vec.as_mut_ptr()) };
    // SAFETY: `map` and `len` are the mapping made above.
    unsafe { libc::munmap(map, len) };
    if rc != 0 {
        return None;
    }
    let pages = vec.iter().filter(|&&b| b & 1 == 1).count() as u64;
    Some((pages * page as u64).min(len as u64))
}

/// Free bytes on the file system holding `path` (for an unprivileged
/// process: `f_bavail`).
pub(crate) fn free_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c` is a NUL-terminated path and `st` is written by the call
    // before it is read (only on success).
    let rc = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it filled `st`.
    let st = unsafe { st.assume_init() };
    Some(st.f_bavail.saturating_mul(st.f_frsize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_and_full_disk_refuse_with_their_errors() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("t.db");
        let disk = Disk::new(&db, 64 * 1024, 0);
        assert_eq!(
            std::fs::metadata(disk.reserve_path()).unwrap().len(),
            64 * 1024
        );
        assert!(disk.refusal().is_none());
        disk.set_used(10_000, 0);
        disk.set_maxdisk(5_000);
        assert_eq!(
            disk.refusal().map(|e| e.to_string()),
            Some("OOM command not allowed when used disk > 'maxdisk'.".into())
        );
        disk.set_maxdisk(0);
        assert!(disk.refusal().is_none());
        // A full disk: the reserve goes, writes are refused, and once there
        // is room again (there is, here) the reserve comes back.
        let full = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
            None,
        );
        disk.storage_failed(&full);
        assert!(!disk.reserve_path().exists());
        assert_eq!(
            disk.refusal().map(|e| e.to_string()),
            Some("OOM command not allowed when the disk is full.".into())
        );
        assert_eq!((disk.io_errors(), disk.full_events()), (1, 1));
        disk.try_recover();
        assert!(disk.refusal().is_none());
        assert!(disk.reserve_path().exists());
    }
}
