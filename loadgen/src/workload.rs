//! Workloads: what is sent, in what mix, and how it is encoded.
//!
//! A workload is a list of phases; most have one phase, the `redlite`
//! profile has one per operation of Redlite's table, run in turn so each gets
//! its own figures. A phase is a weighted mix of operations plus the keys it
//! needs prepared first (lists to LRANGE, hashes to HGET). An operation is a
//! command template: literal arguments and the placeholders `__key__`,
//! `__data__` and `__ttl__`, as in memtier_benchmark, and a few generated
//! argument runs (n field/value pairs, n members) that the profiles use.
//!
//! The [`Encoder`] turns an operation into RESP directly into the caller's
//! pipeline buffer. It is the hot path of the generator, so it never
//! allocates after warm-up: keys are formatted into a reused buffer, values
//! are slices of one pre-generated block of filler (at a random offset, so
//! rewrites of a key change its value), and the whole pipeline
//! becomes one flat buffer written with one syscall.

use std::collections::HashMap;
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::cli::{parse_range, Cli, Profile};
use crate::error::ArgError;
use crate::keys::{push_u64, KeyGen, KeyPattern};
use crate::verify::{make_value, Expect, Tag};

/// Value sizes: fixed when `min == max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataSize {
    pub min: usize,
    pub max: usize,
}

impl DataSize {
    /// Always `n` bytes.
    pub fn fixed(n: usize) -> DataSize {
        DataSize { min: n, max: n }
    }
    /// The size of the next value; fixed sizes skip the RNG.
    #[inline]
    fn pick(&self, rng: &mut SmallRng) -> usize {
        if self.min == self.max {
            self.min
        } else {
            rng.random_range(self.min..=self.max)
        }
    }
}

/// Part of one argument. An argument may mix pieces (`user:__key__`), in
/// which case they are concatenated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Bytes sent as written.
    Lit(Vec<u8>),
    /// `__key__`: the prefix and the index the key pattern picked.
    Key,
    /// `__data__`: a value of the operation's size (see `DataSize`).
    Data,
    /// `__ttl__`: seconds drawn from `--expire-range`.
    Ttl,
    /// A random number below the bound (for members and scores).
    Rand(u64),
}

/// One argument of a template, or a generated run of them. The runs exist
/// for the `redlite` profile, which needs commands like a 1000-value RPUSH
/// that no template can spell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg {
    /// A single argument made of pieces.
    Token(Vec<Piece>),
    /// `f0 <data> f1 <data> ...`
    FieldValues(usize),
    /// `<data>` repeated.
    Values(usize),
    /// `m0 m1 ...`
    Members(usize),
    /// `0 m0 1 m1 ...`
    ScoreMembers(usize),
}

/// How `--verify` treats an operation's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpClass {
    /// `SET key value [EX n]`: writes a value later GETs are checked against.
    Set,
    /// `GET key`: checked against the last SET.
    Get,
    /// `INCR key`: checked for counting up by one.
    Incr,
    /// Anything else: only checked for not being an error.
    Other,
}

/// One operation of a phase.
#[derive(Debug, Clone)]
pub struct OpSpec {
    /// The name in reports, e.g. `SET` or `LRANGE_100`.
    pub name: String,
    /// The command and its arguments.
    pub args: Vec<Arg>,
    /// Relative frequency in the phase's mix.
    pub weight: u32,
    /// Prepended to key indices. Per operation so that, in `redlite`,
    /// strings, lists and hashes never collide on one key.
    pub prefix: Vec<u8>,
    /// Number of distinct keys.
    pub keyspace: u64,
    /// Added to every key index (memtier's `--key-minimum`).
    pub key_base: u64,
    /// Size of `__data__` values.
    pub data: DataSize,
    /// How `--verify` checks the reply.
    pub class: OpClass,
}

impl OpSpec {
    /// Whether the command names a key, so that in verify mode it makes
    /// that key's value unknown.
    fn touches_key(&self) -> bool {
        self.args
            .iter()
            .any(|a| matches!(a, Arg::Token(p) if p.contains(&Piece::Key)))
    }
}

/// Operations run once per key `0..keys` before a phase starts.
#[derive(Debug, Clone)]
pub struct Prepare {
    pub ops: Vec<OpSpec>,
    pub keys: u64,
}

/// A measured stretch of the run: a weighted mix of operations with its own
/// figures.
#[derive(Debug, Clone)]
pub struct Phase {
    /// The mix.
    pub ops: Vec<OpSpec>,
    /// Run in order before measurement (preload, building collections).
    pub prepare: Vec<Prepare>,
}

/// Everything about what to send, shared read-only by all threads.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Run one after another against each target.
    pub phases: Vec<Arc<Phase>>,
    /// Requests per write (`-P`, or the profile's default).
    pub pipeline: usize,
    /// How keys are chosen (`--key-zipf` forces `Zipf`).
    pub pattern: KeyPattern,
    /// The Zipf exponent.
    pub zipf_s: f64,
    /// TTL range in seconds for SETs and `__ttl__`, if any.
    pub expire: Option<(u64, u64)>,
    /// Filler for values, at least as long as the largest value.
    pub filler: Arc<[u8]>,
    /// `--data-repeat`: every value is the filler's first bytes, so
    /// rewrites of a key store what it already holds.
    pub repeat: bool,
    /// A one-line summary for reports, e.g. `ratio SET:GET 1:10`.
    pub description: String,
}

/// A literal argument.
fn lit(s: &str) -> Arg {
    Arg::Token(vec![Piece::Lit(s.as_bytes().to_vec())])
}
/// The `__key__` argument.
fn key() -> Arg {
    Arg::Token(vec![Piece::Key])
}
/// The `__data__` argument.
fn data() -> Arg {
    Arg::Token(vec![Piece::Data])
}

/// The command line's key and value settings, from which operations are
/// built unless a profile overrides them.
struct Defaults {
    prefix: Vec<u8>,
    keyspace: u64,
    key_base: u64,
    data: DataSize,
    expire: Option<(u64, u64)>,
}

impl Defaults {
    /// An operation of weight 1 with the default key and value settings.
    fn op(&self, name: &str, args: Vec<Arg>, class: OpClass) -> OpSpec {
        OpSpec {
            name: name.to_string(),
            args,
            weight: 1,
            prefix: self.prefix.clone(),
            keyspace: self.keyspace,
            key_base: self.key_base,
            data: self.data,
            class,
        }
    }
    /// `SET key value`, with `EX ttl` when an expire range is set.
    fn set(&self, weight: u32) -> OpSpec {
        let mut args = vec![lit("SET"), key(), data()];
        if self.expire.is_some() {
            args.extend([lit("EX"), Arg::Token(vec![Piece::Ttl])]);
        }
        OpSpec {
            weight,
            ..self.op("SET", args, OpClass::Set)
        }
    }
    /// `GET key`.
    fn get(&self, weight: u32) -> OpSpec {
        OpSpec {
            weight,
            ..self.op("GET", vec![lit("GET"), key()], OpClass::Get)
        }
    }
    /// SETs every key once, without TTL: preloaded keys that expired
    /// mid-run would turn GET hits into misses.
    fn preload(&self) -> Prepare {
        let plain = Defaults {
            expire: None,
            prefix: self.prefix.clone(),
            ..*self
        };
        Prepare {
            ops: vec![plain.set(1)],
            keys: self.keyspace,
        }
    }
}

/// Parses one `--command` value: `[WEIGHT:]CMD ARG...`.
pub fn parse_template(s: &str) -> Result<(u32, Vec<Arg>), ArgError> {
    let bad = |why| ArgError::Template(s.to_string(), why);
    let (weight, body) = match s.split_once(':') {
        Some((w, rest)) if !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit()) => {
            (w.parse::<u32>().map_err(|_| bad("weight too large"))?, rest)
        }
        _ => (1, s),
    };
    if weight == 0 {
        return Err(bad("weight must be positive"));
    }
    let mut args = Vec::new();
    for tok in body.split_whitespace() {
        let mut pieces = Vec::new();
        let mut rest = tok;
        while !rest.is_empty() {
            let next = ["__key__", "__data__", "__ttl__"]
                .iter()
                .filter_map(|m| rest.find(m).map(|i| (i, *m)))
                .min();
            match next {
                Some((i, m)) => {
                    if i > 0 {
                        pieces.push(Piece::Lit(rest.as_bytes()[..i].to_vec()));
                    }
                    pieces.push(match m {
                        "__key__" => Piece::Key,
                        "__data__" => Piece::Data,
                        _ => Piece::Ttl,
                    });
                    rest = &rest[i + m.len()..];
                }
                None => {
                    pieces.push(Piece::Lit(rest.as_bytes().to_vec()));
                    rest = "";
                }
            }
        }
        args.push(Arg::Token(pieces));
    }
    match args.first() {
        Some(Arg::Token(p)) if matches!(p.as_slice(), [Piece::Lit(_)]) => Ok((weight, args)),
        Some(_) => Err(bad("the command name must be a literal")),
        None => Err(bad("empty template")),
    }
}

/// A template's report name (its command, upper-cased) and how `--verify`
/// can check it. Only the exact shapes whose reply is predictable get a
/// class; anything else is `Other`, checked only for errors.
fn classify(args: &[Arg]) -> (String, OpClass) {
    let tok = |a: &Arg| match a {
        Arg::Token(p) => p.clone(),
        _ => Vec::new(),
    };
    let name = match args.first().map(tok).as_deref() {
        Some([Piece::Lit(n)]) => String::from_utf8_lossy(n).to_uppercase(),
        _ => String::from("?"),
    };
    let k = [Piece::Key];
    let d = [Piece::Data];
    let class = match (name.as_str(), args.len()) {
        ("GET", 2) if tok(&args[1]) == k => OpClass::Get,
        ("INCR", 2) if tok(&args[1]) == k => OpClass::Incr,
        // SET key value [EX n]: options never change a successful +OK.
        ("SET", 3 | 5) if tok(&args[1]) == k && tok(&args[2]) == d => OpClass::Set,
        _ => OpClass::Other,
    };
    (name, class)
}

/// Builds the workload the command line asks for.
pub fn build(cli: &Cli) -> Result<Workload, ArgError> {
    let data = match &cli.data_size_range {
        Some(r) => {
            let (a, b) = parse_range(r)?;
            DataSize {
                min: a as usize,
                max: b as usize,
            }
        }
        None => DataSize::fixed(cli.data_size),
    };
    let mut expire = cli.expire_range.as_deref().map(parse_range).transpose()?;
    if cli.profile == Some(Profile::TtlHeavy) && expire.is_none() {
        expire = Some((1, 5));
    }
    let (key_base, keyspace) = cli.key_range()?;
    let d = Defaults {
        prefix: cli.key_prefix.as_bytes().to_vec(),
        keyspace,
        key_base,
        data,
        expire,
    };
    let chosen = [
        cli.profile.is_some(),
        cli.ratio.is_some(),
        !cli.commands.is_empty(),
    ];
    if chosen.iter().filter(|c| **c).count() > 1 {
        return Err(ArgError::Conflict(
            "use only one of --profile, --ratio and --command",
        ));
    }
    let mut pipeline = cli.pipeline.unwrap_or(1).max(1);
    let single = |ops: Vec<OpSpec>, prepare: Vec<Prepare>| vec![Arc::new(Phase { ops, prepare })];
    let preload = |p: bool| {
        if p || cli.preload {
            vec![d.preload()]
        } else {
            vec![]
        }
    };
    let (phases, description) = match cli.profile {
        Some(Profile::GetHeavy) => (
            single(vec![d.set(1), d.get(9)], preload(true)),
            "get-heavy".to_string(),
        ),
        Some(Profile::SetHeavy) => (
            single(vec![d.set(4), d.get(1)], preload(false)),
            "set-heavy".to_string(),
        ),
        Some(Profile::Mixed) => (
            single(vec![d.set(1), d.get(1)], preload(true)),
            "mixed".to_string(),
        ),
        Some(Profile::TtlHeavy) => (
            single(vec![d.set(1), d.get(1)], preload(false)),
            "ttl-heavy".to_string(),
        ),
        Some(Profile::Pipeline10) => {
            pipeline = cli.pipeline.unwrap_or(10).max(1);
            (
                single(vec![d.set(1), d.get(1)], preload(true)),
                "pipeline-10".to_string(),
            )
        }
        Some(Profile::Redlite) => (redlite(&d), "redlite".to_string()),
        None if !cli.commands.is_empty() => {
            let mut ops = Vec::new();
            let mut seen: HashMap<String, usize> = HashMap::new();
            for t in &cli.commands {
                let (weight, args) = parse_template(t)?;
                let uses_ttl = args
                    .iter()
                    .any(|a| matches!(a, Arg::Token(p) if p.contains(&Piece::Ttl)));
                if uses_ttl && expire.is_none() {
                    return Err(ArgError::Template(
                        t.clone(),
                        "__ttl__ needs --expire-range",
                    ));
                }
                let (mut name, class) = classify(&args);
                let n = seen.entry(name.clone()).or_insert(0);
                *n += 1;
                if *n > 1 {
                    name = format!("{name}#{n}");
                }
                ops.push(OpSpec {
                    weight,
                    ..d.op(&name, args, class)
                });
            }
            (
                single(ops, preload(false)),
                format!("{} template(s)", cli.commands.len()),
            )
        }
        None => {
            let ratio = cli.ratio.as_deref().unwrap_or("1:10");
            let bad = || ArgError::Ratio(ratio.to_string());
            let (s, g) = ratio.split_once(':').ok_or_else(bad)?;
            let s: u32 = s.trim().parse().map_err(|_| bad())?;
            let g: u32 = g.trim().parse().map_err(|_| bad())?;
            let mut ops = Vec::new();
            if s > 0 {
                ops.push(d.set(s));
            }
            if g > 0 {
                ops.push(d.get(g));
            }
            if ops.is_empty() {
                return Err(bad());
            }
            (
                single(ops, preload(false)),
                format!("ratio SET:GET {s}:{g}"),
            )
        }
    };
    let max_data = phases
        .iter()
        .flat_map(|p| {
            p.ops
                .iter()
                .chain(p.prepare.iter().flat_map(|x| x.ops.iter()))
        })
        .map(|o| o.data.max)
        .max()
        .unwrap_or(0);
    let mut rng = SmallRng::seed_from_u64(cli.seed ^ 0xda7a);
    const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    // FILLER_SLACK bytes more than the longest value, so each value can
    // start at a random offset (see `Encoder::encode`).
    let filler: Vec<u8> = (0..max_data.max(1) + FILLER_SLACK)
        .map(|_| ALNUM[rng.random_range(0..ALNUM.len())])
        .collect();
    Ok(Workload {
        phases,
        pipeline,
        pattern: if cli.key_zipf.is_some() {
            KeyPattern::Zipf
        } else {
            cli.key_pattern
        },
        zipf_s: cli.key_zipf.unwrap_or(0.99),
        expire,
        filler: Arc::from(filler),
        repeat: cli.data_repeat,
        description,
    })
}

/// How far into the filler a value may start. Values are slices of one
/// block, taken at a random offset so that two SETs of the same key almost
/// never store the same bytes: a store that skips rewriting identical data
/// (SQLite does: an unchanged row dirties no page and its commit costs no
/// fsync) would otherwise be measured doing no work at all.
const FILLER_SLACK: usize = 4096;

/// Redlite's benchmark table, one phase per row.
fn redlite(d: &Defaults) -> Vec<Arc<Phase>> {
    // Collections that are read need preparing; a hundred of each keeps the
    // preparation quick while still spreading reads over several keys.
    let coll = d.keyspace.min(100);
    let mk = |name: &str, prefix: &str, keyspace: u64, size: usize, args: Vec<Arg>, class| OpSpec {
        name: name.to_string(),
        args,
        weight: 1,
        prefix: prefix.as_bytes().to_vec(),
        keyspace,
        key_base: 0,
        data: DataSize::fixed(size),
        class,
    };
    let ks = d.keyspace;
    let sz = d.data.max.max(1);
    let del = |prefix: &str| {
        mk(
            "DEL",
            prefix,
            coll,
            sz,
            vec![lit("DEL"), key()],
            OpClass::Other,
        )
    };
    let phase = |op: OpSpec, prepare: Vec<Prepare>| {
        Arc::new(Phase {
            ops: vec![op],
            prepare,
        })
    };
    let prep = |ops: Vec<OpSpec>, keys| vec![Prepare { ops, keys }];
    let set_args = || vec![lit("SET"), key(), data()];
    let mut out = Vec::new();
    for (name, size) in [("SET_64B", 64), ("SET_1KB", 1024), ("SET_10KB", 10 * 1024)] {
        out.push(phase(
            mk(name, "rl:str:", ks, size, set_args(), OpClass::Set),
            vec![],
        ));
    }
    let strings = mk("SET", "rl:str:", ks, 64, set_args(), OpClass::Set);
    out.push(phase(
        mk(
            "GET",
            "rl:str:",
            ks,
            64,
            vec![lit("GET"), key()],
            OpClass::Get,
        ),
        prep(vec![strings], ks),
    ));
    out.push(phase(
        mk(
            "INCR",
            "rl:ctr:",
            ks,
            sz,
            vec![lit("INCR"), key()],
            OpClass::Incr,
        ),
        vec![],
    ));
    out.push(phase(
        mk(
            "APPEND",
            "rl:app:",
            ks,
            sz,
            vec![lit("APPEND"), key(), data()],
            OpClass::Other,
        ),
        vec![],
    ));
    for n in [10, 100, 1000] {
        let p = format!("rl:h{n}:");
        out.push(phase(
            mk(
                &format!("HSET_{n}"),
                &p,
                coll,
                sz,
                vec![lit("HSET"), key(), Arg::FieldValues(n)],
                OpClass::Other,
            ),
            vec![],
        ));
    }
    let hash = vec![
        del("rl:hash:"),
        mk(
            "HSET",
            "rl:hash:",
            coll,
            sz,
            vec![lit("HSET"), key(), Arg::FieldValues(10)],
            OpClass::Other,
        ),
    ];
    out.push(phase(
        mk(
            "HGET",
            "rl:hash:",
            coll,
            sz,
            vec![lit("HGET"), key(), lit("f1")],
            OpClass::Other,
        ),
        prep(hash.clone(), coll),
    ));
    out.push(phase(
        mk(
            "HGETALL",
            "rl:hash:",
            coll,
            sz,
            vec![lit("HGETALL"), key()],
            OpClass::Other,
        ),
        prep(hash, coll),
    ));
    out.push(phase(
        mk(
            "LPUSH",
            "rl:lpush:",
            coll,
            sz,
            vec![lit("LPUSH"), key(), data()],
            OpClass::Other,
        ),
        vec![],
    ));
    let list = |p: &str| {
        vec![
            del(p),
            mk(
                "RPUSH",
                p,
                coll,
                sz,
                vec![lit("RPUSH"), key(), Arg::Values(1000)],
                OpClass::Other,
            ),
        ]
    };
    out.push(phase(
        mk(
            "LPOP",
            "rl:pop:",
            coll,
            sz,
            vec![lit("LPOP"), key()],
            OpClass::Other,
        ),
        prep(list("rl:pop:"), coll),
    ));
    for n in [10usize, 100, 1000] {
        let last = (n - 1).to_string();
        out.push(phase(
            mk(
                &format!("LRANGE_{n}"),
                "rl:list:",
                coll,
                sz,
                vec![lit("LRANGE"), key(), lit("0"), lit(&last)],
                OpClass::Other,
            ),
            prep(list("rl:list:"), coll),
        ));
    }
    out.push(phase(
        mk(
            "SADD",
            "rl:sadd:",
            coll,
            sz,
            vec![
                lit("SADD"),
                key(),
                Arg::Token(vec![Piece::Lit(b"m".to_vec()), Piece::Rand(ks)]),
            ],
            OpClass::Other,
        ),
        vec![],
    ));
    for n in [10, 100, 1000] {
        let p = format!("rl:set{n}:");
        out.push(phase(
            mk(
                &format!("SMEMBERS_{n}"),
                &p,
                coll,
                sz,
                vec![lit("SMEMBERS"), key()],
                OpClass::Other,
            ),
            prep(
                vec![
                    del(&p),
                    mk(
                        "SADD",
                        &p,
                        coll,
                        sz,
                        vec![lit("SADD"), key(), Arg::Members(n)],
                        OpClass::Other,
                    ),
                ],
                coll,
            ),
        ));
    }
    out.push(phase(
        mk(
            "ZADD",
            "rl:zadd:",
            coll,
            sz,
            vec![
                lit("ZADD"),
                key(),
                Arg::Token(vec![Piece::Rand(1_000_000)]),
                Arg::Token(vec![Piece::Lit(b"m".to_vec()), Piece::Rand(ks)]),
            ],
            OpClass::Other,
        ),
        vec![],
    ));
    out.push(phase(
        mk(
            "ZRANGE",
            "rl:zset:",
            coll,
            sz,
            vec![lit("ZRANGE"), key(), lit("0"), lit("99")],
            OpClass::Other,
        ),
        prep(
            vec![
                del("rl:zset:"),
                mk(
                    "ZADD",
                    "rl:zset:",
                    coll,
                    sz,
                    vec![lit("ZADD"), key(), Arg::ScoreMembers(100)],
                    OpClass::Other,
                ),
            ],
            coll,
        ),
    ));
    out.push(phase(
        mk(
            "EXPIRE",
            "rl:exp:",
            ks,
            sz,
            vec![lit("EXPIRE"), key(), lit("3600")],
            OpClass::Other,
        ),
        prep(
            vec![mk("SET", "rl:exp:", ks, sz, set_args(), OpClass::Set)],
            ks,
        ),
    ));
    out
}

/// Per-key state the verifying encoder keeps (see `verify`).
enum KeyState {
    /// Last written by a SET: a GET must return exactly this.
    Value { version: u64, len: usize },
    /// Last written by an INCR: the next INCR must count on from it.
    Counter,
    /// Written some other way (or prepared): nothing can be predicted.
    Unknown,
}

/// The encoder's side of `--verify`: which keys this connection owns and
/// what it last wrote to each.
struct VerifyEnc {
    /// This connection's index: it only uses keys congruent to it.
    conn: u64,
    /// The number of connections (the modulus).
    conns: u64,
    /// The version the next SET embeds in its value.
    next_version: u64,
    keys: HashMap<Vec<u8>, KeyState>,
}

/// Encodes operations of one phase for one connection.
pub struct Encoder {
    phase: Arc<Phase>,
    /// Cumulative weights of the phase's ops, for `pick`.
    cum: Vec<u32>,
    /// One per op, since ops may have different keyspaces.
    keygens: Vec<KeyGen>,
    /// Picks ops, value sizes, TTLs and random arguments.
    rng: SmallRng,
    filler: Arc<[u8]>,
    /// `--data-repeat`: values always start at the filler's first byte.
    repeat: bool,
    expire: Option<(u64, u64)>,
    /// Scratch: the current key.
    key: Vec<u8>,
    /// Scratch: the current SET's value in verify mode, where each value
    /// embeds its key and version and so cannot be a slice of the filler.
    val: Vec<u8>,
    /// Scratch: a multi-piece or numeric argument being assembled.
    tok: Vec<u8>,
    /// Present with `--verify`.
    verify: Option<VerifyEnc>,
}

/// Appends `b` as a RESP bulk string.
#[inline]
fn bulk(out: &mut Vec<u8>, b: &[u8]) {
    out.push(b'$');
    push_u64(out, b.len() as u64);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// Appends `prefix` followed by `n` in decimal as one bulk string, built in
/// `scratch` so no allocation happens.
#[inline]
fn bulk_num(out: &mut Vec<u8>, prefix: &[u8], n: u64, scratch: &mut Vec<u8>) {
    scratch.clear();
    scratch.extend_from_slice(prefix);
    push_u64(scratch, n);
    bulk(out, scratch);
}

impl Encoder {
    /// `conn`/`conns` place this connection among all of the run's
    /// connections (used to spread sequential keys and partition keys when
    /// verifying).
    pub fn new(
        wl: &Workload,
        phase: Arc<Phase>,
        seed: u64,
        conn: u64,
        conns: u64,
        verify: bool,
    ) -> Encoder {
        let mut acc = 0u32;
        let cum = phase
            .ops
            .iter()
            .map(|o| {
                acc = acc.saturating_add(o.weight.max(1));
                acc
            })
            .collect();
        let keygens = phase
            .ops
            .iter()
            .enumerate()
            .map(|(i, o)| {
                KeyGen::new(
                    wl.pattern,
                    wl.zipf_s,
                    o.keyspace,
                    seed ^ ((i as u64) << 32),
                    conn,
                    conns,
                )
            })
            .collect();
        Encoder {
            phase,
            cum,
            keygens,
            rng: SmallRng::seed_from_u64(seed.rotate_left(17) ^ 0x0b5e55ed),
            filler: wl.filler.clone(),
            repeat: wl.repeat,
            expire: wl.expire,
            key: Vec::with_capacity(64),
            val: Vec::new(),
            tok: Vec::with_capacity(64),
            verify: verify.then(|| VerifyEnc {
                conn,
                conns: conns.max(1),
                next_version: 1,
                keys: HashMap::new(),
            }),
        }
    }

    /// How many operations the phase has (the range of `pick`).
    pub fn ops(&self) -> usize {
        self.phase.ops.len()
    }

    /// Picks the next operation by weight.
    #[inline]
    pub fn pick(&mut self) -> usize {
        if self.cum.len() == 1 {
            return 0;
        }
        let total = self.cum.last().copied().unwrap_or(1);
        let r = self.rng.random_range(0..total);
        self.cum.partition_point(|&c| c <= r)
    }

    /// Appends operation `op` to `out`, for key index `forced` if given, and
    /// returns what the reply should be checked against.
    pub fn encode(&mut self, op_idx: usize, out: &mut Vec<u8>, forced: Option<u64>) -> Tag {
        // Borrow the phase field directly (disjoint from the buffers below)
        // rather than cloning the Arc: no atomic traffic per request.
        let op = &self.phase.ops[op_idx];
        let mut k = match forced {
            Some(k) => k,
            None => self.keygens[op_idx].next_key(),
        };
        if let (Some(v), None) = (&self.verify, forced) {
            k = k / v.conns * v.conns + v.conn;
        }
        self.key.clear();
        self.key.extend_from_slice(&op.prefix);
        push_u64(&mut self.key, k + op.key_base);
        let len = op.data.pick(&mut self.rng);
        let mut set_version = None;
        if let (Some(v), OpClass::Set) = (&mut self.verify, op.class) {
            let version = v.next_version;
            v.next_version += 1;
            make_value(&mut self.val, &self.key, version, len, &self.filler);
            set_version = Some(version);
        }
        let value: &[u8] = if set_version.is_some() {
            &self.val
        } else {
            let start = if self.repeat {
                0
            } else {
                self.rng.random_range(0..=FILLER_SLACK)
            };
            let end = (start + len).min(self.filler.len());
            &self.filler[start.min(end)..end]
        };
        let ttl = match self.expire {
            Some((a, b)) if a < b => self.rng.random_range(a..=b),
            Some((a, _)) => a,
            None => 0,
        };
        let argc: usize = op
            .args
            .iter()
            .map(|a| match a {
                Arg::Token(_) => 1,
                Arg::FieldValues(n) | Arg::ScoreMembers(n) => 2 * n,
                Arg::Values(n) | Arg::Members(n) => *n,
            })
            .sum();
        out.push(b'*');
        push_u64(out, argc as u64);
        out.extend_from_slice(b"\r\n");
        for arg in &op.args {
            match arg {
                Arg::Token(pieces) => {
                    if let [single] = pieces.as_slice() {
                        match single {
                            Piece::Lit(b) => bulk(out, b),
                            Piece::Key => bulk(out, &self.key),
                            Piece::Data => bulk(out, value),
                            Piece::Ttl => bulk_num(out, b"", ttl, &mut self.tok),
                            Piece::Rand(n) => {
                                let r = self.rng.random_range(0..(*n).max(1));
                                bulk_num(out, b"", r, &mut self.tok)
                            }
                        }
                    } else {
                        self.tok.clear();
                        for p in pieces {
                            match p {
                                Piece::Lit(b) => self.tok.extend_from_slice(b),
                                Piece::Key => self.tok.extend_from_slice(&self.key),
                                Piece::Data => self.tok.extend_from_slice(value),
                                Piece::Ttl => push_u64(&mut self.tok, ttl),
                                Piece::Rand(n) => {
                                    push_u64(&mut self.tok, self.rng.random_range(0..(*n).max(1)))
                                }
                            }
                        }
                        bulk(out, &self.tok);
                    }
                }
                Arg::FieldValues(n) => {
                    for i in 0..*n as u64 {
                        bulk_num(out, b"f", i, &mut self.tok);
                        bulk(out, value);
                    }
                }
                Arg::Values(n) => {
                    for _ in 0..*n {
                        bulk(out, value);
                    }
                }
                Arg::Members(n) => {
                    for i in 0..*n as u64 {
                        bulk_num(out, b"m", i, &mut self.tok);
                    }
                }
                Arg::ScoreMembers(n) => {
                    for i in 0..*n as u64 {
                        bulk_num(out, b"", i, &mut self.tok);
                        bulk_num(out, b"m", i, &mut self.tok);
                    }
                }
            }
        }
        let Some(v) = &mut self.verify else {
            return Tag::Unchecked;
        };
        if forced.is_some() {
            // Preparation writes are not part of the verified history.
            v.keys.insert(self.key.clone(), KeyState::Unknown);
            return Tag::Other;
        }
        match op.class {
            OpClass::Set => {
                let version = set_version.unwrap_or(0);
                v.keys
                    .insert(self.key.clone(), KeyState::Value { version, len });
                Tag::Set
            }
            OpClass::Get => {
                let expect = match v.keys.get(&self.key) {
                    Some(KeyState::Value { version, len }) => Expect::Value {
                        version: *version,
                        len: *len,
                    },
                    _ => Expect::Anything,
                };
                Tag::Get {
                    key: self.key.clone(),
                    expect,
                    nil_ok: self.expire.is_some(),
                }
            }
            OpClass::Incr => {
                let chain = matches!(v.keys.get(&self.key), Some(KeyState::Counter));
                v.keys.insert(self.key.clone(), KeyState::Counter);
                Tag::Incr {
                    key: self.key.clone(),
                    chain,
                }
            }
            OpClass::Other => {
                if op.touches_key() {
                    v.keys.insert(self.key.clone(), KeyState::Unknown);
                }
                Tag::Other
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_parse() {
        let (w, args) = parse_template("3:HSET user:__key__ f __data__").unwrap();
        assert_eq!(w, 3);
        assert_eq!(args.len(), 4);
        assert_eq!(
            args[1],
            Arg::Token(vec![Piece::Lit(b"user:".to_vec()), Piece::Key])
        );
        assert_eq!(classify(&args).0, "HSET");
        let (_, args) = parse_template("GET __key__").unwrap();
        assert_eq!(classify(&args).1, OpClass::Get);
        assert!(parse_template("").is_err());
        assert!(parse_template("__key__ GET").is_err());
        assert!(parse_template("0:GET x").is_err());
    }

    #[test]
    fn rewrites_of_a_key_carry_new_bytes() {
        use clap::Parser;
        let cli = Cli::try_parse_from([
            "respite-loadgen",
            "--target",
            "x=127.0.0.1:1",
            "--ratio",
            "1:0",
            "--keyspace",
            "1",
        ])
        .unwrap();
        let wl = build(&cli).unwrap();
        let mut enc = Encoder::new(&wl, wl.phases[0].clone(), 7, 0, 1, false);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..50 {
            let mut out = Vec::new();
            enc.encode(0, &mut out, None);
            // One key: the requests differ only by their values.
            seen.insert(out);
        }
        assert!(seen.len() >= 45, "only {} distinct SETs of 50", seen.len());
    }

    #[test]
    fn data_repeat_sends_one_value_and_key_minimum_shifts_keys() {
        use clap::Parser;
        let cli = Cli::try_parse_from([
            "respite-loadgen",
            "--ratio",
            "1:0",
            "--key-minimum",
            "7",
            "--key-maximum",
            "7",
            "--data-repeat",
        ])
        .unwrap();
        let wl = build(&cli).unwrap();
        let mut enc = Encoder::new(&wl, wl.phases[0].clone(), 7, 0, 1, false);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..50 {
            let mut out = Vec::new();
            enc.encode(0, &mut out, None);
            seen.insert(out);
        }
        assert_eq!(seen.len(), 1, "--data-repeat: one request, repeated");
        let req = seen.into_iter().next().unwrap_or_default();
        assert!(req.windows(7).any(|w| w == b"\nkey:7\r"), "key 7 only");
    }
}
