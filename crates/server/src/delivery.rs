//! Bringing the writer's results back into the runtime, one wake per commit.
//!
//! Each write item carries a callback that releases its backpressure permits
//! and completes the connection's oneshot channel. Called on the writer
//! thread, every one of those completions wakes a task from outside the
//! runtime, and a wake from outside costs a signal to a parked runtime thread
//! (an eventfd write). Worse, on a small machine the woken runtime thread
//! often shares the writer's core and preempts it at once: it answers one
//! client and parks, the writer resumes, completes the next item, and the two
//! threads trade the core once per reply (measured: about one context switch
//! per SET without pipelining, and a third less throughput).
//!
//! So the writer hands the whole list a commit finished to this module in one
//! message ([`channel`]), and one task inside the runtime ([`Dispatcher`])
//! runs the callbacks. Their wakes are then local to the runtime: pushes onto
//! its run queue, no signal, no preemption. Order is kept: the list is in
//! queue order and the dispatcher completes it front to back.

use respite_engine::{Deliver, Finished};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use crate::Reply;

/// The runtime's end of the delivery channel: run it as a task before any
/// write is queued.
pub struct Dispatcher {
    /// The commits' finished items, in commit order.
    rx: UnboundedReceiver<Vec<Finished<Reply>>>,
}

/// A delivery for [`respite_engine::Engine::open_with_delivery`] and the
/// dispatcher that completes what it delivers. If the dispatcher is gone
/// (the runtime has stopped), the writer completes the items itself, so no
/// acknowledgement is ever dropped.
pub fn channel() -> (Deliver<Reply>, Dispatcher) {
    let (tx, rx) = unbounded_channel::<Vec<Finished<Reply>>>();
    let deliver: Deliver<Reply> = Box::new(move |batch| {
        if let Err(unsent) = tx.send(batch) {
            for finished in unsent.0 {
                finished.complete();
            }
        }
    });
    (deliver, Dispatcher { rx })
}

impl Dispatcher {
    /// Completes every delivered item, until the engine drops its sender.
    pub async fn run(mut self) {
        while let Some(batch) = self.rx.recv().await {
            for finished in batch {
                finished.complete();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use respite_engine::{Engine, EngineConfig, Txn, WriteItem, WriteOp};

    use super::*;

    fn engine(dir: &tempfile::TempDir, deliver: Deliver<Reply>) -> Engine<Reply> {
        let config = EngineConfig {
            path: dir.path().join("t.db"),
            ..EngineConfig::default()
        };
        Engine::open_with_delivery(config, deliver).expect("open")
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

    #[test]
    fn completions_run_inside_the_runtime() {
        let dir = tempfile::tempdir().unwrap();
        let (deliver, dispatcher) = channel();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let engine = engine(&dir, deliver);
        let rx = set(&engine);
        let in_runtime = runtime.block_on(async {
            tokio::spawn(dispatcher.run());
            tokio::task::spawn_blocking(move || rx.recv_timeout(Duration::from_secs(10)))
                .await
                .unwrap()
        });
        assert_eq!(in_runtime, Ok(true));
    }

    #[test]
    fn without_a_dispatcher_the_writer_completes_them_itself() {
        let dir = tempfile::tempdir().unwrap();
        let (deliver, dispatcher) = channel();
        drop(dispatcher);
        let engine = engine(&dir, deliver);
        let in_runtime = set(&engine).recv_timeout(Duration::from_secs(10));
        assert_eq!(in_runtime, Ok(false));
    }
}
