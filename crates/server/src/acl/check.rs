//! The check: whether a user's rules allow a request ([`Request`]: the
//! command's description, its key range and arguments), which keys it
//! names and what access each needs.

use bytes::Bytes;
use respite_engine::glob::glob_match;

use crate::meta::{self, Meta};

use super::rules::{Selector, User, IDS};
use super::Acl;

/// A request as the check sees it: the command's description (a
/// container's own, for a container), the argument positions of its keys
/// (first, last, step; the command table's, which for a few containers
/// name the key after the subcommand), whether it writes (the access a
/// key needs where the key specs do not say), and the arguments, name
/// first.
#[derive(Clone, Copy)]
pub struct Request<'a> {
    /// The command's description.
    pub command: &'static Meta,
    /// First key, last key (negative: from the end), step; 0: none.
    pub keys: [i32; 3],
    /// Whether the command writes.
    pub writes: bool,
    /// The arguments, the command's name first.
    pub args: &'a [Bytes],
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
pub(super) fn key_access(
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
pub(super) fn key_positions(req: &Request<'_>) -> Vec<(usize, (bool, bool))> {
    let request = req.args;
    let argc = request.len();
    let writes = req.writes;
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
    match req.command.name {
        "lmpop" | "zmpop" | "sintercard" | "zdiff" | "zinter" | "zintercard" | "zunion" => {
            return numkeys(1, false)
        }
        "blmpop" | "bzmpop" => return numkeys(2, false),
        // Scripts' declared keys: read and written (redis's RW spec),
        // read only by the _RO forms.
        "eval" | "evalsha" | "fcall" | "eval_ro" | "evalsha_ro" | "fcall_ro" => {
            let access = if req.command.name.ends_with("_ro") {
                r
            } else {
                (true, true)
            };
            return numkeys(2, false)
                .into_iter()
                .map(|(i, _)| (i, access))
                .collect();
        }
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
        // The key specs' keyword searches: the first STORE and the first
        // STOREDIST after the radius name a key to write.
        "georadius" | "georadiusbymember" => {
            let from = if req.command.name == "georadius" {
                6
            } else {
                5
            };
            let mut out = vec![(1, r)];
            for word in [&b"STORE"[..], b"STOREDIST"] {
                let at = (from..argc).find(|&i| request[i].eq_ignore_ascii_case(word));
                if let Some(i) = at.filter(|i| i + 1 < argc) {
                    out.push((i + 1, w));
                }
            }
            return out;
        }
        _ => {}
    }
    let [first_key, last_key, step] = req.keys;
    if first_key <= 0 {
        return Vec::new();
    }
    let first = first_key as usize;
    let last = if last_key < 0 {
        argc as i64 + last_key as i64
    } else {
        last_key as i64
    };
    let step = step.max(1) as usize;
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
    fn check(&self, req: &Request<'_>) -> Result<(), Denied> {
        let request = req.args;
        let command = req.command;
        let id = id_of(req);
        if !self.allcommands && !self.bit(id) && !command.has_flag("no_auth") {
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
            let specs = command.key_specs;
            for (pos, guess) in key_positions(req) {
                // A shard channel sits where a key would (SPUBLISH,
                // SSUBSCRIBE): redis's `not_key` spec; the channel rules
                // below are its check.
                if specs.iter().any(|ks| {
                    ks.flags.contains(&"not_key")
                        && matches!(ks.begin_search, meta::BeginSearch::Index(i) if i as usize <= pos)
                }) {
                    continue;
                }
                let (read, write) = key_access(specs, command.name, pos, request).unwrap_or(guess);
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
            let (from, to, pattern) = match command.name {
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

impl Acl {
    /// Checks a request for `user`.
    pub fn check_user(user: &User, request: Request<'_>) -> Result<(), Denied> {
        let first = user.root.check(&request);
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
            let result = s.check(&request);
            match (&result, &worst) {
                (Ok(()), _) => return Ok(()),
                (Err(d), Err(w)) if rank(d) > rank(w) => worst = result,
                _ => {}
            }
        }
        worst
    }
}

/// The id a request runs as: its subcommand's, when the command is a
/// container and Redis has the subcommand.
fn id_of(request: &Request<'_>) -> usize {
    let command = request.command;
    match request.args.get(1) {
        Some(sub) if !command.subcommands().is_empty() => {
            meta::find(command.name.as_bytes(), Some(sub))
                .map_or(meta::position(command), meta::position)
        }
        _ => meta::position(command),
    }
}
