//! Access control lists: users, what each may run and touch, and the check
//! every command passes.
//!
//! This is Redis 7.0's model, so that `ACL SETUSER` lines, `ACL LIST`
//! output and `users.acl` files move between redis-server and respite
//! unchanged. A user has a name, is `on` or `off` (an `off` user cannot
//! log in; connections already logged in keep working, as in Redis), and
//! has any number of passwords, kept only as SHA-256 hashes (`nopass`
//! accepts any password). Its permissions are
//!
//! - commands: a bitmap with one bit per command id (below), set and
//!   cleared by `+cmd`, `-cmd`, `+@category`, `-@category`, `allcommands`
//!   (`+@all`) and `nocommands` (`-@all`); `+cmd|sub` allows one
//!   subcommand of a container (CONFIG GET), or, for a command without
//!   subcommands, only calls whose first argument is `sub` (Redis's
//!   deprecated first-arg rule, kept for compatibility);
//! - keys: glob patterns (`~pattern`, `%R~` for reads only, `%W~` for
//!   writes only, `allkeys`/`~*`, `resetkeys`);
//! - pub/sub channels: `&pattern`, `allchannels`/`&*`, `resetchannels`,
//!   in place for when pub/sub lands (no command here names a channel yet).
//!
//! The default user exists from the start with every permission and
//! `nopass`: a fresh server behaves as before ACLs existed. `requirepass`
//! is, as in Redis, nothing but the default user's password.
//!
//! # Command ids
//!
//! Every command and subcommand redis-server 7.0 has (`cmd::meta`, whose
//! order puts each container just before its subcommands) has an id, its
//! position there; a row of the command table the metadata does not know
//! gets one after them. So rules may name any Redis command, as on
//! redis-server, categories select the same commands, and the description
//! of a user's rules (ACL LIST), which weighs categories over the whole
//! command set, reads as redis-server's. Each table row's id is looked up
//! once, at start-up, so the check indexes the bitmap straight from the
//! row the lookup found; a container's request uses its subcommand's id
//! (one respite has beyond the metadata is checked as its container).
//!
//! # The cost of the check
//!
//! A connection keeps the user it logged in as (`SessionAcl`), with one
//! flag that says whether the user may run anything on any key. For such a
//! user (the default user, unless restricted) the check is that flag and
//! one relaxed atomic load that notices any ACL change since the user was
//! taken. A restricted user costs a bit test; keys are extracted and
//! matched only when the user has key patterns rather than `allkeys`. The
//! connection's fast paths for plain GET and SET (which skip the command
//! table) make the same decision inline (`SessionAcl::fast_allowed`): a
//! user allowed the command and the key keeps them; a refusal, or an ACL
//! change not yet taken, sends the request the general way.
//!
//! Which keys a request names comes from the command table's key range,
//! and for the commands whose keys move (a `numkeys` argument, SORT's
//! STORE) from their arguments; what access each key needs (`%R~` allows
//! reads, `%W~` writes) from Redis's key specs in `cmd::meta`, as Redis
//! decides it (SET reads its key only with GET). Where no key spec covers
//! a key, a read-only command's key needs R and a write command's W.
//!
//! Selectors (`(rules...)`, Redis 7.0's) are further sets of command, key
//! and channel rules: a command runs if the root rules or any selector
//! allow it.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, RwLock};

use bytes::Bytes;
use respite_engine::glob::glob_match;
use sha2::{Digest, Sha256};

use crate::clients::ClientHandle;
use crate::command::{Access, Spec, TABLE};
use crate::meta::{self, Meta};
use crate::state::Shared;
use crate::sync::lock;

/// Redis 7.0's ACL categories, in the order ACL CAT lists them (and the
/// description of a user's rules tries them).
fn category_names() -> &'static [&'static str] {
    meta::all_categories()
}

/// One command id.
struct IdInfo {
    /// `get`, `config|get`.
    fullname: &'static str,
    /// Whether this is a subcommand.
    is_sub: bool,
    /// The subcommands' ids, for a container.
    subs: Vec<usize>,
    /// A bit per category of [`category_names`].
    categories: u32,
}

/// Every command id: one per command and subcommand redis-server 7.0 has
/// (`cmd::meta`, in its order: each container just before its
/// subcommands), then any row of the command table the metadata does not
/// know. Rules may name any Redis command, as on redis-server, and the
/// description of a user's rules weighs categories over the same commands
/// redis-server does, so `ACL LIST` reads the same.
struct Ids {
    ids: Vec<IdInfo>,
    /// Per table row: its id.
    row_id: Vec<usize>,
    /// Per table row: whether the metadata has subcommands for it.
    row_has_subs: Vec<bool>,
    /// Per table row: its metadata (key specs).
    row_meta: Vec<Option<&'static Meta>>,
}

/// The position of `m` in `meta::all()`.
fn meta_index(m: &'static Meta) -> usize {
    let base = meta::all().as_ptr() as usize;
    (m as *const Meta as usize - base) / std::mem::size_of::<Meta>()
}

static IDS: LazyLock<Ids> = LazyLock::new(|| {
    let cats = category_names();
    let mask = |categories: &[&str]| {
        categories
            .iter()
            .filter_map(|c| cats.iter().position(|k| k == c))
            .fold(0u32, |m, i| m | (1 << i))
    };
    let all = meta::all();
    let mut ids: Vec<IdInfo> = all
        .iter()
        .map(|m| IdInfo {
            fullname: m.name,
            is_sub: m.sub.is_some(),
            subs: Vec::new(),
            categories: mask(m.categories),
        })
        .collect();
    for (i, m) in all.iter().enumerate() {
        if m.sub.is_some() {
            if let Some(parent) = meta::find(m.command.as_bytes(), None) {
                ids[meta_index(parent)].subs.push(i);
            }
        }
    }
    let mut row_id = Vec::with_capacity(TABLE.len());
    let mut row_has_subs = Vec::with_capacity(TABLE.len());
    let mut row_meta = Vec::with_capacity(TABLE.len());
    for spec in TABLE.iter() {
        let found = meta::find(spec.name.as_bytes(), None);
        row_meta.push(found);
        match found {
            Some(m) => {
                row_id.push(meta_index(m));
                row_has_subs.push(!m.subcommands().is_empty());
            }
            None => {
                row_id.push(ids.len());
                row_has_subs.push(false);
                ids.push(IdInfo {
                    fullname: spec.name,
                    is_sub: false,
                    subs: Vec::new(),
                    categories: 0,
                });
            }
        }
    }
    Ids {
        ids,
        row_id,
        row_has_subs,
        row_meta,
    }
});

impl Ids {
    fn words(&self) -> usize {
        self.ids.len().div_ceil(64)
    }

    /// The id of `name` or `name|sub`, case-insensitively.
    fn lookup(&self, name: &str) -> Option<usize> {
        if let Some(m) = meta::find_full(name.as_bytes()) {
            return Some(meta_index(m));
        }
        if name.contains('|') {
            return None;
        }
        let row = crate::command::lookup_index(name.as_bytes())?;
        Some(self.row_id[row])
    }

    /// The id a request runs as: its subcommand's, when the command is a
    /// container and Redis has the subcommand (one respite has beyond
    /// Redis 7.0's is checked as its container).
    fn of_request(&self, row: usize, request: &[Bytes]) -> usize {
        match request.get(1) {
            Some(sub) if self.row_has_subs[row] => {
                meta::find(TABLE[row].name.as_bytes(), Some(sub))
                    .map_or(self.row_id[row], meta_index)
            }
            _ => self.row_id[row],
        }
    }
}

/// SHA-256 of a password, as the lower-case hex Redis stores and shows.
pub fn hash_password(password: &[u8]) -> String {
    let digest = Sha256::digest(password);
    let mut hex = String::with_capacity(64);
    for b in digest {
        let _ = write!(hex, "{b:02x}");
    }
    hex
}

/// Compares two equal-length strings in time that does not depend on
/// where they differ (Redis's `time_independent_strcmp`), so a client
/// cannot find a password's hash byte by byte from reply times.
fn same_in_constant_time(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// A key pattern with the access it grants.
#[derive(Clone, Debug, PartialEq, Eq)]
struct KeyPattern {
    pattern: Vec<u8>,
    read: bool,
    write: bool,
}

impl KeyPattern {
    fn describe(&self, out: &mut String) {
        out.push_str(match (self.read, self.write) {
            (true, true) => "~",
            (true, false) => "%R~",
            _ => "%W~",
        });
        out.push_str(&String::from_utf8_lossy(&self.pattern));
    }
}

/// What a user may run and touch (Redis's root selector).
#[derive(Clone, Debug)]
struct Selector {
    /// Redis's ALLCOMMANDS flag: every bit set, cleared by any `-`.
    allcommands: bool,
    /// Redis's reserved "future commands" bit: set by `+@all`, cleared
    /// only by `-@all`; decides whether the description starts from
    /// `+@all` or `-@all`.
    future: bool,
    bits: Vec<u64>,
    /// Per command id: first arguments allowed although the bit is clear.
    firstargs: BTreeMap<usize, Vec<String>>,
    allkeys: bool,
    keys: Vec<KeyPattern>,
    allchannels: bool,
    channels: Vec<Vec<u8>>,
}

/// Why a rule could not be applied (Redis's errno cases).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleError {
    /// EINVAL.
    Syntax,
    /// ENOENT.
    Unknown,
    /// EEXIST.
    KeyAfterAll,
    /// EISDIR.
    ChannelAfterAll,
    /// ENODEV.
    NoSuchPassword,
    /// EBADMSG.
    BadHash,
    /// ECHILD.
    FirstArgOfSub,
}

impl RuleError {
    /// Redis's text (`ACLSetUserStringError`).
    pub fn text(self) -> &'static str {
        match self {
            RuleError::Syntax => "Syntax error",
            RuleError::Unknown => "Unknown command or category name in ACL",
            RuleError::KeyAfterAll => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::ChannelAfterAll => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
            RuleError::FirstArgOfSub => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

fn has_spaces(s: &[u8]) -> bool {
    s.iter().any(|&c| c.is_ascii_whitespace() || c == 0)
}

impl Selector {
    fn empty() -> Selector {
        Selector {
            allcommands: false,
            future: false,
            bits: vec![0; IDS.words()],
            firstargs: BTreeMap::new(),
            allkeys: false,
            keys: Vec::new(),
            allchannels: false,
            channels: Vec::new(),
        }
    }

    fn bit(&self, id: usize) -> bool {
        self.bits[id / 64] & (1 << (id % 64)) != 0
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        if on {
            self.bits[id / 64] |= 1 << (id % 64);
        } else {
            self.bits[id / 64] &= !(1 << (id % 64));
            self.allcommands = false;
        }
    }

    /// Allows or blocks a command and, for a container, its subcommands.
    fn change(&mut self, id: usize, on: bool) {
        self.set_bit(id, on);
        self.firstargs.remove(&id);
        for &sub in &IDS.ids[id].subs {
            self.set_bit(sub, on);
        }
    }

    fn category(&mut self, name: &str, on: bool) -> Result<(), RuleError> {
        let index = category_names()
            .iter()
            .position(|c| c.eq_ignore_ascii_case(name))
            .ok_or(RuleError::Unknown)?;
        let flag = 1u32 << index;
        for id in 0..IDS.ids.len() {
            if IDS.ids[id].categories & flag != 0 {
                self.change(id, on);
            }
        }
        Ok(())
    }

    fn all(&mut self, on: bool) {
        let fill = if on { u64::MAX } else { 0 };
        self.bits.iter_mut().for_each(|w| *w = fill);
        self.allcommands = on;
        self.future = on;
        self.firstargs.clear();
    }

    /// Applies one selector rule (Redis's `ACLSetSelector`).
    fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let text = String::from_utf8_lossy(op);
        let lower = text.to_ascii_lowercase();
        match lower.as_str() {
            "allkeys" | "~*" => {
                self.allkeys = true;
                self.keys.clear();
            }
            "resetkeys" => {
                self.allkeys = false;
                self.keys.clear();
            }
            "allchannels" | "&*" => {
                self.allchannels = true;
                self.channels.clear();
            }
            "resetchannels" => {
                self.allchannels = false;
                self.channels.clear();
            }
            "allcommands" | "+@all" => self.all(true),
            "nocommands" | "-@all" => self.all(false),
            _ => return self.apply_pattern_or_command(op, &text),
        }
        Ok(())
    }

    fn apply_pattern_or_command(&mut self, op: &[u8], text: &str) -> Result<(), RuleError> {
        match op[0] {
            b'~' | b'%' => {
                if self.allkeys {
                    return Err(RuleError::KeyAfterAll);
                }
                let (mut read, mut write) = (true, true);
                let mut offset = 1;
                if op[0] == b'%' {
                    (read, write) = (false, false);
                    while offset < op.len() {
                        match op[offset].to_ascii_uppercase() {
                            b'R' if !read => read = true,
                            b'W' if !write => write = true,
                            b'~' => {
                                offset += 1;
                                break;
                            }
                            _ => return Err(RuleError::Syntax),
                        }
                        offset += 1;
                    }
                }
                let pattern = &op[offset..];
                if has_spaces(pattern) {
                    return Err(RuleError::Syntax);
                }
                match self.keys.iter_mut().find(|k| k.pattern == pattern) {
                    Some(k) => {
                        k.read |= read;
                        k.write |= write;
                    }
                    None => self.keys.push(KeyPattern {
                        pattern: pattern.to_vec(),
                        read,
                        write,
                    }),
                }
                self.allkeys = false;
            }
            b'&' => {
                if self.allchannels {
                    return Err(RuleError::ChannelAfterAll);
                }
                let pattern = &op[1..];
                if has_spaces(pattern) {
                    return Err(RuleError::Syntax);
                }
                if !self.channels.iter().any(|c| c == pattern) {
                    self.channels.push(pattern.to_vec());
                }
                self.allchannels = false;
            }
            b'+' | b'-' if op.get(1) == Some(&b'@') => {
                self.category(&text[2..], op[0] == b'+')?;
            }
            b'+' => {
                let name = &text[1..];
                match name.rsplit_once('|') {
                    None => {
                        let id = IDS.lookup(name).ok_or(RuleError::Unknown)?;
                        self.change(id, true);
                    }
                    Some((cmd, sub)) => {
                        let id = IDS.lookup(cmd).ok_or(RuleError::Unknown)?;
                        if IDS.ids[id].is_sub {
                            return Err(RuleError::FirstArgOfSub);
                        }
                        if sub.is_empty() {
                            return Err(RuleError::Syntax);
                        }
                        if IDS.ids[id].subs.is_empty() {
                            // A first argument of a command without
                            // subcommands (Redis warns it is deprecated).
                            let args = self.firstargs.entry(id).or_default();
                            if !args.iter().any(|a| a.eq_ignore_ascii_case(sub)) {
                                args.push(sub.to_string());
                            }
                        } else {
                            let sub_id = IDS.lookup(name).ok_or(RuleError::Unknown)?;
                            self.change(sub_id, true);
                        }
                    }
                }
            }
            b'-' => {
                let id = IDS.lookup(&text[1..]).ok_or(RuleError::Unknown)?;
                self.change(id, false);
            }
            _ => return Err(RuleError::Syntax),
        }
        Ok(())
    }

    /// Allowed (`on`) and denied (`off`) ids in a category.
    fn count_category(&self, flag: u32) -> (usize, usize) {
        let (mut on, mut off) = (0, 0);
        for (id, info) in IDS.ids.iter().enumerate() {
            if info.categories & flag != 0 {
                if self.bit(id) {
                    on += 1;
                } else {
                    off += 1;
                }
            }
        }
        (on, off)
    }

    /// The command rules that rebuild this bitmap, as Redis 7.0 writes
    /// them (`ACLDescribeSelectorCommandRules`): `+@all` or `-@all`, the
    /// categories that fit best, then single commands.
    fn describe_commands(&self) -> String {
        let mut rules = String::new();
        let mut fake = Selector::empty();
        let additive = !self.future;
        if additive {
            rules.push_str("-@all ");
            fake.all(false);
        } else {
            rules.push_str("+@all ");
            fake.all(true);
        }
        let cats = category_names();
        let mut temp = self.clone();
        let mut applied = vec![false; cats.len()];
        loop {
            let mut best = None;
            let (mut mindiff, mut maxsame) = (usize::MAX, 0);
            for (j, _) in cats.iter().enumerate() {
                if applied[j] {
                    continue;
                }
                let (on, off) = temp.count_category(1 << j);
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < mindiff || (diff == mindiff && same > maxsame)) {
                    best = Some(j);
                    mindiff = diff;
                    maxsame = same;
                }
            }
            let Some(j) = best else { break };
            let _ = fake.category(cats[j], additive);
            let _ = temp.category(cats[j], !additive);
            let _ = write!(rules, "{}@{} ", if additive { "+" } else { "-" }, cats[j]);
            applied[j] = true;
        }
        for id in 0..IDS.ids.len() {
            self.describe_single(id, &mut fake, &mut rules);
        }
        rules.pop();
        rules
    }

    fn describe_single(&self, id: usize, fake: &mut Selector, rules: &mut String) {
        let (user, faked) = (self.bit(id), fake.bit(id));
        if user != faked {
            let _ = write!(
                rules,
                "{}{} ",
                if user { "+" } else { "-" },
                IDS.ids[id].fullname
            );
            fake.change(id, user);
        }
        if !user {
            for arg in self.firstargs.get(&id).into_iter().flatten() {
                let _ = write!(rules, "+{}|{arg} ", IDS.ids[id].fullname);
            }
        }
    }

    /// The key patterns as ACL GETUSER shows them.
    fn describe_keys(&self) -> String {
        if self.allkeys {
            return "~*".into();
        }
        let mut out = String::new();
        for (i, k) in self.keys.iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            k.describe(&mut out);
        }
        out
    }

    /// The channel patterns as ACL GETUSER shows them.
    fn describe_channels(&self) -> String {
        if self.allchannels {
            return "&*".into();
        }
        self.channels
            .iter()
            .map(|c| format!("&{}", String::from_utf8_lossy(c)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The selector as ACL LIST shows it.
    fn describe(&self) -> String {
        let mut out = String::new();
        if self.allkeys {
            out.push_str("~* ");
        } else {
            for k in &self.keys {
                k.describe(&mut out);
                out.push(' ');
            }
        }
        if self.allchannels {
            out.push_str("&* ");
        } else {
            out.push_str("resetchannels ");
            for c in &self.channels {
                let _ = write!(out, "&{} ", String::from_utf8_lossy(c));
            }
        }
        out.push_str(&self.describe_commands());
        out
    }
}

/// `sanitize-payload` / `skip-sanitize-payload` (kept and shown for
/// compatibility; respite has no RESTORE to sanitize).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Payload {
    Unset,
    Skip,
    Sanitize,
}

/// One ACL user.
#[derive(Clone, Debug)]
pub struct User {
    name: String,
    enabled: bool,
    nopass: bool,
    sanitize: Payload,
    /// SHA-256 hashes, lower-case hex, in the order they were added.
    passwords: Vec<String>,
    root: Selector,
    /// Further selectors (`(...)` rules): a command runs if the root or
    /// any of these allows it.
    selectors: Vec<Selector>,
}

impl User {
    /// A new user as Redis creates one: off, no password, no permissions.
    fn new(name: &str) -> User {
        User {
            name: name.to_string(),
            enabled: false,
            nopass: false,
            sanitize: Payload::Unset,
            passwords: Vec::new(),
            root: Selector::empty(),
            selectors: Vec::new(),
        }
    }

    /// The default user: on, nopass, every permission.
    fn default_user() -> User {
        let mut u = User::new("default");
        for op in ["+@all", "~*", "&*", "on", "nopass"] {
            let _ = u.apply(op.as_bytes());
        }
        u
    }

    /// The user's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether it takes any password (`nopass`).
    pub fn is_nopass(&self) -> bool {
        self.nopass
    }

    /// Whether it may run every command on every key and channel.
    pub fn unrestricted(&self) -> bool {
        self.root.allcommands && self.root.allkeys && self.root.allchannels
    }

    /// Applies one rule (Redis's `ACLSetUser`).
    pub fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let lower = String::from_utf8_lossy(op).to_ascii_lowercase();
        match lower.as_str() {
            "on" => self.enabled = true,
            "off" => self.enabled = false,
            "skip-sanitize-payload" => self.sanitize = Payload::Skip,
            "sanitize-payload" => self.sanitize = Payload::Sanitize,
            "nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            "resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            "clearselectors" => self.selectors.clear(),
            "reset" => {
                for op in [
                    "resetpass",
                    "resetkeys",
                    "resetchannels",
                    "off",
                    "sanitize-payload",
                    "clearselectors",
                    "-@all",
                ] {
                    self.apply(op.as_bytes())?;
                }
            }
            _ => match op[0] {
                b'>' | b'#' => {
                    let hash = if op[0] == b'>' {
                        hash_password(&op[1..])
                    } else {
                        valid_hash(&op[1..])?
                    };
                    if !self.passwords.contains(&hash) {
                        self.passwords.push(hash);
                    }
                    self.nopass = false;
                }
                b'<' | b'!' => {
                    let hash = if op[0] == b'<' {
                        hash_password(&op[1..])
                    } else {
                        valid_hash(&op[1..])?
                    };
                    let at = self
                        .passwords
                        .iter()
                        .position(|p| *p == hash)
                        .ok_or(RuleError::NoSuchPassword)?;
                    self.passwords.remove(at);
                }
                b'(' if op.len() > 1 && op.ends_with(b")") => {
                    let mut selector = Selector::empty();
                    for rule in op[1..op.len() - 1]
                        .split(|c| c.is_ascii_whitespace())
                        .filter(|r| !r.is_empty())
                    {
                        selector.apply(rule)?;
                    }
                    self.selectors.push(selector);
                }
                _ => self.root.apply(op)?,
            },
        }
        Ok(())
    }

    /// The flags, in Redis's order.
    fn flags(&self) -> Vec<&'static str> {
        let mut flags = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            flags.push("nopass");
        }
        match self.sanitize {
            Payload::Skip => flags.push("skip-sanitize-payload"),
            Payload::Sanitize => flags.push("sanitize-payload"),
            Payload::Unset => {}
        }
        flags
    }

    /// The rules after the name, as ACL LIST and the ACL file write them.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for f in self.flags() {
            out.push_str(f);
            out.push(' ');
        }
        for p in &self.passwords {
            let _ = write!(out, "#{p} ");
        }
        out.push_str(&self.root.describe());
        for s in &self.selectors {
            let _ = write!(out, " ({})", s.describe());
        }
        out
    }

    /// The fields of ACL GETUSER.
    pub fn details(&self) -> UserDetails {
        UserDetails {
            flags: self.flags(),
            passwords: self.passwords.clone(),
            selectors: self
                .selectors
                .iter()
                .map(|s| {
                    [
                        s.describe_commands(),
                        s.describe_keys(),
                        s.describe_channels(),
                    ]
                })
                .collect(),
            commands: self.root.describe_commands(),
            keys: self.root.describe_keys(),
            channels: self.root.describe_channels(),
        }
    }

    /// Whether `password` logs this user in (an `off` user never does).
    fn accepts(&self, password: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let hash = hash_password(password);
        // Every stored hash is compared, matched or not.
        self.passwords.iter().fold(false, |ok, p| {
            same_in_constant_time(p.as_bytes(), hash.as_bytes()) | ok
        })
    }
}

/// What ACL GETUSER shows of a user.
pub struct UserDetails {
    /// `on`/`off`, `nopass`, ...
    pub flags: Vec<&'static str>,
    /// The password hashes.
    pub passwords: Vec<String>,
    /// The command rules.
    pub commands: String,
    /// The key patterns.
    pub keys: String,
    /// The channel patterns.
    pub channels: String,
    /// Each further selector's commands, keys and channels.
    pub selectors: Vec<[String; 3]>,
}

/// Joins the arguments of a selector written across several arguments
/// (`(~key*` `+get)` becomes `(~key* +get)`), as Redis's
/// `ACLMergeSelectorArguments` does; `Err` with the index of a `(` that is
/// never closed.
fn merge_selectors(args: &[&[u8]]) -> Result<Vec<Vec<u8>>, usize> {
    let mut out = Vec::with_capacity(args.len());
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (i, op) in args.iter().enumerate() {
        if let Some((_, selector)) = open.as_mut() {
            selector.push(b' ');
            selector.extend_from_slice(op);
            if op.ends_with(b")") {
                if let Some((_, done)) = open.take() {
                    out.push(done);
                }
            }
            continue;
        }
        if op.first() == Some(&b'(') && !op.ends_with(b")") {
            open = Some((i, op.to_vec()));
            continue;
        }
        out.push(op.to_vec());
    }
    match open {
        Some((at, _)) => Err(at),
        None => Ok(out),
    }
}

fn valid_hash(h: &[u8]) -> Result<String, RuleError> {
    if h.len() != 64
        || !h
            .iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
    {
        return Err(RuleError::BadHash);
    }
    Ok(String::from_utf8_lossy(h).into_owned())
}

/// Why a command was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// The command (its id).
    Command(usize),
    /// A key (its argument position).
    Key(usize),
    /// A channel (its argument position).
    Channel(usize),
}

/// The access a key at `pos` needs, from the command's key specs (Redis's
/// flags: `access` is a read, `insert`, `delete` and `update` a write), as
/// `(read, write)`; `None` when no spec with a fixed start covers it.
fn key_access(
    specs: &[meta::KeySpec],
    name: &str,
    pos: usize,
    request: &[Bytes],
) -> Option<(bool, bool)> {
    let argc = request.len() as i64;
    let p = pos as i64;
    let covers = |ks: &meta::KeySpec| {
        let meta::BeginSearch::Index(start) = ks.begin_search else {
            return false;
        };
        let start = start as i64;
        match ks.find_keys {
            meta::FindKeys::Range {
                lastkey, keystep, ..
            } => {
                let last = if lastkey >= 0 {
                    start + lastkey as i64
                } else {
                    argc + lastkey as i64
                };
                p >= start && p <= last && (p - start) % (keystep.max(1) as i64) == 0
            }
            meta::FindKeys::Keynum {
                keynumidx,
                firstkey,
                keystep,
            } => {
                let n = request
                    .get((start + keynumidx as i64) as usize)
                    .and_then(|b| crate::args::parse_i64(b))
                    .unwrap_or(0);
                let first = start + firstkey as i64;
                let step = keystep.max(1) as i64;
                p >= first && p < first + n * step && (p - first) % step == 0
            }
            meta::FindKeys::Unknown => false,
        }
    };
    let ks = specs.iter().find(|ks| covers(ks))?;
    let has = |f: &str| ks.flags.contains(&f);
    let mut read = has("access");
    let write = has("insert") || has("delete") || has("update");
    // SET reads its key only with GET (Redis's setGetKeys).
    if name == "set" && has("variable_flags") {
        read = request[3..].iter().any(|a| a.eq_ignore_ascii_case(b"GET"));
    }
    Some((read, write))
}

/// Key argument positions of a request, from the table's key range and,
/// for commands whose keys move (a `numkeys` argument, SORT's STORE),
/// from the arguments. Each position comes with a guess of the access it
/// needs from the command's kind, `(read, write)`, for when the key specs
/// do not say.
fn key_positions(spec: &Spec, request: &[Bytes]) -> Vec<(usize, (bool, bool))> {
    let argc = request.len();
    let writes = spec.access == Access::Write;
    let (r, w) = ((true, false), (false, true));
    let kind = if writes { w } else { r };
    let numkeys = |at: usize, dest: bool| {
        let n = request
            .get(at)
            .and_then(|b| crate::args::parse_i64(b))
            .filter(|n| *n > 0)
            .map_or(0, |n| n as usize);
        let mut out: Vec<(usize, (bool, bool))> = (at + 1..(at + 1 + n).min(argc))
            .map(|i| (i, if dest { r } else { kind }))
            .collect();
        if dest {
            out.push((1, w));
        }
        out
    };
    match spec.name {
        "lmpop" | "zmpop" | "sintercard" | "zdiff" | "zinter" | "zintercard" | "zunion" => {
            return numkeys(1, false)
        }
        "blmpop" | "bzmpop" => return numkeys(2, false),
        // The first half of what follows STREAMS.
        "xread" | "xreadgroup" => {
            let at = request
                .iter()
                .position(|a| a.eq_ignore_ascii_case(b"STREAMS"));
            let at = at.map_or(argc, |i| i + 1);
            let n = (argc - at) / 2;
            return (at..at + n).map(|i| (i, kind)).collect();
        }
        "zdiffstore" | "zinterstore" | "zunionstore" => return numkeys(2, true),
        "sort" | "sort_ro" => {
            let mut out = vec![(1, r)];
            let mut i = 2;
            while i < argc {
                if request[i].eq_ignore_ascii_case(b"STORE") && i + 1 < argc {
                    out.push((i + 1, w));
                    i += 1;
                }
                i += 1;
            }
            return out;
        }
        _ => {}
    }
    if spec.first_key <= 0 {
        return Vec::new();
    }
    let first = spec.first_key as usize;
    let last = if spec.last_key < 0 {
        argc as i64 + spec.last_key as i64
    } else {
        spec.last_key as i64
    };
    let step = spec.step.max(1) as usize;
    let mut out = Vec::new();
    let mut i = first;
    while (i as i64) <= last && i < argc {
        out.push((i, kind));
        i += step;
    }
    out
}

impl Selector {
    /// Checks one request against this selector (`ACLSelectorCheckCmd`).
    fn check(&self, row: usize, request: &[Bytes]) -> Result<(), Denied> {
        let spec = &TABLE[row];
        let id = IDS.of_request(row, request);
        if !self.allcommands && !self.bit(id) && !spec.has_flag("no_auth") {
            let arg = if IDS.ids[id].is_sub { 2 } else { 1 };
            let allowed = match (self.firstargs.get(&id), request.get(arg)) {
                (Some(args), Some(first)) => args
                    .iter()
                    .any(|a| a.as_bytes().eq_ignore_ascii_case(first)),
                _ => false,
            };
            if !allowed {
                return Err(Denied::Command(id));
            }
        }
        if !self.allkeys {
            let specs = IDS.row_meta[row].map_or(&[][..], |m| m.key_specs);
            for (pos, guess) in key_positions(spec, request) {
                // A shard channel sits where a key would (SPUBLISH,
                // SSUBSCRIBE): redis's `not_key` spec; the channel rules
                // below are its check.
                if specs.iter().any(|ks| {
                    ks.flags.contains(&"not_key")
                        && matches!(ks.begin_search, meta::BeginSearch::Index(i) if i as usize <= pos)
                }) {
                    continue;
                }
                let (read, write) = key_access(specs, spec.name, pos, request).unwrap_or(guess);
                let key = &request[pos];
                // As in Redis: a pattern must grant every access the key
                // needs (a key that is neither read nor written, as
                // EXISTS's, needs only a matching name).
                let ok = self.keys.iter().any(|k| {
                    (k.read || !read) && (k.write || !write) && glob_match(&k.pattern, key)
                });
                if !ok {
                    return Err(Denied::Key(pos));
                }
            }
        }
        if !self.allchannels {
            // Redis's channel arguments: PUBLISH's and SPUBLISH's first,
            // every one of SUBSCRIBE, SSUBSCRIBE and PSUBSCRIBE (a pattern
            // must equal an allowed pattern, not just match it); the
            // UNSUBSCRIBE family is never refused.
            let (from, to, pattern) = match spec.name {
                "publish" | "spublish" => (1, 2.min(request.len()), false),
                "subscribe" | "ssubscribe" => (1, request.len(), false),
                "psubscribe" => (1, request.len(), true),
                _ => (0, 0, false),
            };
            for (pos, channel) in request.iter().enumerate().take(to).skip(from) {
                let ok = self.channels.iter().any(|p| {
                    if pattern {
                        p[..] == channel[..]
                    } else {
                        glob_match(p, channel)
                    }
                });
                if !ok {
                    return Err(Denied::Channel(pos));
                }
            }
        }
        Ok(())
    }
}

/// Why an ACL LOG entry was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// A command the user may not run.
    Command,
    /// A key outside its patterns.
    Key,
    /// A channel outside its patterns.
    Channel,
    /// A failed AUTH or HELLO AUTH.
    Auth,
}

impl Reason {
    fn as_str(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Key => "key",
            Reason::Channel => "channel",
            Reason::Auth => "auth",
        }
    }
}

/// One ACL LOG entry.
#[derive(Debug, Clone)]
pub struct LogEntry {
    /// How many times it happened (similar events within a minute are
    /// counted on one entry).
    pub count: u64,
    /// Why.
    pub reason: Reason,
    /// `toplevel` or `multi`.
    pub context: &'static str,
    /// The command, key, channel or (for auth) the command name.
    pub object: String,
    /// The user (for auth: the name the client tried).
    pub username: String,
    /// When it last happened, in Unix milliseconds.
    pub ctime_ms: u64,
    /// The client's CLIENT LIST line then.
    pub client_info: String,
}

impl LogEntry {
    /// The entry as ACL LOG replies it.
    pub fn reply(&self, now_ms: u64) -> crate::reply::Reply {
        use crate::reply::Reply;
        Reply::Map(vec![
            (Reply::bulk("count"), Reply::Int(self.count as i64)),
            (Reply::bulk("reason"), Reply::bulk(self.reason.as_str())),
            (Reply::bulk("context"), Reply::bulk(self.context)),
            (Reply::bulk("object"), Reply::bulk(self.object.clone())),
            (Reply::bulk("username"), Reply::bulk(self.username.clone())),
            (
                Reply::bulk("age-seconds"),
                Reply::Double(now_ms.saturating_sub(self.ctime_ms) as f64 / 1000.0),
            ),
            (
                Reply::bulk("client-info"),
                Reply::bulk(self.client_info.clone()),
            ),
        ])
    }
}

/// Redis's `acllog-max-len` default.
const LOG_MAX: usize = 128;
/// Events this close together (ms) share an entry.
const LOG_GROUPING_MS: u64 = 60_000;

/// INFO's `acl_access_denied_*` counters.
#[derive(Default)]
pub struct DeniedCounts {
    /// Failed AUTH / HELLO AUTH.
    pub auth: AtomicU64,
    /// Commands refused.
    pub cmd: AtomicU64,
    /// Keys refused.
    pub key: AtomicU64,
    /// Channels refused.
    pub channel: AtomicU64,
}

impl DeniedCounts {
    /// CONFIG RESETSTAT.
    pub fn reset(&self) {
        for c in [&self.auth, &self.cmd, &self.key, &self.channel] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// Every user, the ACL log and the counters.
pub struct Acl {
    users: RwLock<BTreeMap<String, Arc<User>>>,
    /// Raised at every change, so connections notice and take their
    /// user's new rules (one relaxed load per command).
    version: AtomicU64,
    /// Whether the default user lets anyone in (on and nopass), cached
    /// for new connections and protected mode.
    default_open: AtomicBool,
    log: Mutex<VecDeque<LogEntry>>,
    /// INFO counters.
    pub denied: DeniedCounts,
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Acl {
    /// The default user alone, with `requirepass` as its password if set.
    pub fn new(requirepass: Option<&str>) -> Acl {
        let acl = Acl {
            users: RwLock::new(BTreeMap::new()),
            version: AtomicU64::new(0),
            default_open: AtomicBool::new(true),
            log: Mutex::new(VecDeque::new()),
            denied: DeniedCounts::default(),
        };
        let mut users = BTreeMap::new();
        users.insert("default".to_string(), Arc::new(User::default_user()));
        acl.replace(users);
        acl.set_requirepass(requirepass);
        acl
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<User>>> {
        self.users.read().unwrap_or_else(|e| e.into_inner())
    }

    fn replace(&self, users: BTreeMap<String, Arc<User>>) {
        let open = users.get("default").is_some_and(|u| u.enabled && u.nopass);
        *self.users.write().unwrap_or_else(|e| e.into_inner()) = users;
        self.default_open.store(open, Ordering::Relaxed);
        self.version.fetch_add(1, Ordering::Release);
    }

    /// The current version (changes at every ACL change).
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Whether a new connection is logged in as the default user without
    /// AUTH (it is on and nopass).
    pub fn default_user_open(&self) -> bool {
        self.default_open.load(Ordering::Relaxed)
    }

    /// A user by name.
    pub fn user(&self, name: &str) -> Option<Arc<User>> {
        self.read().get(name).cloned()
    }

    /// Every user, by name.
    pub fn users(&self) -> Vec<Arc<User>> {
        self.read().values().cloned().collect()
    }

    /// `requirepass`: the default user's password (none: nopass).
    pub fn set_requirepass(&self, pass: Option<&str>) {
        let mut users = self.read().clone();
        let mut default = users
            .get("default")
            .map_or_else(User::default_user, |u| (**u).clone());
        let _ = default.apply(b"resetpass");
        match pass {
            Some(p) => {
                let _ = default.apply(format!(">{p}").as_bytes());
            }
            None => {
                let _ = default.apply(b"nopass");
            }
        }
        users.insert("default".into(), Arc::new(default));
        self.replace(users);
    }

    /// ACL SETUSER: applies every rule to a copy of the user (a new one if
    /// it does not exist), and only if all apply, stores it.
    pub fn set_user(&self, name: &str, rules: &[Bytes]) -> Result<(), String> {
        let mut users = self.read().clone();
        let mut user = users
            .get(name)
            .map_or_else(|| User::new(name), |u| (**u).clone());
        let rules: Vec<&[u8]> = rules.iter().map(|r| &r[..]).collect();
        let merged = merge_selectors(&rules).map_err(|at| {
            format!(
                "Unmatched parenthesis in acl selector starting at '{}'.",
                String::from_utf8_lossy(crate::error::c_str(rules[at]))
            )
        })?;
        for op in &merged {
            user.apply(op).map_err(|e| {
                format!(
                    "Error in ACL SETUSER modifier '{}': {}",
                    String::from_utf8_lossy(crate::error::c_str(op)),
                    e.text()
                )
            })?;
        }
        users.insert(name.to_string(), Arc::new(user));
        self.replace(users);
        Ok(())
    }

    /// ACL DELUSER: removes the users that exist, returning how many.
    pub fn delete_users(&self, names: &[String]) -> usize {
        let mut users = self.read().clone();
        let deleted = names.iter().filter(|n| users.remove(*n).is_some()).count();
        if deleted > 0 {
            self.replace(users);
        }
        deleted
    }

    /// Checks a login: the user if `password` opens it.
    pub fn authenticate(&self, name: &[u8], password: &[u8]) -> Option<Arc<User>> {
        let name = std::str::from_utf8(name).ok()?;
        self.user(name).filter(|u| u.accepts(password))
    }

    /// Writes an ACL LOG entry (or counts it on a similar recent one) and
    /// raises INFO's counter.
    pub fn log_denial(
        &self,
        reason: Reason,
        context: &'static str,
        object: String,
        username: String,
        client_info: String,
    ) {
        let counter = match reason {
            Reason::Auth => &self.denied.auth,
            Reason::Command => &self.denied.cmd,
            Reason::Key => &self.denied.key,
            Reason::Channel => &self.denied.channel,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let now = now_ms();
        let info = client_info;
        let mut log = lock(&self.log);
        let similar = log.iter().take(10).position(|e| {
            e.reason == reason
                && e.context == context
                && e.ctime_ms.abs_diff(now) <= LOG_GROUPING_MS
                && e.object == object
                && e.username == username
        });
        if let Some(at) = similar {
            if let Some(mut e) = log.remove(at) {
                e.count += 1;
                e.ctime_ms = now;
                e.client_info = info;
                log.push_front(e);
            }
            return;
        }
        log.push_front(LogEntry {
            count: 1,
            reason,
            context,
            object,
            username,
            ctime_ms: now,
            client_info: info,
        });
        log.truncate(LOG_MAX);
    }

    /// The newest `count` log entries.
    pub fn log_entries(&self, count: usize) -> Vec<LogEntry> {
        lock(&self.log).iter().take(count).cloned().collect()
    }

    /// ACL LOG RESET.
    pub fn reset_log(&self) {
        lock(&self.log).clear();
    }

    /// Every user as ACL LIST and the ACL file write them.
    pub fn list(&self) -> Vec<String> {
        self.read()
            .values()
            .map(|u| format!("user {} {}", u.name, u.describe()))
            .collect()
    }

    /// ACL SAVE: writes every user to `path` (through a temporary file
    /// renamed into place, so a crash never leaves half a file).
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let mut text = String::new();
        for line in self.list() {
            text.push_str(&line);
            text.push('\n');
        }
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(format!(".tmp-{}-{}", std::process::id(), now_ms()));
        let tmp = std::path::PathBuf::from(tmp);
        let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }

    /// ACL LOAD (and start-up): replaces every user with the file's, or,
    /// if any line is wrong, changes nothing and returns Redis's error
    /// text. A file without a default user gets a fresh one.
    pub fn load(&self, path: &Path) -> Result<(), String> {
        let shown = path.display();
        let text = std::fs::read(path)
            .map_err(|e| format!("Error loading ACLs, opening file '{shown}': {e}"))?;
        let mut users: BTreeMap<String, Arc<User>> = BTreeMap::new();
        let mut errors = String::new();
        for (i, line) in text.split(|&b| b == b'\n').enumerate() {
            let n = i + 1;
            let line = line.trim_ascii();
            if line.is_empty() {
                continue;
            }
            let argv: Vec<&[u8]> = line
                .split(|&b| b == b' ')
                .filter(|a| !a.is_empty())
                .collect();
            if argv.first() != Some(&&b"user"[..]) || argv.len() < 2 {
                let _ = write!(
                    errors,
                    "{shown}:{n} should start with user keyword followed by the username. "
                );
                continue;
            }
            let name = String::from_utf8_lossy(argv[1]).into_owned();
            if has_spaces(argv[1]) {
                let _ = write!(
                    errors,
                    "'{shown}:{n}: username '{name}' contains invalid characters. "
                );
                continue;
            }
            if users.contains_key(&name) {
                let _ = write!(
                    errors,
                    "WARNING: Duplicate user '{name}' found on line {n}. "
                );
                continue;
            }
            let mut user = User::new(&name);
            let mut syntax_error = false;
            let Ok(merged) = merge_selectors(&argv[2..]) else {
                let _ = write!(
                    errors,
                    "{shown}:{n}: Unmatched parenthesis in selector definition."
                );
                continue;
            };
            for op in &merged {
                let op = op.trim_ascii();
                if let Err(e) = user.apply(op) {
                    if e == RuleError::Unknown {
                        let _ = write!(
                            errors,
                            "{shown}:{n}: Error in applying operation '{}': {}. ",
                            String::from_utf8_lossy(op),
                            e.text()
                        );
                    } else if !syntax_error {
                        let _ = write!(errors, "{shown}:{n}: {}. ", e.text());
                        syntax_error = true;
                    }
                }
            }
            users.insert(name, Arc::new(user));
        }
        if !errors.is_empty() {
            errors.push_str(
                "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
            );
            return Err(errors);
        }
        users
            .entry("default".into())
            .or_insert_with(|| Arc::new(User::default_user()));
        self.replace(users);
        Ok(())
    }

    /// Checks a request of table row `row` for `user`.
    pub fn check_user(user: &User, row: usize, request: &[Bytes]) -> Result<(), Denied> {
        let first = user.root.check(row, request);
        if first.is_ok() || user.selectors.is_empty() {
            return first;
        }
        // Any selector may allow it. If none does, the error reported is
        // Redis's pick: the worst kind (command < key < channel), and of
        // that kind the one at the latest argument.
        let rank = |d: &Denied| match *d {
            Denied::Command(_) => (0, 0),
            Denied::Key(p) => (1, p),
            Denied::Channel(p) => (2, p),
        };
        let mut worst = first;
        for s in &user.selectors {
            let result = s.check(row, request);
            match (&result, &worst) {
                (Ok(()), _) => return Ok(()),
                (Err(d), Err(w)) if rank(d) > rank(w) => worst = result,
                _ => {}
            }
        }
        worst
    }
}

/// The full name of a command id (`config|get`), for NOPERM texts.
pub fn id_name(id: usize) -> &'static str {
    IDS.ids[id].fullname
}

/// Every command name in a category (subcommands as `cmd|sub`), for ACL
/// CAT; `None` for an unknown category.
pub fn category_commands(category: &str) -> Option<Vec<&'static str>> {
    let index = category_names()
        .iter()
        .position(|c| c.eq_ignore_ascii_case(category))?;
    Some(
        IDS.ids
            .iter()
            .filter(|i| i.categories & (1 << index) != 0)
            .map(|i| i.fullname)
            .collect(),
    )
}

/// Every category name, in Redis's order.
pub fn categories() -> &'static [&'static str] {
    category_names()
}

/// A connection's user, and what the check needs to know fast.
pub struct SessionAcl {
    /// The user, as of `version`.
    pub user: Arc<User>,
    /// The ACL version the user was taken at.
    version: u64,
    /// The user may run anything on anything.
    unrestricted: bool,
    /// Set while EXEC plans the queued commands (a refusal then has
    /// Redis's EXEC-time text and the `multi` context).
    pub in_exec: bool,
}

impl SessionAcl {
    /// A connection's start: the default user.
    pub fn default_user(shared: &Shared) -> SessionAcl {
        let version = shared.acl.version();
        let user = shared
            .acl
            .user("default")
            .unwrap_or_else(|| Arc::new(User::default_user()));
        SessionAcl {
            unrestricted: user.unrestricted(),
            user,
            version,
            in_exec: false,
        }
    }

    /// Logs in as `user`.
    pub fn switch(&mut self, shared: &Shared, user: Arc<User>, client: &ClientHandle) {
        self.version = shared.acl.version();
        self.unrestricted = user.unrestricted();
        *lock(&client.user) = user.name.clone();
        self.user = user;
    }

    /// Takes the user's current rules if the ACLs changed. A user that was
    /// deleted keeps no permission at all (its connections are closed by
    /// the deletion; this covers the commands already read).
    pub fn refresh(&mut self, shared: &Shared) {
        // Only EXEC's own planning is "in EXEC"; a command dispatched from
        // the connection never is, whatever an earlier one left behind.
        self.in_exec = false;
        let version = shared.acl.version();
        if version == self.version {
            return;
        }
        let user = shared.acl.user(&self.user.name).unwrap_or_else(|| {
            let mut gone = User::new(&self.user.name);
            let _ = gone.apply(b"resetkeys");
            Arc::new(gone)
        });
        self.unrestricted = user.unrestricted();
        self.user = user;
        self.version = version;
    }

    /// Whether a plain GET (`write` false) or SET (`write` true) of `key`,
    /// table row `row`, may take the connection's fast path, which skips
    /// `dispatch` and so the general check: the user is unrestricted, or
    /// may run the command and reach the key for that access (SET without
    /// options only writes its key, GET only reads it). Anything else, and
    /// any ACL change not yet taken, goes the general way, which refreshes
    /// the user and answers a refusal.
    pub fn fast_allowed(
        &self,
        shared: &Shared,
        row: Option<usize>,
        key: &[u8],
        write: bool,
    ) -> bool {
        if shared.acl.version() != self.version {
            return false;
        }
        if self.unrestricted {
            return true;
        }
        let Some(row) = row else { return false };
        std::iter::once(&self.user.root)
            .chain(&self.user.selectors)
            .any(|s| {
                (s.allcommands || s.bit(IDS.row_id[row]))
                    && (s.allkeys
                        || s.keys.iter().any(|k| {
                            (if write { k.write } else { k.read }) && glob_match(&k.pattern, key)
                        }))
            })
    }
}

/// The permission check of `dispatch`: passes unrestricted users at once;
/// otherwise checks the command, its keys and channels, and on a refusal
/// writes the ACL LOG entry and returns Redis's NOPERM error.
pub fn authorize(
    session: &crate::command::Session,
    row: usize,
    request: &[Bytes],
) -> Result<(), crate::error::CommandError> {
    if session.acl.unrestricted {
        return Ok(());
    }
    let Err(denied) = Acl::check_user(&session.acl.user, row, request) else {
        return Ok(());
    };
    let (reason, object, text) = match denied {
        Denied::Command(id) => (
            Reason::Command,
            id_name(id).to_string(),
            format!(
                "NOPERM this user has no permissions to run the '{}' command",
                id_name(id)
            ),
        ),
        Denied::Key(pos) => (
            Reason::Key,
            String::from_utf8_lossy(&request[pos]).into_owned(),
            "NOPERM this user has no permissions to access one of the keys used as arguments"
                .to_string(),
        ),
        Denied::Channel(pos) => (
            Reason::Channel,
            String::from_utf8_lossy(&request[pos]).into_owned(),
            "NOPERM this user has no permissions to access one of the channels used as arguments"
                .to_string(),
        ),
    };
    let context = if session.multi.is_some() || session.acl.in_exec {
        "multi"
    } else {
        "toplevel"
    };
    let text = if session.acl.in_exec {
        let reason = match denied {
            Denied::Command(_) => "no permission to execute the command or subcommand",
            Denied::Key(_) => "no permission to touch the specified keys",
            Denied::Channel(_) => "no permission to access one of the channels used as arguments",
        };
        format!("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}")
    } else {
        text
    };
    // CLIENT LIST's `cmd=` names the refused command, as in Redis.
    session.client.last_cmd.store(row, Ordering::Relaxed);
    session.shared.acl.log_denial(
        reason,
        context,
        object,
        session.acl.user.name.clone(),
        crate::command::session::client_line(&session.client, None, None),
    );
    Err(crate::error::CommandError::Raw(text))
}

/// Closes every connection logged in as one of `names`.
pub fn kill_clients_of(shared: &Shared, names: &dyn Fn(&str) -> bool) {
    for c in lock(&shared.clients).values() {
        if names(&lock(&c.user)) {
            c.killed.store(true, Ordering::SeqCst);
            c.kill_notify.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_sha256_hex() {
        assert_eq!(
            hash_password(b"foo"),
            "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"
        );
        assert!(same_in_constant_time(b"abc", b"abc"));
        assert!(!same_in_constant_time(b"abc", b"abd"));
        assert!(!same_in_constant_time(b"abc", b"ab"));
    }

    #[test]
    fn the_default_user_is_described_as_redis_does() {
        let u = User::default_user();
        assert_eq!(u.describe(), "on nopass ~* &* +@all");
        assert!(u.unrestricted());
        let n = User::new("x");
        assert_eq!(n.describe(), "off resetchannels -@all");
    }

    #[test]
    fn rules_set_and_clear_command_bits() {
        let mut u = User::new("x");
        for op in ["on", ">pw", "~k*", "%R~r*", "+get", "+config|get"] {
            u.apply(op.as_bytes()).unwrap();
        }
        assert_eq!(
            u.describe(),
            format!(
                "on #{} ~k* %R~r* resetchannels -@all +config|get +get",
                hash_password(b"pw")
            )
        );
        let get = crate::command::lookup_index(b"get").unwrap();
        let set = crate::command::lookup_index(b"set").unwrap();
        let req = |a: &[&str]| {
            a.iter()
                .map(|s| Bytes::from(s.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(Acl::check_user(&u, get, &req(&["get", "k1"])), Ok(()));
        assert_eq!(Acl::check_user(&u, get, &req(&["get", "r1"])), Ok(()));
        assert_eq!(
            Acl::check_user(&u, get, &req(&["get", "x"])),
            Err(Denied::Key(1))
        );
        assert_eq!(
            Acl::check_user(&u, set, &req(&["set", "k", "v"])),
            Err(Denied::Command(IDS.row_id[set]))
        );
        u.apply(b"+set").unwrap();
        assert_eq!(Acl::check_user(&u, set, &req(&["set", "k", "v"])), Ok(()));
        assert_eq!(
            Acl::check_user(&u, set, &req(&["set", "r", "v"])),
            Err(Denied::Key(1))
        );
        // %W~ allows a plain SET, not SET ... GET (which reads), nor GET.
        u.apply(b"%W~w*").unwrap();
        assert_eq!(Acl::check_user(&u, set, &req(&["set", "w1", "v"])), Ok(()));
        assert_eq!(
            Acl::check_user(&u, set, &req(&["set", "w1", "v", "GET"])),
            Err(Denied::Key(1))
        );
        assert_eq!(
            Acl::check_user(&u, get, &req(&["get", "w1"])),
            Err(Denied::Key(1))
        );
        assert_eq!(u.apply(b"+nosuch"), Err(RuleError::Unknown));
        assert_eq!(u.apply(b"+@nosuch"), Err(RuleError::Unknown));
        assert_eq!(u.apply(b"<nosuch"), Err(RuleError::NoSuchPassword));
        assert_eq!(u.apply(b"#abc"), Err(RuleError::BadHash));
        assert_eq!(u.apply(b"+config|get|x"), Err(RuleError::FirstArgOfSub));
        assert!(u.accepts(b"pw"));
        assert!(!u.accepts(b"no"));
        u.apply(b"off").unwrap();
        assert!(!u.accepts(b"pw"));
    }

    #[test]
    fn selectors_are_merged_and_any_one_allows() {
        let args: Vec<&[u8]> = vec![b"on", b"(+set", b"~b*)", b"(+get)", b"~a*"];
        assert_eq!(
            merge_selectors(&args).unwrap(),
            vec![
                b"on".to_vec(),
                b"(+set ~b*)".to_vec(),
                b"(+get)".to_vec(),
                b"~a*".to_vec()
            ]
        );
        assert_eq!(merge_selectors(&[b"x", b"(+get", b"~a"]), Err(1));
        let mut u = User::new("x");
        for op in ["+get", "~a*", "(+set ~b*)"] {
            u.apply(op.as_bytes()).unwrap();
        }
        let set = crate::command::lookup_index(b"set").unwrap();
        let req = |a: &[&str]| {
            a.iter()
                .map(|s| Bytes::from(s.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(Acl::check_user(&u, set, &req(&["set", "b1", "v"])), Ok(()));
        // The root refuses the command, the selector the key: the key wins.
        assert_eq!(
            Acl::check_user(&u, set, &req(&["set", "a1", "v"])),
            Err(Denied::Key(1))
        );
        assert_eq!(
            u.describe(),
            "off ~a* resetchannels -@all +get (~b* resetchannels -@all +set)"
        );
    }

    #[test]
    fn first_args_of_plain_commands() {
        let mut u = User::new("x");
        u.apply(b"+select|0").unwrap();
        let select = crate::command::lookup_index(b"select").unwrap();
        let req = |a: &[&str]| {
            a.iter()
                .map(|s| Bytes::from(s.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(Acl::check_user(&u, select, &req(&["select", "0"])), Ok(()));
        assert_eq!(
            Acl::check_user(&u, select, &req(&["select", "1"])),
            Err(Denied::Command(IDS.row_id[select]))
        );
        assert_eq!(u.describe(), "off resetchannels -@all +select|0");
    }

    #[test]
    fn movable_keys_are_found() {
        let spec = &TABLE[crate::command::lookup_index(b"zunionstore").unwrap()];
        let req: Vec<Bytes> = ["zunionstore", "d", "2", "a", "b", "WEIGHTS", "1", "2"]
            .iter()
            .map(|s| Bytes::from(s.to_string()))
            .collect();
        assert_eq!(
            key_positions(spec, &req),
            vec![(3, (true, false)), (4, (true, false)), (1, (false, true))]
        );
        let spec = &TABLE[crate::command::lookup_index(b"mset").unwrap()];
        let req: Vec<Bytes> = ["mset", "a", "1", "b", "2"]
            .iter()
            .map(|s| Bytes::from(s.to_string()))
            .collect();
        assert_eq!(
            key_positions(spec, &req),
            vec![(1, (false, true)), (3, (false, true))]
        );
        // MSET's keys are written, not read (OW update).
        let specs = IDS.row_meta[crate::command::lookup_index(b"mset").unwrap()]
            .unwrap()
            .key_specs;
        assert_eq!(key_access(specs, "mset", 3, &req), Some((false, true)));
    }
}
