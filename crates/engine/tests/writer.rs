//! The writer's failure rules, through the engine's public API on a real
//! SQLite file: a command that fails before writing fails alone; one that
//! fails after writing takes its whole transaction down with it, and
//! nothing of that transaction is visible.

use std::time::Duration;

use respite_engine::{Engine, EngineConfig, EngineError, Result, Txn, WriteItem, WriteOp};

type Outcome = Vec<Result<&'static str>>;

/// The default configuration, on a file in `dir`.
fn config(dir: &tempfile::TempDir) -> EngineConfig {
    EngineConfig {
        path: dir.path().join("t.db"),
        ..EngineConfig::default()
    }
}

fn engine(dir: &tempfile::TempDir) -> Engine<&'static str> {
    Engine::open(config(dir)).expect("open")
}

/// Submits one item and waits for its results.
fn write(engine: &Engine<&'static str>, ops: Vec<WriteOp<&'static str>>) -> Outcome {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let item = WriteItem {
        ops,
        done: Box::new(move |results| {
            let _ = tx.send(results);
        }),
    };
    assert!(engine.submit_write(item).is_ok());
    rx.recv_timeout(Duration::from_secs(10))
        .expect("writer answered")
}

fn set(key: &'static str) -> WriteOp<&'static str> {
    Box::new(move |txn: &mut Txn<'_, '_>| {
        txn.put_string(0, key.as_bytes(), b"v", None)?;
        Ok("OK")
    })
}

fn get(engine: &Engine<&'static str>, key: &'static str) -> Option<Vec<u8>> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let job = Box::new(move |view: &respite_engine::View<'_, '_>| {
        let value = view.get_string(0, key.as_bytes()).expect("read");
        let done: respite_engine::ReadDone = Box::new(move || {
            let _ = tx.send(value);
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
    rx.recv_timeout(Duration::from_secs(10))
        .expect("reader answered")
}

#[test]
fn failing_before_writing_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(&dir);
    let fails_early: WriteOp<&'static str> = Box::new(|txn: &mut Txn<'_, '_>| {
        // Reads, then refuses, as INCR does on a non-integer.
        let _ = txn.get_string(0, b"a")?;
        Err(EngineError::NotInteger)
    });
    let out = write(&engine, vec![set("a"), fails_early, set("b")]);
    assert!(matches!(out[0], Ok("OK")));
    assert!(matches!(out[1], Err(EngineError::NotInteger)));
    assert!(matches!(out[2], Ok("OK")));
    assert!(get(&engine, "a").is_some() && get(&engine, "b").is_some());
}

#[test]
fn failing_after_writing_rolls_back_its_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(&dir);
    let fails_late: WriteOp<&'static str> = Box::new(|txn: &mut Txn<'_, '_>| {
        txn.put_string(0, b"half", b"applied", None)?;
        Err(EngineError::NotInteger)
    });
    let out = write(&engine, vec![set("a"), fails_late, set("c")]);
    // The transaction holding `a` and the failed command is rolled back and
    // both are answered with an error; `c` runs in the next transaction.
    assert!(
        matches!(out[0], Err(EngineError::CommitFailed(_))),
        "{:?}",
        out[0]
    );
    assert!(
        matches!(out[1], Err(EngineError::CommitFailed(_))),
        "{:?}",
        out[1]
    );
    assert!(matches!(out[2], Ok("OK")));
    assert_eq!(get(&engine, "a"), None);
    assert_eq!(get(&engine, "half"), None);
    assert!(get(&engine, "c").is_some());
    assert_eq!(engine.stats().failed_commits, 1);
}

/// Submits one item without waiting; its results arrive on the receiver.
fn submit(
    engine: &Engine<&'static str>,
    ops: Vec<WriteOp<&'static str>>,
) -> crossbeam_channel::Receiver<Outcome> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let item = WriteItem {
        ops,
        done: Box::new(move |results| {
            let _ = tx.send(results);
        }),
    };
    assert!(engine.submit_write(item).is_ok());
    rx
}

#[test]
fn an_item_longer_than_max_batch_after_others_in_the_same_drain() {
    // Found by a pipeline of thousands of SETs from several clients: an
    // item that spans commits must keep track of itself when the commits
    // it triggers answer (and remove) the items queued before it.
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(EngineConfig {
        max_batch: 4,
        ..config(&dir)
    })
    .expect("open");
    // Keep the writer busy so the next two items are drained together.
    let blocker: WriteOp<&'static str> = Box::new(|txn: &mut Txn<'_, '_>| {
        std::thread::sleep(Duration::from_millis(300));
        txn.put_string(0, b"blocker", b"v", None)?;
        Ok("OK")
    });
    let first = submit(&engine, vec![blocker]);
    std::thread::sleep(Duration::from_millis(50));
    // The blocker and these two ops stay under max_batch, so the long item
    // joins their transaction and its first op commits it.
    let short = submit(&engine, vec![set("a1"), set("a2")]);
    let long = submit(&engine, (0..10).map(|_| set("b")).collect());
    for (rx, n) in [(first, 1), (short, 2), (long, 10)] {
        let out = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("writer answered");
        assert_eq!(out.len(), n);
        assert!(out.iter().all(|r| matches!(r, Ok("OK"))), "{out:?}");
    }
    // The writer is alive and still applying.
    assert!(matches!(write(&engine, vec![set("after")])[..], [Ok("OK")]));
    assert_eq!(get(&engine, "after").as_deref(), Some(&b"v"[..]));
}

#[test]
fn a_panicking_operation_fails_alone_and_the_engine_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(EngineConfig {
        readers: 1,
        ..config(&dir)
    })
    .expect("open");
    let panics: WriteOp<&'static str> = Box::new(|txn: &mut Txn<'_, '_>| {
        txn.put_string(0, b"half", b"done", None)?;
        panic!("a bug in a command");
    });
    let out = write(&engine, vec![set("a"), panics, set("c")]);
    // Like a failure after writing: its transaction is rolled back whole,
    // and the error says why.
    for r in &out[..2] {
        assert!(
            matches!(r, Err(EngineError::CommitFailed(m)) if m.contains("internal error: a bug in a command")),
            "{out:?}"
        );
    }
    assert!(matches!(out[2], Ok("OK")), "{out:?}");
    assert_eq!(get(&engine, "half"), None);
    assert_eq!(get(&engine, "a"), None);
    assert!(get(&engine, "c").is_some());
    // The only reader survives jobs that panic.
    for _ in 0..3 {
        let job = Box::new(
            |_: &respite_engine::View<'_, '_>| -> respite_engine::ReadDone {
                panic!("a bug in a read")
            },
        );
        assert!(engine
            .submit_read(
                job,
                respite_engine::ReadNeeds {
                    snapshot: false,
                    quick: true
                }
            )
            .is_ok());
    }
    assert!(get(&engine, "c").is_some());
    assert!(matches!(write(&engine, vec![set("d")])[..], [Ok("OK")]));
}

#[test]
fn the_items_one_commit_finished_are_delivered_together_in_queue_order() {
    use std::sync::{Arc, Mutex};
    let dir = tempfile::tempdir().unwrap();
    // Every call of the delivery: the ids of the items it carried.
    let calls: Arc<Mutex<Vec<Vec<u32>>>> = Arc::default();
    let (ids_tx, ids_rx) = crossbeam_channel::unbounded::<u32>();
    let recorded = calls.clone();
    let deliver: respite_engine::Deliver<&'static str> = Box::new(move |batch| {
        for finished in batch {
            finished.complete();
        }
        // Each completion sent its id: these are the ones of this call.
        let ids: Vec<u32> = ids_rx.try_iter().collect();
        recorded.lock().unwrap().push(ids);
    });
    let engine: Engine<&'static str> = Engine::open_with_delivery(
        config(&dir),
        respite_engine::Delivery {
            writes: deliver,
            reads: respite_engine::deliver_reads_inline(),
        },
    )
    .expect("open");
    // The first item holds the writer until the other four are queued, so
    // all five are applied in one transaction and finished by one commit.
    let (gate_tx, gate_rx) = crossbeam_channel::bounded::<()>(1);
    let (all_done_tx, all_done_rx) = crossbeam_channel::unbounded::<()>();
    for id in 0..5u32 {
        let gate_rx = gate_rx.clone();
        let ids_tx = ids_tx.clone();
        let all_done_tx = all_done_tx.clone();
        let op: WriteOp<&'static str> = Box::new(move |txn: &mut Txn<'_, '_>| {
            if id == 0 {
                gate_rx
                    .recv_timeout(Duration::from_secs(10))
                    .expect("the others were queued");
            }
            txn.put_string(0, format!("k{id}").as_bytes(), b"v", None)?;
            Ok("OK")
        });
        let item = WriteItem {
            ops: vec![op],
            done: Box::new(move |results| {
                assert!(matches!(results[..], [Ok("OK")]));
                let _ = ids_tx.send(id);
                let _ = all_done_tx.send(());
            }),
        };
        assert!(engine.submit_write(item).is_ok());
    }
    gate_tx.send(()).unwrap();
    for _ in 0..5 {
        all_done_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("every item answered");
    }
    assert_eq!(*calls.lock().unwrap(), vec![vec![0, 1, 2, 3, 4]]);
    assert_eq!(engine.stats().batches, 1);
}

#[test]
fn a_panicking_completion_loses_only_its_own_reply() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(&dir);
    // The first item holds the writer until the second is queued, so both
    // finish in one commit and are completed in one group.
    let (gate_tx, gate_rx) = crossbeam_channel::bounded::<()>(1);
    let held: WriteOp<&'static str> = Box::new(move |txn: &mut Txn<'_, '_>| {
        gate_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the second item was queued");
        txn.put_string(0, b"a", b"v", None)?;
        Ok("OK")
    });
    let item = WriteItem {
        ops: vec![held],
        done: Box::new(|_| panic!("a bug in a completion")),
    };
    assert!(engine.submit_write(item).is_ok());
    let second = submit(&engine, vec![set("b")]);
    gate_tx.send(()).unwrap();
    let out = second
        .recv_timeout(Duration::from_secs(10))
        .expect("the other item of the group was answered");
    assert!(matches!(out[..], [Ok("OK")]));
    // The writer goes on.
    assert!(matches!(write(&engine, vec![set("c")])[..], [Ok("OK")]));
    assert!(get(&engine, "a").is_some());
}

#[test]
fn writes_after_shutdown_are_refused_not_lost_silently() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(&dir);
    assert_eq!(write(&engine, vec![set("before")]).len(), 1);
    engine.shutdown();
    let item = WriteItem {
        ops: vec![set("after")],
        done: Box::new(|_| panic!("a refused item is never answered")),
    };
    assert!(matches!(
        engine.submit_write(item),
        Err(EngineError::ShuttingDown)
    ));
}
