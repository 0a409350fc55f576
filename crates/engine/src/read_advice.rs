//! The database read at random, as the b-tree reads it.
//!
//! Every connection maps the database file into memory (`mmap_size`), so
//! a page that is not in SQLite's own cache is read straight from the OS
//! page cache without a `pread` and a copy. When the page is not in the
//! page cache either, the fault reads it from the disk, and by default the
//! kernel reads around it: up to the file's read-ahead window (128 KiB
//! here) on each side of a miss. Reads through `pread` (the WAL, a
//! connection without the map) have their own read-ahead, which takes
//! pages cached next to a miss for the trace of a sequential reader and
//! reads up to 128 KiB ahead; the pages it brings in make the next miss
//! near them look sequential too. A b-tree descent to one random key needs
//! a handful of pages, not 32 each: over a file much larger than the
//! memory the process may use (a memory cgroup, a small machine), either
//! read-ahead made every GET read about 340 KB from the disk and evict as
//! much of the pages it needed next, and served 3,000 GETs a second where
//! the disk allows 17,000 random reads.
//!
//! SQLite's unix VFS lets a program replace the system calls it makes
//! (`xSetSystemCall`). [`install`] replaces two of them: `open`, which
//! opens as asked and then tells the kernel the file is read at random
//! (`posix_fadvise(POSIX_FADV_RANDOM)`: a `pread` reads what it asks for
//! and no more), and `mmap`, which maps as asked and then advises the same
//! for the mapping (`madvise(MADV_RANDOM)`: a fault reads the page it needs
//! and no more). Pages already in the page cache are still mapped around a
//! fault ("fault-around" maps only cached pages), so a database that fits
//! in memory is read as fast as before. A mapping SQLite grows with
//! `mremap` keeps the advice, which belongs to the mapping. Writes are not
//! affected: the WAL is appended and synced as before.

use std::ffi::{c_char, c_int, c_void};
use std::sync::OnceLock;

use rusqlite::ffi;

type Open = unsafe extern "C" fn(*const c_char, c_int, c_int) -> c_int;
type Mmap =
    unsafe extern "C" fn(*mut c_void, usize, c_int, c_int, c_int, libc::off_t) -> *mut c_void;

/// The VFS's own `open`, which [`open_random`] calls.
static OPEN: OnceLock<Open> = OnceLock::new();
/// The VFS's own `mmap`, which [`map_random`] calls.
static MMAP: OnceLock<Mmap> = OnceLock::new();
/// Whether the replacement is in place.
static INSTALLED: OnceLock<bool> = OnceLock::new();

/// Replaces the unix VFS's `open` and `mmap` (once per process, before
/// any connection opens a file). Returns whether both are in place; if
/// they are not, reads go with the kernel's default read-ahead.
pub fn install() -> bool {
    *INSTALLED.get_or_init(|| {
        // SAFETY: SQLite's documented VFS API. The functions stored in the
        // syscall table have the signatures SQLite calls `open` and `mmap`
        // with (`open(2)`'s with its mode, `mmap(2)`'s), and the originals
        // are kept before the replacements can be called.
        unsafe {
            if ffi::sqlite3_initialize() != ffi::SQLITE_OK {
                return false;
            }
            let unix = ffi::sqlite3_vfs_find(c"unix".as_ptr());
            if unix.is_null() {
                return false;
            }
            let (Some(get), Some(set)) = ((*unix).xGetSystemCall, (*unix).xSetSystemCall) else {
                return false;
            };
            let (Some(open), Some(mmap)) =
                (get(unix, c"open".as_ptr()), get(unix, c"mmap".as_ptr()))
            else {
                return false;
            };
            let open: Open = std::mem::transmute::<unsafe extern "C" fn(), Open>(open);
            let mmap: Mmap = std::mem::transmute::<unsafe extern "C" fn(), Mmap>(mmap);
            if OPEN.set(open).is_err() || MMAP.set(mmap).is_err() {
                return false;
            }
            let open_random =
                std::mem::transmute::<Open, unsafe extern "C" fn()>(open_random as Open);
            let map_random =
                std::mem::transmute::<Mmap, unsafe extern "C" fn()>(map_random as Mmap);
            set(unix, c"open".as_ptr(), Some(open_random)) == ffi::SQLITE_OK
                && set(unix, c"mmap".as_ptr(), Some(map_random)) == ffi::SQLITE_OK
        }
    })
}

/// `open`, then `posix_fadvise(POSIX_FADV_RANDOM)` on what it opened.
unsafe extern "C" fn open_random(path: *const c_char, flags: c_int, mode: c_int) -> c_int {
    let Some(open) = OPEN.get() else {
        return -1;
    };
    // SAFETY: the caller's own arguments, passed on unchanged; the advice
    // applies to the descriptor just opened.
    unsafe {
        let fd = open(path, flags, mode);
        if fd >= 0 {
            libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_RANDOM);
        }
        fd
    }
}

/// `mmap`, then `madvise(MADV_RANDOM)` on what it mapped.
unsafe extern "C" fn map_random(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    offset: libc::off_t,
) -> *mut c_void {
    let Some(mmap) = MMAP.get() else {
        return libc::MAP_FAILED;
    };
    // SAFETY: the caller's own arguments, passed on unchanged; the advice
    // applies to exactly the range just mapped.
    unsafe {
        let p = mmap(addr, len, prot, flags, fd, offset);
        if p != libc::MAP_FAILED {
            libc::madvise(p, len, libc::MADV_RANDOM);
        }
        p
    }
}

#[cfg(test)]
mod tests {
    /// The replacements go in; a connection that maps its file still reads
    /// and writes through them, and the kernel shows the map's advice.
    #[test]
    fn maps_are_advised_and_still_work() {
        assert!(super::install());
        let dir = tempfile::tempdir().expect("a scratch directory");
        let conn = rusqlite::Connection::open(dir.path().join("t.db")).expect("open");
        conn.pragma_update(None, "mmap_size", 1 << 30)
            .expect("mmap_size");
        conn.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (randomblob(100000));")
            .expect("write");
        let n: i64 = conn
            .query_row("SELECT length(x) FROM t", [], |r| r.get(0))
            .expect("read");
        assert_eq!(n, 100000);
        // The kernel shows the advice as the mapping's `rr` flag.
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
        let mapping = smaps
            .split_inclusive("VmFlags:")
            .zip(smaps.split("VmFlags:").skip(1))
            .find(|(head, _)| head.contains("t.db"))
            .map(|(_, flags)| flags.lines().next().unwrap_or_default().to_string());
        let flags = mapping.expect("the database file is mapped");
        assert!(flags.split_whitespace().any(|f| f == "rr"), "{flags}");
    }
}
