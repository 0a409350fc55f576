//! Every command's argument parsing, against arbitrary argument vectors,
//! without running anything.
//!
//! Each input picks a row of the command table and builds its arguments
//! from the fuzzer's bytes: mostly the words Redis's commands take (every
//! `token` of Redis 7.0's command JSON, CONFIG parameters, ACL rules),
//! numbers at and past every edge, float spellings, range bounds, glob
//! patterns and command names, now and then raw bytes; usually as many as
//! the row's arity allows, so the parse itself runs rather than the arity
//! check. `respite_server::command::parse_only` then does what dispatch does
//! (lookup, arity, authentication, ACL) and the row's `parse` step, which
//! turns arguments into a command and finds every syntax error; it never
//! plans or applies (CONFIG SET parses but changes nothing, SHUTDOWN
//! parses but does not stop anything). The checks: no parse panics or
//! runs out of memory on a count it was given, and every refusal encodes as
//! one well-formed RESP error line whose code is upper case, as Redis's are.
//!
//! A `Session` needs the server's shared state, which needs a running
//! engine: one is opened once per process on a fresh temporary directory,
//! whose files are removed at once (the open connections keep them, and
//! parsing never writes), so no run leaves anything behind.

#![no_main]

use std::cell::RefCell;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use respite_engine::Engine;
use respite_server::command::{parse_only, Session, TABLE};
use respite_server::clients::{ClientHandle, Peer};
use respite_server::state::Shared;
use respite_server::{Config, Reply};

/// The words of Redis 7.0's commands (every `token` in src/commands/*.json,
/// and the container commands' subcommands).
#[rustfmt::skip]
const TOKENS: &[&str] = &[
    "$", "*", "=", "ABORT", "ABSTTL", "ACLCAT", "ADDR", "ADDSLOTS", "ADDSLOTSRANGE",
    "AFTER", "AGGREGATE", "ALL", "ALPHA", "ANY", "APPEND", "ARGS", "ASC", "ASYNC",
    "AUTH", "AUTH2", "BCAST", "BEFORE", "BIT", "BLOCK", "BUMPEPOCH", "BY", "BYBOX",
    "BYLEX", "BYRADIUS", "BYSCORE", "BYTE", "CACHING", "CAT", "CH", "CHANNELS",
    "CKQUORUM", "CONFIG", "CONSUMERS", "COPY", "COUNT", "COUNT-FAILURE-REPORTS",
    "COUNTKEYSINSLOT", "CREATE", "CREATECONSUMER", "DB", "DEBUG", "DELCONSUMER",
    "DELETE", "DELSLOTS", "DELSLOTSRANGE", "DELUSER", "DESC", "DESTROY", "DOCS",
    "DOCTOR", "DRYRUN", "DUMP", "ENCODING", "ENTRIESADDED", "ENTRIESREAD", "ERROR",
    "EX", "EXAT", "EXISTS", "FAIL", "FAILOVER", "FILTERBY", "FLUSH", "FLUSHCONFIG",
    "FLUSHSLOTS", "FORCE", "FORGET", "FREQ", "FROMLONLAT", "FROMMEMBER", "FULL",
    "GENPASS", "GET", "GET-MASTER-ADDR-BY-NAME", "GETKEYS", "GETKEYSANDFLAGS",
    "GETKEYSINSLOT", "GETNAME", "GETREDIR", "GETUSER", "GRAPH", "GROUP", "GROUPS",
    "GT", "HARD", "HELP", "HISTOGRAM", "HISTORY", "ID", "IDLE", "IDLETIME", "IDX",
    "IMPORTING", "INCR", "INCRBY", "INFO", "INFO-CACHE", "IS-MASTER-DOWN-BY-ADDR",
    "JUSTID", "KEEPTTL", "KEYS", "KEYSLOT", "KILL", "LADDR", "LASTID", "LATEST",
    "LEFT", "LEN", "LIBRARYNAME", "LIMIT", "LINKS", "LIST", "LOAD", "LOADEX", "LOG",
    "LT", "MALLOC-STATS", "MASTER", "MASTERS", "MATCH", "MAX", "MAXDELETEDID",
    "MAXLEN", "MEET", "MIGRATING", "MIN", "MINID", "MINMATCHLEN", "MKSTREAM", "MODULE",
    "MONITOR", "MYID", "NO", "NO-EVICT", "NOACK", "NODE", "NODES", "NOLOOP",
    "NOMKSTREAM", "NOSAVE", "NOW", "NUMPAT", "NUMSUB", "NX", "OFF", "ON", "ONE",
    "OPTIN", "OPTOUT", "OVERFLOW", "PATTERN", "PAUSE", "PENDING-SCRIPTS", "PERSIST",
    "PREFIX", "PURGE", "PX", "PXAT", "RANK", "REDIRECT", "REFCOUNT", "REMOVE",
    "REPLACE", "REPLICAS", "REPLICATE", "REPLY", "RESET", "RESETSTAT", "RESTORE",
    "RETRYCOUNT", "REV", "REWRITE", "RIGHT", "SAMPLES", "SAT", "SAVE", "SAVECONFIG",
    "SCHEDULE", "SENTINELS", "SET", "SET-CONFIG-EPOCH", "SETID", "SETNAME", "SETSLOT",
    "SETUSER", "SHARDCHANNELS", "SHARDNUMSUB", "SHARDS", "SIMULATE-FAILURE", "SKIP",
    "SKIPME", "SLAVES", "SLOTS", "SOFT", "STABLE", "STATS", "STORE", "STOREDIST",
    "STREAM", "STREAMS", "SUM", "SYNC", "TAKEOVER", "TIME", "TIMEOUT", "TO",
    "TRACKING", "TRACKINGINFO", "TYPE", "UNBLOCK", "UNLOAD", "UNPAUSE", "USAGE",
    "USER", "USERS", "VERSION", "WEIGHTS", "WHOAMI", "WITHCODE", "WITHCOORD",
    "WITHDIST", "WITHHASH", "WITHMATCHLEN", "WITHSCORES", "WITHVALUES", "WRAP",
    "WRITE", "XX", "YES", "ft", "km", "m", "master", "mi", "normal", "pubsub",
    "replica", "slave", "~",
];

/// What else the parsers look for: CONFIG parameters and values, ACL
/// rules, numbers at and past their edges, float spellings, range bounds,
/// patterns.
#[rustfmt::skip]
const WORDS: &[&str] = &[
    "maxclients", "proto-max-bulk-len", "client-query-buffer-limit",
    "client-output-buffer-limit", "appendfsync", "requirepass", "protected-mode",
    "max-batch", "read-cache-bytes", "expire-chunk", "save", "databases", "port",
    "normal 0 0 0", "normal 1mb 256kb 60", "replica", "pubsub", "always", "everysec",
    "no", "yes", "512mb", "1gb", "1k", "-1mb", "on", "off", "nopass", "resetpass",
    ">secret", "<secret", "#0123", "~*", "%R~*", "%W~k*", "&*", "+@all", "-@all",
    "+get", "-set", "+config|get", "allkeys", "allcommands", "nocommands", "reset",
    "resetkeys", "resetchannels", "(selector)", "0", "1", "2", "-1", "-2", "3", "10",
    "16", "100", "255", "256", "65535", "65536", "2147483647", "2147483648",
    "-2147483648", "-2147483649", "4294967295", "4294967296", "9223372036854775807",
    "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
    "18446744073709551615", "99999999999999999999999", "536870912", "4294967296000",
    "00", "01", "+1", "-0", " 1", "1 ", "0x10", "1.5", "-1.5", "1e3", "1e308", "1e309",
    "-1e309", "inf", "-inf", "+inf", "Infinity", "nan", "NaN", "0.0", "-0.0", ".5",
    "5.", "1e", "(1", "(-inf", "(+inf", "[a", "(a", "-", "+", "[", "(", "*", "?",
    "[a-", "\\", "[^a]", "a*b?c", "", " ", "\0", "\r\n", "key", "k", "value", "field",
    "member", "0-0", "$", ">", "~", "3.14", "-180", "90", "m", "km",
];

fn arg(u: &mut Unstructured<'_>) -> Result<Bytes> {
    Ok(match u.int_in_range(0..=99u8)? {
        0..=44 => {
            let word = *u.choose(TOKENS)?;
            // Options are matched without regard to case.
            if u.arbitrary()? {
                Bytes::from(word.to_ascii_lowercase())
            } else {
                Bytes::from_static(word.as_bytes())
            }
        }
        45..=74 => Bytes::from_static(u.choose(WORDS)?.as_bytes()),
        75..=82 => Bytes::from(u.arbitrary::<i64>()?.to_string()),
        83..=86 => Bytes::from(u.arbitrary::<f64>()?.to_string()),
        87..=90 => Bytes::from_static(TABLE[u.choose_index(TABLE.len())?].name.as_bytes()),
        _ => {
            let len = u.int_in_range(0..=40usize)?;
            Bytes::copy_from_slice(u.bytes(len)?)
        }
    })
}

/// A session on an engine opened once per process.
fn session() -> Session {
    let dir = tempfile::tempdir().expect("temporary directory");
    let config = Config {
        db: dir.path().join("fuzz.db"),
        readers: 1,
        ..Config::default()
    };
    let engine = Engine::<Reply>::open(config.engine()).expect("open the engine");
    // Nothing here writes: the files can go now, and the process keeps
    // what it has open.
    drop(dir);
    let shared = Arc::new(Shared::new(engine, config));
    let client = Arc::new(ClientHandle::new(1, Peer::Unix("fuzz".into())));
    Session::new(shared, client)
}

thread_local! {
    static SESSION: RefCell<Session> = RefCell::new(session());
}

fn one(u: &mut Unstructured<'_>, s: &mut Session) -> Result<()> {
    let spec = &TABLE[u.choose_index(TABLE.len())?];
    let mut request = vec![Bytes::from_static(spec.name.as_bytes())];
    // Mostly a count the arity allows, so the parse runs.
    let count = if u.ratio(7, 8)? {
        if spec.arity > 0 {
            spec.arity as usize - 1
        } else {
            (-spec.arity) as usize - 1 + u.int_in_range(0..=8usize)?
        }
    } else {
        u.int_in_range(0..=12usize)?
    };
    for _ in 0..count {
        request.push(arg(u)?);
    }
    s.select(u.int_in_range(0..=15)?);
    s.set_resp3(u.arbitrary()?);
    if let Err(e) = parse_only(s, request) {
        let mut out = BytesMut::new();
        Reply::from(e).encode(&mut out, s.resp3());
        assert_eq!(out.first(), Some(&b'-'), "{out:?}");
        assert!(out.ends_with(b"\r\n"), "{out:?}");
        let body = &out[1..out.len() - 2];
        assert!(
            !body.iter().any(|&b| b == b'\r' || b == b'\n'),
            "a line break inside an error: {out:?}"
        );
        let code = body.split(|&b| b == b' ').next().unwrap_or_default();
        assert!(
            !code.is_empty() && code.iter().all(|b| b.is_ascii_uppercase()),
            "an error without an upper-case code: {out:?}"
        );
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    SESSION.with(|s| {
        let mut s = s.borrow_mut();
        // Several commands per input, on one session, as a client sends.
        while !u.is_empty() {
            if one(&mut u, &mut s).is_err() {
                break;
            }
        }
    });
});
