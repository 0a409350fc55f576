//! The SQLite that rusqlite bundles must carry the fix for the WAL-reset
//! bug (present from 3.7.0 through 3.51.2, fixed in 3.51.3): two
//! connections checkpointing while a third commits and restarts the WAL can
//! corrupt the file, and respite's checkpointer thread and writer meet those
//! conditions every day. A downgrade of rusqlite fails here.

#[test]
fn linked_sqlite_has_the_wal_reset_fix() {
    let linked = rusqlite::version_number();
    assert!(
        linked >= 3_051_003,
        "the linked SQLite is {} (3.51.3 or later is required)",
        rusqlite::version()
    );
    // The library answering SQL is the same one.
    let conn = rusqlite::Connection::open_in_memory().expect("in-memory database");
    let answered: String = conn
        .query_row("SELECT sqlite_version()", [], |r| r.get(0))
        .expect("sqlite_version()");
    assert_eq!(answered, rusqlite::version());
}

/// The compile-time options of `.cargo/config.toml` reach the bundled build.
#[test]
fn compile_options_from_cargo_config_apply() {
    let conn = rusqlite::Connection::open_in_memory().expect("in-memory database");
    let mut stmt = conn.prepare("PRAGMA compile_options").expect("prepare");
    let options: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    for wanted in [
        "THREADSAFE=2",
        "MAX_LENGTH=2147483647",
        "OMIT_SHARED_CACHE",
        "DQS=0",
    ] {
        assert!(
            options.iter().any(|o| o == wanted),
            "{wanted} missing from {options:?}"
        );
    }
}
