//! `View::count_existing` (EXISTS, TOUCH) against the plain answer, one
//! `exists` per key, on a real database: keys named densely and sparsely,
//! repeated, missing, expired, in another database, before the first key
//! and after the last, so that its merge of the sorted keys with a scan
//! of the table (restarted when the scan strays) is checked where it
//! turns.

use std::time::Duration;

mod common;

use common::write;
use respite_engine::{now_ms, Engine, EngineConfig, ReadNeeds, Txn};

/// `count_existing` and the count of `exists` one key at a time, in one
/// snapshot.
fn both(engine: &Engine<()>, db: u32, keys: Vec<Vec<u8>>) -> (u64, u64) {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let job = Box::new(move |view: &respite_engine::View<'_, '_>| {
        let merged = view.count_existing(db, &keys).expect("count");
        let plain = keys
            .iter()
            .filter(|k| view.exists(db, k).expect("exists"))
            .count() as u64;
        let done: respite_engine::ReadDone = Box::new(move || {
            let _ = tx.send((merged, plain));
        });
        done
    });
    assert!(engine
        .submit_read(
            job,
            ReadNeeds {
                snapshot: true,
                quick: false
            }
        )
        .is_ok());
    rx.recv_timeout(Duration::from_secs(30))
        .expect("reader answered")
}

/// A small deterministic generator (the test must not depend on luck).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

#[test]
fn count_existing_agrees_with_one_lookup_per_key() {
    let dir = tempfile::tempdir().unwrap();
    let engine: Engine<()> = Engine::open(EngineConfig {
        path: dir.path().join("t.db"),
        readers: 1,
        ..EngineConfig::default()
    })
    .expect("open");
    // Keys k0..k2999 in db 0 except every third; every seventh of them
    // already expired; a few in db 1; and the empty key.
    write(
        &engine,
        Box::new(|txn: &mut Txn<'_, '_>| {
            let past = now_ms() - 1000;
            for i in 0..3000u32 {
                if i % 3 == 0 {
                    continue;
                }
                let expire = (i % 7 == 0).then_some(past);
                txn.put_string(0, format!("k{i}").as_bytes(), b"v", expire)?;
            }
            for i in 0..10u32 {
                txn.put_string(1, format!("k{i}").as_bytes(), b"v", None)?;
            }
            txn.put_string(0, b"", b"v", None)?;
            Ok(())
        }),
    );
    let k = |i: u64| format!("k{i}").into_bytes();
    let mut rng = Lcg(7);
    let mut cases: Vec<(u32, Vec<Vec<u8>>)> = vec![
        // Dense, in the order a client names them, and everything.
        (0, (0..3000).map(k).collect()),
        // A narrow run, and the same run repeated.
        (0, (100..140).chain(100..140).map(k).collect()),
        // Missing only: before the first key, after the last, between.
        (0, vec![b"a".to_vec(), b"zzz".to_vec(), b"k0".to_vec()]),
        (0, vec![b"k".to_vec(), b"k1".to_vec(), b"k10".to_vec()]),
        // The empty key, and keys that are prefixes of each other.
        (
            0,
            vec![Vec::new(), b"k1".to_vec(), b"k1".to_vec(), b"k12".to_vec()],
        ),
        // Another database, a single key, an expired one.
        (1, (0..20).map(k).collect()),
        (0, vec![k(1)]),
        (0, vec![k(7), k(7)]),
    ];
    // Sparse: a few keys far apart, and random mixes with repeats.
    for size in [2, 5, 50, 500, 5000] {
        for _ in 0..4 {
            let keys = (0..size).map(|_| k(rng.next() % 3300)).collect();
            cases.push((0, keys));
        }
    }
    for (db, keys) in cases {
        let shown = format!("db {db}, {} keys", keys.len());
        let (merged, plain) = both(&engine, db, keys);
        assert_eq!(merged, plain, "{shown}");
    }
    // The counts themselves, for the dense case: 2000 stored, less the
    // expired (multiples of 7 that are not multiples of 3).
    let expired = (0..3000).filter(|i| i % 3 != 0 && i % 7 == 0).count() as u64;
    assert_eq!(
        both(&engine, 0, (0..3000).map(k).collect()).0,
        2000 - expired
    );
}
