//! Bringing the engine's results back into the runtime, one wake per group.
//!
//! Each write item carries a callback that releases its backpressure permits
//! and completes the connection's oneshot channel; each read job ends with
//! one that completes its oneshot. Called on the writer or a reader thread,
//! every one of those completions wakes a task from outside the runtime, and
//! a wake from outside costs a signal to a parked runtime thread (an eventfd
//! write). Worse, on a small machine the woken runtime thread often shares
//! the engine thread's core and preempts it at once: it answers one client
//! and parks, the engine thread resumes, completes the next item, and the
//! two threads trade the core once per reply (measured: about one context
//! switch per SET without pipelining, and a third less throughput).
//!
//! So the engine hands over whole groups (a commit's finished items, the
//! jobs a reader ran in a row) in one message each ([`channel`]), and one
//! task inside the runtime ([`Dispatcher`]) runs the callbacks. Their wakes
//! are then local to the runtime: pushes onto its run queue, no signal, no
//! preemption. Order is kept: each group is in queue order and the
//! dispatcher completes it front to back.

use std::sync::Arc;

use respite_engine::{Deliver, Delivery, Finished, ReadDone};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use crate::Reply;

/// One group of finished work.
enum Group {
    /// The items one commit finished.
    Writes(Vec<Finished<Reply>>),
    /// The results of the jobs one reader ran in a row.
    Reads(Vec<ReadDone>),
}

impl Group {
    /// Runs every completion of the group, in order.
    fn complete(self) {
        match self {
            Group::Writes(items) => items.into_iter().for_each(Finished::complete),
            Group::Reads(done) => done.into_iter().for_each(respite_engine::complete_read),
        }
    }
}

/// The runtime's end of the delivery channel: run it as a task before any
/// work is queued.
pub struct Dispatcher {
    /// The engine's finished groups, in the order they were handed over.
    rx: UnboundedReceiver<Group>,
}

/// Hands `group` to the dispatcher; if it is gone (the runtime has
/// stopped), completes it right here, so no acknowledgement is ever dropped.
fn send(tx: &UnboundedSender<Group>, group: Group) {
    if let Err(unsent) = tx.send(group) {
        unsent.0.complete();
    }
}

/// A delivery for [`respite_engine::Engine::open_with_delivery`] and the
/// dispatcher that completes what it delivers.
pub fn channel() -> (Delivery<Reply>, Dispatcher) {
    let (tx, rx) = unbounded_channel::<Group>();
    let reads_tx = tx.clone();
    let writes: Deliver<Reply> = Box::new(move |items| send(&tx, Group::Writes(items)));
    let delivery = Delivery {
        writes,
        reads: Arc::new(move |done| send(&reads_tx, Group::Reads(done))),
    };
    (delivery, Dispatcher { rx })
}

impl Dispatcher {
    /// Completes every delivered group, until the engine drops its senders.
    pub async fn run(mut self) {
        while let Some(group) = self.rx.recv().await {
            group.complete();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use respite_engine::{Engine, EngineConfig, Txn, WriteItem, WriteOp};

    use super::*;

    fn engine(dir: &tempfile::TempDir, delivery: Delivery<Reply>) -> Engine<Reply> {
        let config = EngineConfig {
            path: dir.path().join("t.db"),
            ..EngineConfig::default()
        };
        Engine::open_with_delivery(config, delivery).expect("open")
    }

    /// Submits one SET; the receiver gets whether its completion ran inside
    /// a tokio runtime.
    fn set(engine: &Engine<Reply>) -> std::sync::mpsc::Receiver<bool> {
        let (tx, rx) = std::sync::mpsc::channel();
        let op: WriteOp<Reply> = Box::new(|txn: &mut Txn<'_, '_>| {
            txn.put_string(0, b"k", b"v", None)?;
            Ok(Reply::Ok)
        });
        let item = WriteItem {
            ops: vec![op],
            done: Box::new(move |results| {
                assert!(matches!(results[..], [Ok(Reply::Ok)]));
                let _ = tx.send(tokio::runtime::Handle::try_current().is_ok());
            }),
        };
        assert!(engine.submit_write(item).is_ok());
        rx
    }

    /// Submits one quick read of `k`; the receiver gets the value read and
    /// whether its completion ran inside a tokio runtime.
    fn get(engine: &Engine<Reply>) -> std::sync::mpsc::Receiver<(Option<Vec<u8>>, bool)> {
        let (tx, rx) = std::sync::mpsc::channel();
        let job = Box::new(move |view: &respite_engine::View<'_, '_>| {
            let value = view.get_string(0, b"k").ok().flatten();
            let done: ReadDone = Box::new(move || {
                let _ = tx.send((value, tokio::runtime::Handle::try_current().is_ok()));
            });
            done
        });
        assert!(engine
            .submit_read(
                job,
                respite_engine::ReadNeeds {
                    snapshot: false,
                    quick: true
                }
            )
            .is_ok());
        rx
    }

    /// A SET then a GET; whether each completion ran inside the runtime.
    fn set_then_get(engine: &Engine<Reply>) -> (bool, bool) {
        let wait = Duration::from_secs(10);
        let wrote = set(engine).recv_timeout(wait).expect("SET answered");
        let (value, read) = get(engine).recv_timeout(wait).expect("GET answered");
        assert_eq!(value.as_deref(), Some(&b"v"[..]));
        (wrote, read)
    }

    #[test]
    fn completions_run_inside_the_runtime() {
        let dir = tempfile::tempdir().unwrap();
        let (delivery, dispatcher) = channel();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let engine = engine(&dir, delivery);
        let in_runtime = runtime.block_on(async {
            tokio::spawn(dispatcher.run());
            tokio::task::spawn_blocking(move || set_then_get(&engine))
                .await
                .unwrap()
        });
        assert_eq!(in_runtime, (true, true));
    }

    #[test]
    fn without_a_dispatcher_the_engine_completes_them_itself() {
        let dir = tempfile::tempdir().unwrap();
        let (delivery, dispatcher) = channel();
        drop(dispatcher);
        let engine = engine(&dir, delivery);
        assert_eq!(set_then_get(&engine), (false, false));
    }
}
