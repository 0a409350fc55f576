//! SQLite's page cache, with its end-of-transaction walk taken out of the
//! common case.
//!
//! At the end of every transaction SQLite's pager drops the cached pages
//! past the end of the database (`sqlite3PcacheTruncate(dbSize)`, which
//! matters after a rollback of pages the transaction had appended, or after
//! a vacuum shrank the file). Its default cache (`pcache1`) knows only the
//! highest page number it has ever held since the last such drop, and when
//! that is far past the limit it walks its whole hash table, one bucket per
//! cached page, to find what to drop. The highest number is nearly always
//! far past it: when a b-tree page splits and SQLite puts the new pages in
//! ascending order (`balance_nonroot`), it swaps two pages through a spare
//! page number, the page holding the lock bytes 1 GiB into the file
//! (page 1,048,577 at 1,024-byte pages), which is never a real page.
//! The cache then believes it may hold pages up to there, and the next
//! commit walks every bucket: 2.5-3.6% of the writer's time under random
//! LPUSH and ZADD with a 2 MB cache, and the reason the writer's cache was
//! kept that small (the walk grows with the cache; `schema.rs`).
//!
//! This module wraps the default cache and keeps, per cache, an upper
//! bound of the page numbers it may really hold: every page created by a
//! fetch and every page moved to a new number, except a move onto the
//! spare number, counted apart until the page moves off it again (always
//! within the same swap). A truncation whose limit lies past that bound
//! has nothing to drop and returns at once; any other goes to the default
//! cache as before, and the bound follows it down. Everything else is the
//! default cache's own code.
//!
//! The wrapper must be in place before SQLite initialises ([`install`]),
//! so the engine installs it before it opens its first connection. Where
//! something initialised SQLite first (a test that opened an in-memory
//! database), SQLite keeps its default cache and only loses the shortcut.

use std::ffi::{c_int, c_uint, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use rusqlite::ffi;

/// The default cache's methods, taken before the wrapper replaced them.
static INNER: OnceLock<Methods> = OnceLock::new();

/// SQLite's methods structure, shared by every thread once set.
struct Methods(ffi::sqlite3_pcache_methods2);

// SAFETY: the structure holds function pointers and the default cache's
// `pArg` (null for pcache1); it is only read after it is set, and SQLite
// calls these methods from any thread by design.
unsafe impl Send for Methods {}
unsafe impl Sync for Methods {}

/// Whether [`install`] put the wrapper in place.
static INSTALLED: OnceLock<bool> = OnceLock::new();

/// Truncations answered without the default cache's walk.
static SKIPPED: AtomicU64 = AtomicU64::new(0);

/// SQLite's lock byte offset (`PENDING_BYTE`); the page holding it is the
/// spare number `balance_nonroot` swaps pages through.
const PENDING_BYTE: u32 = 0x4000_0000;

/// One cache: the default cache's own, and what the wrapper knows of it.
struct Cache {
    inner: *mut ffi::sqlite3_pcache,
    /// No page held has a higher number (pages on `spare` aside).
    max_key: c_uint,
    /// The spare page number for this cache's page size.
    spare: c_uint,
    /// Pages moved onto `spare` and not moved off it yet.
    on_spare: u32,
}

fn inner() -> &'static ffi::sqlite3_pcache_methods2 {
    // Only reachable through methods `install` registered after setting it.
    &INNER.get().expect("page cache methods installed").0
}

/// Puts the wrapper in place, once per process. Returns whether it is in
/// place: false when SQLite had already been initialised.
pub fn install() -> bool {
    *INSTALLED.get_or_init(|| {
        // SAFETY: SQLite's documented configuration interface, called with
        // the argument types each option takes; SQLite copies the methods
        // structure, and refuses (SQLITE_MISUSE) once it is initialised.
        unsafe {
            let mut default: ffi::sqlite3_pcache_methods2 = std::mem::zeroed();
            if ffi::sqlite3_config(
                ffi::SQLITE_CONFIG_GETPCACHE2,
                &mut default as *mut ffi::sqlite3_pcache_methods2,
            ) != ffi::SQLITE_OK
                || default.xCreate.is_none()
                || INNER.set(Methods(default)).is_err()
            {
                return false;
            }
            let ours = ffi::sqlite3_pcache_methods2 {
                iVersion: default.iVersion,
                pArg: std::ptr::null_mut(),
                xInit: Some(x_init),
                xShutdown: Some(x_shutdown),
                xCreate: Some(x_create),
                xCachesize: Some(x_cachesize),
                xPagecount: Some(x_pagecount),
                xFetch: Some(x_fetch),
                xUnpin: Some(x_unpin),
                xRekey: Some(x_rekey),
                xTruncate: Some(x_truncate),
                xDestroy: Some(x_destroy),
                xShrink: Some(x_shrink),
            };
            ffi::sqlite3_config(
                ffi::SQLITE_CONFIG_PCACHE2,
                &ours as *const ffi::sqlite3_pcache_methods2,
            ) == ffi::SQLITE_OK
        }
    })
}

/// Whether the wrapper is in place.
pub fn installed() -> bool {
    INSTALLED.get().copied().unwrap_or(false)
}

/// How many truncations the wrapper has answered without the walk.
pub fn skipped_truncations() -> u64 {
    SKIPPED.load(Ordering::Relaxed)
}

/// The wrapper's state behind a cache handle SQLite holds.
///
/// # Safety
/// `p` must be a handle `x_create` returned and `x_destroy` has not freed;
/// SQLite calls a cache's methods from one thread at a time.
unsafe fn cache<'a>(p: *mut ffi::sqlite3_pcache) -> &'a mut Cache {
    &mut *(p as *mut Cache)
}

unsafe extern "C" fn x_init(_: *mut c_void) -> c_int {
    let m = inner();
    match m.xInit {
        Some(f) => f(m.pArg),
        None => ffi::SQLITE_OK,
    }
}

unsafe extern "C" fn x_shutdown(_: *mut c_void) {
    let m = inner();
    if let Some(f) = m.xShutdown {
        f(m.pArg);
    }
}

unsafe extern "C" fn x_create(
    sz_page: c_int,
    sz_extra: c_int,
    purgeable: c_int,
) -> *mut ffi::sqlite3_pcache {
    let Some(create) = inner().xCreate else {
        return std::ptr::null_mut();
    };
    let handle = create(sz_page, sz_extra, purgeable);
    if handle.is_null() {
        return handle;
    }
    let spare = PENDING_BYTE / (sz_page.max(1) as u32) + 1;
    Box::into_raw(Box::new(Cache {
        inner: handle,
        max_key: 0,
        spare,
        on_spare: 0,
    })) as *mut ffi::sqlite3_pcache
}

unsafe extern "C" fn x_cachesize(p: *mut ffi::sqlite3_pcache, n: c_int) {
    if let Some(f) = inner().xCachesize {
        f(cache(p).inner, n);
    }
}

unsafe extern "C" fn x_pagecount(p: *mut ffi::sqlite3_pcache) -> c_int {
    match inner().xPagecount {
        Some(f) => f(cache(p).inner),
        None => 0,
    }
}

unsafe extern "C" fn x_fetch(
    p: *mut ffi::sqlite3_pcache,
    key: c_uint,
    create: c_int,
) -> *mut ffi::sqlite3_pcache_page {
    let c = cache(p);
    let Some(fetch) = inner().xFetch else {
        return std::ptr::null_mut();
    };
    let page = fetch(c.inner, key, create);
    if create != 0 && !page.is_null() && key > c.max_key {
        c.max_key = key;
    }
    page
}

unsafe extern "C" fn x_unpin(
    p: *mut ffi::sqlite3_pcache,
    page: *mut ffi::sqlite3_pcache_page,
    discard: c_int,
) {
    if let Some(f) = inner().xUnpin {
        f(cache(p).inner, page, discard);
    }
}

unsafe extern "C" fn x_rekey(
    p: *mut ffi::sqlite3_pcache,
    page: *mut ffi::sqlite3_pcache_page,
    old: c_uint,
    new: c_uint,
) {
    let c = cache(p);
    if old == c.spare {
        c.on_spare = c.on_spare.saturating_sub(1);
    }
    if new == c.spare {
        c.on_spare += 1;
    } else if new > c.max_key {
        c.max_key = new;
    }
    if let Some(f) = inner().xRekey {
        f(c.inner, page, old, new);
    }
}

unsafe extern "C" fn x_truncate(p: *mut ffi::sqlite3_pcache, limit: c_uint) {
    let c = cache(p);
    if c.on_spare == 0 && limit > c.max_key {
        // No page at or past `limit`: nothing to drop.
        SKIPPED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    if let Some(f) = inner().xTruncate {
        f(c.inner, limit);
    }
    c.max_key = c.max_key.min(limit.saturating_sub(1));
    if limit <= c.spare {
        c.on_spare = 0;
    }
}

unsafe extern "C" fn x_destroy(p: *mut ffi::sqlite3_pcache) {
    let c = Box::from_raw(p as *mut Cache);
    if let Some(f) = inner().xDestroy {
        f(c.inner);
    }
}

unsafe extern "C" fn x_shrink(p: *mut ffi::sqlite3_pcache) {
    if let Some(f) = inner().xShrink {
        f(cache(p).inner);
    }
}
