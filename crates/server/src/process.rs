//! The process's own memory figures, from /proc/self/status: what INFO
//! memory, MEMORY STATS and the server's clock sample.

/// A figure from /proc/self/status (`VmRSS`, `VmHWM`) in bytes.
pub fn proc_status_bytes(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with(field))?;
            let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kb * 1024)
        })
        .unwrap_or(0)
}

/// Memory this process holds, in bytes: its anonymous resident memory (the
/// heap of every allocator, SQLite's page caches, stacks) and shared memory
/// of its own (`RssAnon` + `RssShmem` in /proc/self/status; 0 where /proc
/// is absent). Not `VmRSS`: that also counts the database file's pages,
/// which every connection maps, once per connection that touched them,
/// although they are the OS page cache's (INFO reports them apart, as
/// `used_memory_db_page_cache`).
pub fn resident_bytes() -> u64 {
    proc_status_bytes("RssAnon:") + proc_status_bytes("RssShmem:")
}

/// The highest [`resident_bytes`] seen: sampled once a second by the
/// server's clock and at every read of it here.
static PEAK: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The highest [`resident_bytes`] sampled so far.
pub fn peak_memory() -> u64 {
    PEAK.load(std::sync::atomic::Ordering::Relaxed)
}

/// Samples [`resident_bytes`] for its peak and returns it.
pub fn sample_memory() -> u64 {
    let now = resident_bytes();
    PEAK.fetch_max(now, std::sync::atomic::Ordering::Relaxed);
    now
}
