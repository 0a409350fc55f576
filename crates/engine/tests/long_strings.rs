//! Long string values live in the `strings` table, out of their key rows
//! (`schema::inline_value_max`): every way a string is written, copied,
//! renamed, overwritten, deleted, expired or flushed keeps exactly one
//! value row per long string, and reads see the bytes written.

use std::time::Duration;

mod common;

use common::write;
use respite_engine::{now_ms, Engine, EngineConfig, ReadNeeds, Txn};

/// The string values of `keys` in database 0, read on the pool.
fn read(engine: &Engine<()>, keys: &[&str]) -> Vec<Option<Vec<u8>>> {
    let keys: Vec<Vec<u8>> = keys.iter().map(|k| k.as_bytes().to_vec()).collect();
    let (tx, rx) = crossbeam_channel::bounded(1);
    let job = Box::new(move |view: &respite_engine::View<'_, '_>| {
        let values: Vec<_> = keys
            .iter()
            .map(|k| view.get_string(0, k).expect("get"))
            .collect();
        let done: respite_engine::ReadDone = Box::new(move || {
            let _ = tx.send(values);
        });
        done
    });
    let needs = ReadNeeds {
        snapshot: true,
        quick: true,
    };
    assert!(engine.submit_read(job, needs).is_ok());
    rx.recv_timeout(Duration::from_secs(30))
        .expect("reader answered")
}

/// Rows in `strings`, and string key rows that point there.
fn rows(path: &std::path::Path) -> (i64, i64) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let values = conn
        .query_row("SELECT count(*) FROM strings", [], |r| r.get(0))
        .unwrap();
    let pointing = conn
        .query_row(
            "SELECT count(*) FROM keys WHERE type = 0 AND id IS NOT NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    (values, pointing)
}

fn long(fill: u8, len: usize) -> Vec<u8> {
    vec![fill; len]
}

#[test]
fn long_values_have_one_row_each_whatever_happens_to_their_keys() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let engine: Engine<()> = Engine::open(EngineConfig {
        path: path.clone(),
        readers: 1,
        ..EngineConfig::default()
    })
    .expect("open");
    write(
        &engine,
        Box::new(|txn: &mut Txn<'_, '_>| {
            txn.put_string(0, b"short", b"v", None)?;
            txn.put_string(0, b"a", &long(b'a', 5_000), None)?;
            txn.put_string(0, b"b", &long(b'b', 600), None)?;
            txn.put_string(0, b"gone", &long(b'g', 1_000), Some(now_ms() - 1))?;
            Ok(())
        }),
    );
    assert_eq!(rows(&path), (3, 3));
    assert_eq!(
        read(&engine, &["short", "a", "b", "gone"]),
        vec![
            Some(b"v".to_vec()),
            Some(long(b'a', 5_000)),
            Some(long(b'b', 600)),
            None
        ]
    );
    // Copy gets its own row; overwriting the original leaves the copy.
    write(
        &engine,
        Box::new(|txn: &mut Txn<'_, '_>| {
            assert!(txn.copy(0, b"a", 0, b"a2", false)?);
            txn.put_string(0, b"a", &long(b'A', 6_000), None)?;
            Ok(())
        }),
    );
    assert_eq!(rows(&path), (4, 4));
    assert_eq!(
        read(&engine, &["a", "a2"]),
        vec![Some(long(b'A', 6_000)), Some(long(b'a', 5_000))]
    );
    // Long over short and short over long; rename keeps the row.
    write(
        &engine,
        Box::new(|txn: &mut Txn<'_, '_>| {
            txn.put_string(0, b"short", &long(b's', 800), None)?;
            txn.put_string(0, b"b", b"tiny", None)?;
            assert!(txn.rename(0, b"a2", b"a3", false)?);
            Ok(())
        }),
    );
    assert_eq!(rows(&path), (4, 4));
    assert_eq!(
        read(&engine, &["short", "b", "a2", "a3"]),
        vec![
            Some(long(b's', 800)),
            Some(b"tiny".to_vec()),
            None,
            Some(long(b'a', 5_000))
        ]
    );
    // Deleting, overwriting with another type, and flushing free them.
    write(
        &engine,
        Box::new(|txn: &mut Txn<'_, '_>| {
            assert!(txn.delete(0, b"a3")?);
            let mut slot = txn.open(0, b"x", respite_engine::Kind::Set)?;
            txn.set_add(&mut slot, &[b"m"])?;
            txn.put_string(0, b"x", &long(b'x', 900), None)?;
            Ok(())
        }),
    );
    assert_eq!(read(&engine, &["x"]), vec![Some(long(b'x', 900))]);
    let (values, pointing) = rows(&path);
    assert_eq!(values, pointing);
    write(
        &engine,
        Box::new(|txn: &mut Txn<'_, '_>| {
            txn.flush_db(0)?;
            Ok(())
        }),
    );
    assert_eq!(rows(&path), (0, 0));
}

#[test]
fn a_value_stays_in_its_row_while_the_row_fits_a_page() {
    // 512-byte pages keep at most 102 bytes of a cell in place, yet a row
    // of up to 512 bytes of key and value (one overflow page) stays whole;
    // 4 KiB pages keep 1,002 bytes, less 17 for the row's other parts.
    assert_eq!(respite_engine::schema::inline_value_max(512), 512);
    assert_eq!(respite_engine::schema::inline_value_max(4096), 985);
}

#[test]
fn a_file_of_layout_2_has_its_long_values_moved_out_when_opened() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    {
        // What a build of layout 2 wrote: long values in their rows.
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "PRAGMA page_size = 512;
             CREATE TABLE keys (
                 db INTEGER NOT NULL, key BLOB NOT NULL, type INTEGER NOT NULL,
                 value BLOB, expire_at INTEGER, id INTEGER, count INTEGER,
                 PRIMARY KEY (db, key)) WITHOUT ROWID;
             CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
             INSERT INTO meta VALUES ('next_id', 7);
             PRAGMA user_version = 2;",
        )
        .unwrap();
        let mut insert = conn
            .prepare("INSERT INTO keys (db, key, type, value) VALUES (0, ?1, 0, ?2)")
            .unwrap();
        insert
            .execute(rusqlite::params![b"a", long(b'a', 5_000)])
            .unwrap();
        insert
            .execute(rusqlite::params![b"b", long(b'b', 2_000)])
            .unwrap();
        insert
            .execute(rusqlite::params![b"short", b"v".to_vec()])
            .unwrap();
    }
    let engine: Engine<()> = Engine::open(EngineConfig {
        path: path.clone(),
        readers: 1,
        ..EngineConfig::default()
    })
    .expect("open");
    assert_eq!(
        read(&engine, &["a", "b", "short"]),
        vec![
            Some(long(b'a', 5_000)),
            Some(long(b'b', 2_000)),
            Some(b"v".to_vec())
        ]
    );
    assert_eq!(rows(&path), (2, 2));
    // New ids continue past the moved ones.
    write(
        &engine,
        Box::new(|txn: &mut Txn<'_, '_>| {
            txn.put_string(0, b"c", &long(b'c', 3_000), None)?;
            Ok(())
        }),
    );
    let conn = rusqlite::Connection::open(&path).unwrap();
    let ids: Vec<i64> = conn
        .prepare("SELECT id FROM strings ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(ids, vec![7, 8, 9]);
}
