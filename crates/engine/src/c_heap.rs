//! The C library's heap, which SQLite allocates from, kept instead of
//! handed back to the kernel after every statement.
//!
//! SQLite takes its memory from `malloc` (Rust's own allocations go to
//! mimalloc). Some statements build a temporary b-tree each time they run:
//! every `RETURNING` clause, and an `INSERT ... SELECT` from the table it
//! inserts into (the writer's pushes, pops and key ids avoid both now,
//! but COPY and ad hoc statements still build them). Each such b-tree gets its own
//! pager and page cache, whose first allocation is a block of 20 pages of
//! SQLite's default 4 KiB size, about 86 KB, freed again when the statement
//! ends. glibc's thread arenas give the top of their heap back to the
//! kernel (`madvise(MADV_DONTNEED)`) once more than its trim threshold
//! (128 KiB, unless it grew on its own) lies free there, and the next
//! statement faults the same memory in again, zeroed page by page: once a
//! run of random SETs had left the writer's arena in that shape, a job
//! queue spent a quarter of the writer's time in page faults and `madvise`
//! (`perf`: `pcache1FetchStage2` faulting under `btreeBeginTrans`, and
//! `sysmalloc`), a third of every push and pop.
//!
//! [`keep`] raises the trim threshold to [`TRIM_THRESHOLD`], so up to that
//! much free memory stays in each arena for the next statement, and fixes
//! the threshold past which an allocation gets its own `mmap` at
//! [`MMAP_THRESHOLD`] (setting either turns off glibc's sliding of both).
//! At most a few arenas (the writer, the readers, the checkpointer) ever
//! hold that much free; what a large value took is still given back when
//! it is freed, by `munmap`, past the mmap threshold.

use std::sync::Once;

/// Free memory each arena keeps at its top before giving any back.
pub const TRIM_THRESHOLD: i32 = 16 << 20;

/// Allocations from this size on are mapped on their own, and unmapped
/// when freed.
pub const MMAP_THRESHOLD: i32 = 4 << 20;

/// Sets both thresholds, once per process (see the module's doc). Only
/// with glibc; other C libraries keep their own behaviour.
pub fn keep() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: mallopt only changes the allocator's parameters, under
        // its own lock; any thread may call it at any time.
        unsafe {
            if libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD) != 1
                || libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) != 1
            {
                tracing::debug!("the C heap keeps glibc's own trim and mmap thresholds");
            }
        }
    });
}
