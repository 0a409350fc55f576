//! What the engine's integration tests share.

use std::time::Duration;

use respite_engine::{Engine, WriteItem, WriteOp};

/// Runs one write operation and waits for it to commit; it must succeed.
pub fn write(engine: &Engine<()>, op: WriteOp<()>) {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let item = WriteItem {
        ops: vec![op],
        done: Box::new(move |results| {
            let _ = tx.send(results);
        }),
    };
    assert!(engine.submit_write(item).is_ok());
    let results = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("writer answered");
    assert!(results.iter().all(Result::is_ok));
}
