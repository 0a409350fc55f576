//! A read's completion: what hands one read job's result to its caller
//! once the job has run (the server's completes a tokio oneshot channel).
//! The read pool runs jobs and hands their completions back in groups (see
//! `read_pool.rs`); a read that found keys expired hands its completion to
//! the writer, which calls it once their deletion is committed and
//! announced (see `notify.rs`). Both name it here.

/// Hands one job's result to its caller; called outside any read
/// transaction, possibly together with other jobs' (see
/// [`DeliverReads`](crate::read_pool::DeliverReads)).
pub type ReadDone = Box<dyn FnOnce() + Send>;

/// Calls one job's [`ReadDone`]. One that panics (a bug) loses its own reply
/// only, not the rest of its group, nor the thread or task delivering it.
pub fn complete_read(done: ReadDone) {
    if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(done)) {
        tracing::error!(panic = %crate::panic_message(&*payload), "a read completion panicked");
    }
}
