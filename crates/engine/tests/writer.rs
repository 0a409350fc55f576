//! The writer's failure rules, through the engine's public API on a real
//! SQLite file: a command that fails before writing fails alone; one that
//! fails after writing takes its whole transaction down with it, and
//! nothing of that transaction is visible.

use std::time::Duration;

use respite_engine::{Engine, EngineConfig, EngineError, Result, Txn, WriteItem, WriteOp};

type Outcome = Vec<Result<&'static str>>;

fn engine(dir: &tempfile::TempDir) -> Engine<&'static str> {
    Engine::open(EngineConfig {
        path: dir.path().join("t.db"),
        ..EngineConfig::default()
    })
    .expect("open")
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
        let _ = tx.send(view.get_string(0, key.as_bytes()).expect("read"));
    });
    assert!(engine.submit_read(job, false).is_ok());
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
