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
//!   checkpoint has made the WAL reusable and the file system has room for
//!   the reserve and as much again, the reserve is put back and writes are
//!   taken again. A restart on a full disk finds the reserve still there
//!   (or gone, and then takes no writes until there is room for it).
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
        if self.reserve_bytes == 0 {
            return true;
        }
        if std::fs::metadata(&self.reserve_path).is_ok_and(|m| m.len() >= self.reserve_bytes) {
            return true;
        }
        // Not a sparse file: the blocks must really be taken. fallocate
        // takes them without writing them (a start costs no 16 MiB of
        // writes); where the file system cannot, zeros are written.
        let write = || -> std::io::Result<()> {
            let mut f = File::create(&self.reserve_path)?;
            if allocate(&f, self.reserve_bytes) {
                return f.sync_all();
            }
            let chunk = vec![0u8; 64 * 1024];
            let mut left = self.reserve_bytes;
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

    /// Records a new measurement (the writer, after commits).
    pub(crate) fn set_used(&self, bytes: u64) {
        self.used.store(bytes, Ordering::Relaxed);
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
    /// the disk was full and the file system now has room for the reserve
    /// and half as much again (room for the WAL to grow before the next
    /// checkpoint; the database's own freed pages are reused without
    /// growing its file), puts the reserve back and takes writes again.
    pub(crate) fn try_recover(&self) {
        if !self.full.load(Ordering::Relaxed) {
            return;
        }
        let room = free_bytes(&self.reserve_path).unwrap_or(0);
        let needed = (self.reserve_bytes + self.reserve_bytes / 2).max(1024 * 1024);
        if room < needed {
            return;
        }
        if self.make_reserve() {
            self.full.store(false, Ordering::Relaxed);
            tracing::warn!(
                free_bytes = room,
                "the disk has room again: the reserve is back and writes are taken"
            );
        }
    }
}

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

/// Free bytes on the file system holding `path` (for an unprivileged
/// process: `f_bavail`).
fn free_bytes(path: &Path) -> Option<u64> {
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
        disk.set_used(10_000);
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
