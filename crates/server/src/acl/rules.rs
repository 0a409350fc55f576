//! A user's rules: the command ids (every command and subcommand redis
//! 7.0 describes), key patterns, channel patterns and selectors; parsing
//! them from `ACL SETUSER` words and describing them back as `ACL LIST`
//! writes them.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::LazyLock;

use sha2::{Digest, Sha256};

use crate::meta;

/// Redis 7.0's ACL categories, in the order ACL CAT lists them (and the
/// description of a user's rules tries them).
pub(super) fn category_names() -> &'static [&'static str] {
    meta::all_categories()
}

/// One command id.
pub(super) struct IdInfo {
    /// `get`, `config|get`.
    pub(super) fullname: &'static str,
    /// Whether this is a subcommand.
    pub(super) is_sub: bool,
    /// The subcommands' ids, for a container.
    pub(super) subs: Vec<usize>,
    /// A bit per category of [`category_names`].
    pub(super) categories: u32,
}

/// Every command id: one per command and subcommand redis-server 7.0 has
/// ([`crate::meta`], in its order: each container just before its
/// subcommands). Rules may name any Redis command, as on redis-server, and
/// the description of a user's rules weighs categories over the same
/// commands redis-server does, so `ACL LIST` reads the same.
pub(super) struct Ids {
    pub(super) ids: Vec<IdInfo>,
}

pub(super) static IDS: LazyLock<Ids> = LazyLock::new(|| {
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
                ids[meta::position(parent)].subs.push(i);
            }
        }
    }
    Ids { ids }
});

impl Ids {
    pub(super) fn words(&self) -> usize {
        self.ids.len().div_ceil(64)
    }

    /// The id of `name` or `name|sub`, case-insensitively.
    pub(super) fn lookup(&self, name: &str) -> Option<usize> {
        meta::find_full(name.as_bytes()).map(meta::position)
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
pub(super) fn same_in_constant_time(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// A key pattern with the access it grants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct KeyPattern {
    pub(super) pattern: Vec<u8>,
    pub(super) read: bool,
    pub(super) write: bool,
}

impl KeyPattern {
    pub(super) fn describe(&self, out: &mut String) {
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
pub(super) struct Selector {
    /// Redis's ALLCOMMANDS flag: every bit set, cleared by any `-`.
    pub(super) allcommands: bool,
    /// Redis's reserved "future commands" bit: set by `+@all`, cleared
    /// only by `-@all`; decides whether the description starts from
    /// `+@all` or `-@all`.
    pub(super) future: bool,
    pub(super) bits: Vec<u64>,
    /// Per command id: first arguments allowed although the bit is clear.
    pub(super) firstargs: BTreeMap<usize, Vec<String>>,
    pub(super) allkeys: bool,
    pub(super) keys: Vec<KeyPattern>,
    pub(super) allchannels: bool,
    pub(super) channels: Vec<Vec<u8>>,
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

pub(super) fn has_spaces(s: &[u8]) -> bool {
    s.iter().any(|&c| c.is_ascii_whitespace() || c == 0)
}

impl Selector {
    pub(super) fn empty() -> Selector {
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

    pub(super) fn bit(&self, id: usize) -> bool {
        self.bits[id / 64] & (1 << (id % 64)) != 0
    }

    pub(super) fn set_bit(&mut self, id: usize, on: bool) {
        if on {
            self.bits[id / 64] |= 1 << (id % 64);
        } else {
            self.bits[id / 64] &= !(1 << (id % 64));
            self.allcommands = false;
        }
    }

    /// Allows or blocks a command and, for a container, its subcommands.
    pub(super) fn change(&mut self, id: usize, on: bool) {
        self.set_bit(id, on);
        self.firstargs.remove(&id);
        for &sub in &IDS.ids[id].subs {
            self.set_bit(sub, on);
        }
    }

    pub(super) fn category(&mut self, name: &str, on: bool) -> Result<(), RuleError> {
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

    pub(super) fn all(&mut self, on: bool) {
        let fill = if on { u64::MAX } else { 0 };
        self.bits.iter_mut().for_each(|w| *w = fill);
        self.allcommands = on;
        self.future = on;
        self.firstargs.clear();
    }

    /// Applies one selector rule (Redis's `ACLSetSelector`).
    pub(super) fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
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

    pub(super) fn apply_pattern_or_command(
        &mut self,
        op: &[u8],
        text: &str,
    ) -> Result<(), RuleError> {
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
    pub(super) fn count_category(&self, flag: u32) -> (usize, usize) {
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
    pub(super) fn describe_commands(&self) -> String {
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

    pub(super) fn describe_single(&self, id: usize, fake: &mut Selector, rules: &mut String) {
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
    pub(super) fn describe_keys(&self) -> String {
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
    pub(super) fn describe_channels(&self) -> String {
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
    pub(super) fn describe(&self) -> String {
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
pub(super) enum Payload {
    Unset,
    Skip,
    Sanitize,
}

/// One ACL user.
#[derive(Clone, Debug)]
pub struct User {
    pub(super) name: String,
    pub(super) enabled: bool,
    pub(super) nopass: bool,
    pub(super) sanitize: Payload,
    /// SHA-256 hashes, lower-case hex, in the order they were added.
    pub(super) passwords: Vec<String>,
    pub(super) root: Selector,
    /// Further selectors (`(...)` rules): a command runs if the root or
    /// any of these allows it.
    pub(super) selectors: Vec<Selector>,
}

impl User {
    /// A new user as Redis creates one: off, no password, no permissions.
    pub(super) fn new(name: &str) -> User {
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
    pub(super) fn default_user() -> User {
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
    pub(super) fn flags(&self) -> Vec<&'static str> {
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
    pub(super) fn accepts(&self, password: &[u8]) -> bool {
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
pub(super) fn merge_selectors(args: &[&[u8]]) -> Result<Vec<Vec<u8>>, usize> {
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

pub(super) fn valid_hash(h: &[u8]) -> Result<String, RuleError> {
    if h.len() != 64
        || !h
            .iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
    {
        return Err(RuleError::BadHash);
    }
    Ok(String::from_utf8_lossy(h).into_owned())
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
