//! RESTORE run whole against a scratch database: arbitrary bytes as the
//! payload of `RESTORE k 0 <payload> [REPLACE]`, through the command
//! itself (`command::call` on the writer, the path a client's RESTORE and
//! MIGRATE's target take), over a key that holds nothing, a string, a list
//! or a hash before it.
//!
//! The first input byte picks the mode: whether the payload gets a valid
//! version and CRC-64 footer (so it reaches the object parser and the
//! engine's writes), REPLACE or not, and what the key held. The checks:
//!
//! - nothing panics, on the connection's side or on the writer (a panic
//!   there would be caught and turned into an error reply, so the writer
//!   thread is watched for one too);
//! - a RESTORE that fails leaves the key exactly as it was (nothing half
//!   applied: the state is read back in a later transaction and compared
//!   with DUMP's bytes from before);
//! - a RESTORE that succeeds leaves a key of the payload's type, a string
//!   with the payload's bytes, a collection with as many elements.
//!
//! One engine is opened per process on a fresh temporary directory; each
//! input runs as three writer items (set up, RESTORE, read back), each
//! answered after its own commit.

#![no_main]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, OnceLock};

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use respite_engine::{Engine, EngineError, Txn, WriteItem};
use respite_rdb::{crc64, decode_dump, encode_dump, Value};
use respite_server::cmd::dump::read_value;
use respite_server::command::{call, Ctx};
use respite_server::state::Shared;
use respite_server::{Config, Reply};

/// The shared state around an engine opened once per process. The
/// directory is kept beside it in the static, so it stays for the
/// process's life and is still reachable at exit (not a leak).
fn shared() -> &'static Arc<Shared> {
    static SHARED: OnceLock<(tempfile::TempDir, Arc<Shared>)> = OnceLock::new();
    &SHARED
        .get_or_init(|| {
            let dir = tempfile::tempdir().expect("temporary directory");
            let config = Config {
                db: dir.path().join("fuzz.db"),
                readers: 1,
                ..Config::default()
            };
            let engine = Engine::<Reply>::open(config.engine()).expect("open the engine");
            (dir, Arc::new(Shared::new(engine, config)))
        })
        .1
}

/// Set when a command panicked on the writer (which answers it with an
/// error instead of stopping).
static WRITER_PANICKED: AtomicBool = AtomicBool::new(false);

type Op = Box<dyn FnOnce(&mut Txn<'_, '_>, &Shared) -> Result<Reply, EngineError> + Send>;

/// Runs `op` as one writer item and waits for its reply.
fn on_writer(op: Op) -> Result<Reply, EngineError> {
    let sh = shared().clone();
    let (tx, rx) = mpsc::channel();
    let item = WriteItem {
        ops: vec![Box::new(move |txn: &mut Txn<'_, '_>| {
            let run = std::panic::AssertUnwindSafe(|| op(txn, &sh));
            std::panic::catch_unwind(run).unwrap_or_else(|_| {
                WRITER_PANICKED.store(true, Ordering::Relaxed);
                Err(EngineError::Internal("panicked".into()))
            })
        })],
        done: Box::new(move |mut results| {
            let _ = tx.send(results.pop().expect("one result"));
        }),
    };
    if shared().engine().submit_write(item).is_err() {
        panic!("the engine stopped");
    }
    rx.recv().expect("the writer answers")
}

fn run(sh: &Shared, txn: &mut Txn<'_, '_>, args: &[&[u8]]) -> Result<Reply, EngineError> {
    let mut ctx = Ctx::new(sh, 0, false, true);
    let request = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
    match call(&mut ctx, request, txn) {
        Ok(reply) => Ok(reply),
        // A command's own refusal (BUSYKEY, Bad data format) changed nothing.
        Err(respite_server::error::CommandError::Engine(e)) => Err(e),
        Err(e) => Ok(Reply::error(e.to_string())),
    }
}

/// The key's state as DUMP bytes (and its expiry), or nothing.
fn state() -> Option<(Vec<u8>, Option<i64>)> {
    let reply = on_writer(Box::new(|txn, _| {
        let found = read_value(txn, 0, b"k").map_err(|e| EngineError::Internal(e.to_string()))?;
        Ok(match found {
            None => Reply::Nil,
            Some((v, at)) => Reply::Array(vec![
                Reply::Bulk(Bytes::from(encode_dump(&v))),
                Reply::Int(at.unwrap_or(-1)),
            ]),
        })
    }))
    .expect("reading the key");
    match reply {
        Reply::Nil => None,
        Reply::Array(parts) => match &parts[..] {
            [Reply::Bulk(b), Reply::Int(at)] => Some((b.to_vec(), (*at >= 0).then_some(*at))),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

fn elements(v: &Value) -> Option<usize> {
    Some(match v {
        Value::String(_) => return None,
        Value::List(items) => items.len(),
        Value::Hash(pairs) => pairs.len(),
        Value::Set(members) => members.len(),
        Value::ZSet(members) => members.len(),
        _ => return None,
    })
}

fuzz_target!(|input: &[u8]| {
    let Some((&mode, data)) = input.split_first() else {
        return;
    };
    let mut payload = data.to_vec();
    if mode & 1 == 1 {
        payload.extend_from_slice(&10u16.to_le_bytes());
        let crc = crc64(&payload);
        payload.extend_from_slice(&crc.to_le_bytes());
    }
    let replace = mode & 2 == 2;
    let prior = (mode >> 2) % 4;
    on_writer(Box::new(move |txn, sh| {
        run(sh, txn, &[b"DEL", b"k"])?;
        match prior {
            1 => run(sh, txn, &[b"SET", b"k", b"old", b"PX", b"100000000"]),
            2 => run(sh, txn, &[b"RPUSH", b"k", b"a", b"b", b"c"]),
            3 => run(sh, txn, &[b"HSET", b"k", b"f", b"v"]),
            _ => Ok(Reply::Ok),
        }
    }))
    .expect("setting up the key");
    let before = state();
    let restored = {
        let payload = payload.clone();
        on_writer(Box::new(move |txn, sh| {
            let mut args: Vec<&[u8]> = vec![b"RESTORE", b"k", b"0", &payload];
            if replace {
                args.push(b"REPLACE");
            }
            run(sh, txn, &args)
        }))
    };
    assert!(
        !WRITER_PANICKED.load(Ordering::Relaxed),
        "RESTORE panicked on the writer"
    );
    let after = state();
    match restored {
        Ok(Reply::Ok) => {
            let value = decode_dump(&payload).expect("a payload RESTORE took decodes");
            let (bytes, at) = after.expect("the restored key exists");
            assert_eq!(at, None, "RESTORE with TTL 0 leaves no expiry");
            let stored = decode_dump(&bytes).expect("DUMP of the key decodes");
            assert_eq!(
                std::mem::discriminant(&stored),
                std::mem::discriminant(&value),
                "the restored key's type"
            );
            match (&stored, &value) {
                (Value::String(a), Value::String(b)) => assert_eq!(a, b),
                _ => assert_eq!(elements(&stored), elements(&value), "element count"),
            }
        }
        // Refused (BUSYKEY, a bad payload) or rolled back: nothing of it.
        Ok(_) | Err(_) => assert_eq!(after, before, "a failed RESTORE changed the key"),
    }
});
