//! The page cache wrapper (`page_cache.rs`) in a process of its own, so that
//! it is installed before SQLite initialises: page splits, a rollback of a
//! transaction that grew the file, and a vacuum that shrank it all leave the
//! database whole and its contents as written, and the wrapper answered the
//! truncations the splits would have made walk the cache.

use rusqlite::{params, Connection};

fn count(conn: &Connection) -> i64 {
    conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .expect("count")
}

fn intact(conn: &Connection) {
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity_check");
    assert_eq!(check, "ok");
}

#[test]
fn splits_rollbacks_and_shrinks_keep_the_database_whole() {
    assert!(respite_engine::page_cache::install(), "installed first");
    assert!(respite_engine::page_cache::installed());
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.db");
    let conn = Connection::open(&path).expect("open");
    conn.execute_batch(
        "PRAGMA page_size = 1024; PRAGMA auto_vacuum = INCREMENTAL;
         PRAGMA journal_mode = WAL; PRAGMA cache_size = -2000;
         CREATE TABLE t (k INTEGER NOT NULL, v BLOB NOT NULL, PRIMARY KEY (k)) WITHOUT ROWID;",
    )
    .expect("schema");
    let value = vec![7u8; 80];
    // Random keys in small transactions: leaves split all over the tree,
    // and the new pages are put in order through the spare page number.
    let mut x: u64 = 12345;
    let mut keys = std::collections::BTreeSet::new();
    for _ in 0..400 {
        conn.execute_batch("BEGIN").expect("begin");
        for _ in 0..50 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let k = (x >> 33) as i64;
            conn.execute(
                "INSERT OR REPLACE INTO t (k, v) VALUES (?1, ?2)",
                params![k, value],
            )
            .expect("insert");
            keys.insert(k);
        }
        conn.execute_batch("COMMIT").expect("commit");
    }
    assert!(
        respite_engine::page_cache::skipped_truncations() > 0,
        "commits after splits skipped the walk"
    );
    assert_eq!(count(&conn), keys.len() as i64);
    intact(&conn);
    // A transaction that grows the file by many pages, rolled back: the
    // pages past the old end must leave the cache, or later reads would
    // see them.
    let pages_before: i64 = conn
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .expect("page_count");
    conn.execute_batch("BEGIN").expect("begin");
    for i in 0..5_000i64 {
        conn.execute(
            "INSERT INTO t (k, v) VALUES (?1, ?2)",
            params![-1 - i, vec![1u8; 200]],
        )
        .expect("insert");
    }
    conn.execute_batch("ROLLBACK").expect("rollback");
    let pages_after: i64 = conn
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .expect("page_count");
    assert_eq!(pages_before, pages_after);
    assert_eq!(count(&conn), keys.len() as i64);
    intact(&conn);
    // Then written again over the same page numbers.
    conn.execute_batch("BEGIN").expect("begin");
    for i in 0..2_000i64 {
        conn.execute(
            "INSERT INTO t (k, v) VALUES (?1, ?2)",
            params![-1 - i, vec![2u8; 200]],
        )
        .expect("insert");
    }
    conn.execute_batch("COMMIT").expect("commit");
    let sum: i64 = conn
        .query_row("SELECT sum(length(v)) FROM t WHERE k < 0", [], |r| r.get(0))
        .expect("sum");
    assert_eq!(sum, 2_000 * 200);
    intact(&conn);
    let grown: i64 = conn
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .expect("page_count");
    // Deleted and vacuumed: the file shrinks, the cache drops its tail.
    conn.execute("DELETE FROM t WHERE k < 0", [])
        .expect("delete");
    conn.execute_batch("PRAGMA incremental_vacuum")
        .expect("vacuum");
    let shrunk: i64 = conn
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .expect("page_count");
    assert!(
        shrunk < grown,
        "{grown} pages before the vacuum, {shrunk} after"
    );
    assert_eq!(count(&conn), keys.len() as i64);
    intact(&conn);
    // Written again past the new end.
    conn.execute(
        "INSERT INTO t (k, v) VALUES (-1, ?1)",
        params![vec![3u8; 200]],
    )
    .expect("insert");
    assert_eq!(count(&conn), keys.len() as i64 + 1);
    intact(&conn);
    // A second connection reads the same rows.
    let other = Connection::open(&path).expect("open");
    assert_eq!(count(&other), keys.len() as i64 + 1);
    intact(&other);
}
