//! A commit's WAL frames in a few large writes instead of two per frame.
//!
//! SQLite appends a commit to the WAL one frame at a time, and each frame
//! with two `pwrite`s: its 24-byte header, then its page. A group commit of
//! 256 SETs to random keys dirties about 256 leaf pages, so it costs some
//! 500 `pwrite`s before its one `fdatasync`: on a VM each of those is a
//! trip into the kernel that copies half a kilobyte. Nothing needs them to
//! be separate: the frames are contiguous in the file, nobody may read them
//! before the commit has made them part of the WAL, and under `appendfsync
//! always` the commit is not over until the WAL has been synced.
//!
//! So the writer's connection opens its files through a VFS of its own,
//! `respite-wal-gather`, which is the default unix VFS except for one
//! thing: writes to a WAL file whose gathering is on are appended to a
//! buffer instead of being written, as long as each continues where the
//! last one ended, and the buffer goes to the file (one write per 4 KiB
//! page of the file) when SQLite next does anything else with that file
//! (sync, read, size, truncate, a file control, a write elsewhere, close).
//! Under `synchronous = FULL` a commit ends with the WAL's sync, so its
//! frames are in the file before the sync, before the WAL index makes them
//! visible to any reader, and an error writing them is the sync's error:
//! the commit fails and SQLite rolls it back, as it would had the `pwrite`
//! failed. A commit of 256 frames makes about 35 write calls instead of
//! 512.
//!
//! Gathering is on only while the writer's connection runs with
//! `synchronous = FULL` (`appendfsync always`; [`set_gathering`]). Under
//! NORMAL a commit does not sync the WAL, and SQLite publishes its frames
//! in the WAL index right after writing them: a buffered frame could be
//! read (as nothing) by a reader that sees the new index, so there every
//! write goes straight through. Every other file (the database, the
//! `-shm` index, temporary files) and every other method is the unix VFS's
//! own: a file that is not a WAL is opened by the unix VFS with its own
//! method table and never passes through this module again.

use std::ffi::{c_int, c_void, CStr};
use std::ptr;
use std::sync::OnceLock;

use rusqlite::ffi;

/// The name the writer's connection opens its database with.
pub const VFS_NAME: &CStr = c"respite-wal-gather";

/// A buffer past this size is written at once, whatever comes next.
const MAX_GATHER: usize = 4 << 20;

/// The buffer goes to the file in pieces that end on 4 KiB boundaries of
/// the file. The kernel sizes the page-cache folio it creates for a write
/// by the write's length: one `pwrite` of 100 KiB into a fresh part of the
/// file makes large folios, and every later commit that touches a byte of
/// one dirties and writes back the whole folio (measured: 2-3x the bytes
/// per SET at 10 and 50 connections). Pieces of at most 4 KiB keep the
/// WAL in 4 KiB pages, as SQLite's own frame-by-frame writes do, and still
/// write about eight frames per call. (The unix VFS also takes only the low
/// 17 bits of a write's length, so a piece must stay under 128 KiB anyway.)
const WRITE_CHUNK: usize = 4096;

/// What a gathering WAL file keeps after the unix VFS's own file structure.
struct Gather {
    /// The unix VFS's methods for this file.
    inner: *const ffi::sqlite3_io_methods,
    /// Whether writes are gathered now (see [`set_gathering`]).
    on: bool,
    /// Where in the file `buf` starts.
    start: i64,
    /// Frames written by SQLite, not yet by the kernel.
    buf: Vec<u8>,
}

/// The unix VFS (the process's default), and where in a file structure of
/// this VFS the [`Gather`] part starts.
struct Base {
    unix: *mut ffi::sqlite3_vfs,
    offset: usize,
}

// SAFETY: the pointer is to SQLite's static unix VFS, which lives as long as
// the process and is only read.
unsafe impl Send for Base {}
unsafe impl Sync for Base {}

static BASE: OnceLock<Option<Base>> = OnceLock::new();

/// Registers the VFS (once per process). Returns whether it is available;
/// if it is not (no default VFS, registration refused), the writer opens
/// its database with the default VFS and every frame is written by itself.
pub fn register() -> bool {
    BASE.get_or_init(|| {
        // SAFETY: plain SQLite API calls; the new VFS is leaked, so it lives
        // as long as the process, as SQLite requires of a registered VFS.
        unsafe {
            if ffi::sqlite3_initialize() != ffi::SQLITE_OK {
                return None;
            }
            let unix = ffi::sqlite3_vfs_find(ptr::null());
            if unix.is_null() {
                return None;
            }
            let align = std::mem::align_of::<Gather>();
            let offset = ((*unix).szOsFile as usize).div_ceil(align) * align;
            let mut vfs: ffi::sqlite3_vfs = ptr::read(unix);
            vfs.szOsFile = (offset + std::mem::size_of::<Gather>()) as c_int;
            vfs.zName = VFS_NAME.as_ptr();
            vfs.pNext = ptr::null_mut();
            vfs.xOpen = Some(open);
            let vfs = Box::into_raw(Box::new(vfs));
            if ffi::sqlite3_vfs_register(vfs, 0) != ffi::SQLITE_OK {
                drop(Box::from_raw(vfs));
                return None;
            }
            Some(Base { unix, offset })
        }
    })
    .is_some()
}

fn base() -> &'static Base {
    match BASE.get() {
        Some(Some(base)) => base,
        // `open` is only ever reached through the registered VFS.
        _ => unreachable!("the WAL-gathering VFS is used before it is registered"),
    }
}

/// The [`Gather`] part of a file opened by this VFS as a WAL.
///
/// # Safety
/// `file` must be a WAL file opened by [`open`] and not yet closed.
unsafe fn gather<'a>(file: *mut ffi::sqlite3_file) -> &'a mut Gather {
    unsafe { &mut *((file as *mut u8).add(base().offset) as *mut Gather) }
}

/// Turns gathering on or off for the WAL of `conn`'s main database: on
/// exactly while the connection commits with `synchronous = FULL`. Does
/// nothing when the connection was not opened through this VFS or has no
/// WAL open. Call it between transactions (the buffer is empty then).
pub fn set_gathering(conn: &rusqlite::Connection, on: bool) {
    let mut file: *mut ffi::sqlite3_file = ptr::null_mut();
    // SAFETY: the file control only reads the pager's WAL file pointer; the
    // file it points to belongs to this connection, which the caller owns
    // on this thread.
    unsafe {
        let rc = ffi::sqlite3_file_control(
            conn.handle(),
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_JOURNAL_POINTER,
            &mut file as *mut _ as *mut c_void,
        );
        if rc != ffi::SQLITE_OK || file.is_null() || (*file).pMethods != &METHODS {
            return;
        }
        let g = gather(file);
        if !on {
            let _ = flush(file, g);
        }
        g.on = on;
    }
}

/// Whether `conn`'s WAL is open through this VFS with gathering on.
pub fn gathering(conn: &rusqlite::Connection) -> bool {
    let mut file: *mut ffi::sqlite3_file = ptr::null_mut();
    // SAFETY: as in `set_gathering`.
    unsafe {
        let rc = ffi::sqlite3_file_control(
            conn.handle(),
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_JOURNAL_POINTER,
            &mut file as *mut _ as *mut c_void,
        );
        rc == ffi::SQLITE_OK && !file.is_null() && (*file).pMethods == &METHODS && gather(file).on
    }
}

unsafe extern "C" fn open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let base = base();
    // SAFETY: the unix VFS opens the file in place (its structure is the
    // first part of ours) with its own VFS object, which its methods expect.
    unsafe {
        let Some(unix_open) = (*base.unix).xOpen else {
            return ffi::SQLITE_CANTOPEN;
        };
        let rc = unix_open(base.unix, name, file, flags, out_flags);
        if rc != ffi::SQLITE_OK || (*file).pMethods.is_null() || flags & ffi::SQLITE_OPEN_WAL == 0 {
            return rc;
        }
        let g = (file as *mut u8).add(base.offset) as *mut Gather;
        ptr::write(
            g,
            Gather {
                inner: (*file).pMethods,
                on: false,
                start: 0,
                buf: Vec::new(),
            },
        );
        (*file).pMethods = &METHODS;
        rc
    }
}

/// Writes the gathered frames, one call per [`WRITE_CHUNK`] page of the
/// file. The buffer is emptied even if the write fails: the error goes to
/// SQLite, which abandons the commit.
unsafe fn flush(file: *mut ffi::sqlite3_file, g: &mut Gather) -> c_int {
    if g.buf.is_empty() {
        return ffi::SQLITE_OK;
    }
    // SAFETY: the unix write of our own buffer, on the file it belongs to.
    let rc = unsafe {
        match (*g.inner).xWrite {
            Some(write) => {
                let mut rc = ffi::SQLITE_OK;
                let mut done = 0;
                while done < g.buf.len() {
                    let offset = g.start + done as i64;
                    let room = WRITE_CHUNK - (offset as u64 % WRITE_CHUNK as u64) as usize;
                    let n = room.min(g.buf.len() - done);
                    rc = write(
                        file,
                        g.buf[done..].as_ptr() as *const c_void,
                        n as c_int,
                        offset,
                    );
                    if rc != ffi::SQLITE_OK {
                        break;
                    }
                    done += n;
                }
                rc
            }
            None => ffi::SQLITE_IOERR_WRITE,
        }
    };
    g.buf.clear();
    if g.buf.capacity() > MAX_GATHER {
        g.buf.shrink_to(MAX_GATHER);
    }
    rc
}

/// Forwards a method to the unix VFS after writing what is gathered;
/// a failed write is answered instead.
macro_rules! after_flush {
    ($file:ident, $method:ident $(, $arg:expr)*) => {{
        // SAFETY: `$file` is a WAL file opened by `open`.
        let g = unsafe { gather($file) };
        let rc = unsafe { flush($file, g) };
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        match unsafe { (*g.inner).$method } {
            Some(f) => unsafe { f($file $(, $arg)*) },
            None => ffi::SQLITE_IOERR,
        }
    }};
}

/// Forwards a method to the unix VFS as it is.
macro_rules! forward {
    ($file:ident, $method:ident, $missing:expr $(, $arg:expr)*) => {{
        // SAFETY: `$file` is a WAL file opened by `open`.
        let g = unsafe { gather($file) };
        match unsafe { (*g.inner).$method } {
            Some(f) => unsafe { f($file $(, $arg)*) },
            None => $missing,
        }
    }};
}

unsafe extern "C" fn x_close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: the file is ours until this returns; the Gather part is
    // dropped once, here, after the last write.
    unsafe {
        let g = gather(file);
        let flushed = flush(file, g);
        let inner = g.inner;
        ptr::drop_in_place(g as *mut Gather);
        let closed = match (*inner).xClose {
            Some(close) => close(file),
            None => ffi::SQLITE_OK,
        };
        if flushed != ffi::SQLITE_OK {
            flushed
        } else {
            closed
        }
    }
}

unsafe extern "C" fn x_read(
    file: *mut ffi::sqlite3_file,
    buf: *mut c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    after_flush!(file, xRead, buf, amount, offset)
}

unsafe extern "C" fn x_write(
    file: *mut ffi::sqlite3_file,
    data: *const c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    // SAFETY: `file` is a WAL file opened by `open`; `data` holds `amount`
    // bytes (SQLite's contract for xWrite).
    unsafe {
        let g = gather(file);
        if g.on && amount > 0 {
            let continues = !g.buf.is_empty() && offset == g.start + g.buf.len() as i64;
            if !continues || g.buf.len() + amount as usize > MAX_GATHER {
                let rc = flush(file, g);
                if rc != ffi::SQLITE_OK {
                    return rc;
                }
                g.start = offset;
            }
            g.buf.extend_from_slice(std::slice::from_raw_parts(
                data as *const u8,
                amount as usize,
            ));
            return ffi::SQLITE_OK;
        }
    }
    after_flush!(file, xWrite, data, amount, offset)
}

unsafe extern "C" fn x_truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    after_flush!(file, xTruncate, size)
}

unsafe extern "C" fn x_sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    after_flush!(file, xSync, flags)
}

unsafe extern "C" fn x_file_size(file: *mut ffi::sqlite3_file, size: *mut i64) -> c_int {
    after_flush!(file, xFileSize, size)
}

unsafe extern "C" fn x_lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    forward!(file, xLock, ffi::SQLITE_OK, level)
}

unsafe extern "C" fn x_unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    forward!(file, xUnlock, ffi::SQLITE_OK, level)
}

unsafe extern "C" fn x_check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    forward!(file, xCheckReservedLock, ffi::SQLITE_OK, out)
}

unsafe extern "C" fn x_file_control(
    file: *mut ffi::sqlite3_file,
    op: c_int,
    arg: *mut c_void,
) -> c_int {
    after_flush!(file, xFileControl, op, arg)
}

unsafe extern "C" fn x_sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    forward!(file, xSectorSize, 4096)
}

unsafe extern "C" fn x_device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    forward!(file, xDeviceCharacteristics, 0)
}

unsafe extern "C" fn x_shm_map(
    file: *mut ffi::sqlite3_file,
    page: c_int,
    size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    forward!(file, xShmMap, ffi::SQLITE_IOERR, page, size, extend, out)
}

unsafe extern "C" fn x_shm_lock(
    file: *mut ffi::sqlite3_file,
    offset: c_int,
    n: c_int,
    flags: c_int,
) -> c_int {
    forward!(file, xShmLock, ffi::SQLITE_IOERR, offset, n, flags)
}

unsafe extern "C" fn x_shm_barrier(file: *mut ffi::sqlite3_file) {
    forward!(file, xShmBarrier, ())
}

unsafe extern "C" fn x_shm_unmap(file: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    forward!(file, xShmUnmap, ffi::SQLITE_OK, delete)
}

unsafe extern "C" fn x_fetch(
    file: *mut ffi::sqlite3_file,
    offset: i64,
    amount: c_int,
    out: *mut *mut c_void,
) -> c_int {
    // A fetch that finds nothing mapped answers OK with a null pointer, and
    // SQLite reads instead.
    after_flush!(file, xFetch, offset, amount, out)
}

unsafe extern "C" fn x_unfetch(file: *mut ffi::sqlite3_file, offset: i64, p: *mut c_void) -> c_int {
    forward!(file, xUnfetch, ffi::SQLITE_OK, offset, p)
}

/// The methods of a WAL file opened through this VFS.
static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(x_close),
    xRead: Some(x_read),
    xWrite: Some(x_write),
    xTruncate: Some(x_truncate),
    xSync: Some(x_sync),
    xFileSize: Some(x_file_size),
    xLock: Some(x_lock),
    xUnlock: Some(x_unlock),
    xCheckReservedLock: Some(x_check_reserved_lock),
    xFileControl: Some(x_file_control),
    xSectorSize: Some(x_sector_size),
    xDeviceCharacteristics: Some(x_device_characteristics),
    xShmMap: Some(x_shm_map),
    xShmLock: Some(x_shm_lock),
    xShmBarrier: Some(x_shm_barrier),
    xShmUnmap: Some(x_shm_unmap),
    xFetch: Some(x_fetch),
    xUnfetch: Some(x_unfetch),
};

/// Names the VFS for `Connection::open_with_flags_and_vfs`.
pub fn vfs_name() -> &'static str {
    // The name is ASCII.
    VFS_NAME.to_str().unwrap_or("unix")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AppendFsync;
    use crate::schema::{open_reader, open_writer};

    fn count(conn: &rusqlite::Connection) -> i64 {
        conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn gathering_follows_appendfsync() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.db");
        let conn = open_writer(&path, AppendFsync::Always, -1, 512).unwrap();
        assert!(gathering(&conn));
        set_gathering(&conn, false);
        assert!(!gathering(&conn));
        drop(conn);
        let conn = open_writer(&path, AppendFsync::Everysec, -1, 512).unwrap();
        assert!(!gathering(&conn));
    }

    /// Commits of many frames, one big enough to spill pages into the WAL
    /// before it commits (the writer then reads its own gathered frames
    /// back), a rollback of a spilled transaction, and a WAL started over:
    /// another connection sees exactly what was committed, and so does
    /// the file after the writer is gone.
    #[test]
    fn gathered_commits_read_back_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.db");
        let conn = open_writer(&path, AppendFsync::Always, -1, 512).unwrap();
        assert!(gathering(&conn));
        conn.execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)")
            .unwrap();
        let reader = open_reader(&path).unwrap();
        let insert = |from: i64, n: i64| {
            conn.execute(
                "WITH RECURSIVE s(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM s WHERE i < ?1 + ?2 - 1)
                 INSERT INTO t SELECT i, randomblob(300) FROM s",
                [from, n],
            )
            .unwrap();
        };
        for round in 0..20 {
            conn.execute_batch("BEGIN IMMEDIATE").unwrap();
            insert(round * 100, 100);
            conn.execute_batch("COMMIT").unwrap();
            assert_eq!(count(&reader), (round + 1) * 100);
        }
        // 20,000 rows of 300 bytes: far past the writer's 2 MB cache, so
        // pages spill into the WAL mid-transaction and are read back.
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        insert(10_000, 20_000);
        let sum: i64 = conn
            .query_row("SELECT sum(length(v)) FROM t WHERE k >= 10000", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(sum, 20_000 * 300);
        conn.execute_batch("ROLLBACK").unwrap();
        assert_eq!(count(&reader), 2_000);
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        insert(10_000, 20_000);
        conn.execute_batch("COMMIT").unwrap();
        assert_eq!(count(&reader), 22_000);
        // The WAL copied and started over: the next commit writes its
        // header and frames from the start of the file.
        drop(reader);
        conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |_| Ok(()))
            .unwrap();
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        insert(50_000, 100);
        conn.execute_batch("COMMIT").unwrap();
        let reader = open_reader(&path).unwrap();
        assert_eq!(count(&reader), 22_100);
        drop(reader);
        // Without a clean stop: the file is copied aside with its WAL while
        // the writer still holds it open, as a crash would leave them.
        for suffix in ["", "-wal"] {
            let from = format!("{}{suffix}", path.display());
            let to = format!("{}{suffix}", dir.path().join("copy.db").display());
            std::fs::copy(from, to).unwrap();
        }
        drop(conn);
        let copy = rusqlite::Connection::open(dir.path().join("copy.db")).unwrap();
        assert_eq!(count(&copy), 22_100);
        let check: String = copy
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok");
    }
}
