//! What redis-server 7.0 says about each command: arity, flags, ACL
//! categories, key specs, tips, and the documentation of `COMMAND DOCS`.
//!
//! The data is redis's own. `scripts/command-meta.py` reads redis 7.0's
//! `src/commands/*.json` and writes `meta_data.rs`, doing on the way what
//! redis-server does to those files when it starts: it adds the ACL
//! categories a command's flags imply (`write` gives `@write`, `readonly`
//! gives `@read`, `admin` gives `@admin` and `@dangerous`, and a command
//! that is not `@fast` is `@slow`), and it derives the `movablekeys` flag
//! and the old first-key/last-key/step triple from the key specs. So
//! `COMMAND INFO` here answers what a redis-server would, and ACL rules
//! (`+@read`, `-@dangerous`) select the same commands.
//!
//! Three commands respite has came with redis 7.2 (CLIENT SETINFO, CLIENT
//! NO-TOUCH, WAITAOF); the script describes them from redis 7.2's JSON,
//! kept in `scripts/redis-7.2-commands/`.
//!
//! The table covers every command of redis-server, not only the ones respite
//! implements: the command table ([`crate::command::TABLE`]) says which commands
//! exist and how they run, this module only describes them. A unit test
//! checks that every row of the command table has a description here and
//! that the arity and flags the row is checked and planned with agree with
//! redis's.

// Generated code: long lines and redis's own spelling.
#[rustfmt::skip]
mod data {
    include!("meta_data.rs");
}

/// One command or subcommand as redis 7.0 describes it.
#[derive(Debug)]
pub struct Meta {
    /// Full lower-case name: `get`, or `client|list` for a subcommand.
    pub name: &'static str,
    /// The command (the container, for a subcommand), lower case.
    pub command: &'static str,
    /// The subcommand, lower case.
    pub sub: Option<&'static str>,
    /// Exact argument count including the name if positive, minimum if
    /// negative.
    pub arity: i32,
    /// COMMAND INFO flags, in redis's order.
    pub flags: &'static [&'static str],
    /// ACL categories without the `@`, in ACL CAT order, implicit ones
    /// included.
    pub categories: &'static [&'static str],
    /// The legacy key range: first key (0: none).
    pub first_key: i32,
    /// Last key (negative: counted from the end).
    pub last_key: i32,
    /// Step between keys.
    pub step: i32,
    /// Command tips (`nondeterministic_output`, `request_policy:...`).
    pub tips: &'static [&'static str],
    /// Key specs.
    pub key_specs: &'static [KeySpec],
    /// COMMAND DOCS summary.
    pub summary: Option<&'static str>,
    /// The version that added it.
    pub since: Option<&'static str>,
    /// COMMAND DOCS group (`string`, `sorted-set`, ...).
    pub group: &'static str,
    /// Time complexity.
    pub complexity: Option<&'static str>,
    /// `deprecated`, `syscmd`.
    pub doc_flags: &'static [&'static str],
    /// The version that deprecated it.
    pub deprecated_since: Option<&'static str>,
    /// What replaces it.
    pub replaced_by: Option<&'static str>,
    /// (version, change) pairs.
    pub history: &'static [(&'static str, &'static str)],
    /// The argument tree.
    pub arguments: &'static [Arg],
    /// The name of redis's own key-finding function, for commands whose key
    /// specs are not enough (SET's and BITFIELD's key flags depend on the
    /// arguments; SORT's STORE key is found only by parsing).
    pub get_keys_function: Option<&'static str>,
}

impl Meta {
    /// Whether COMMAND INFO lists the flag.
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.contains(&flag)
    }

    /// Whether the command is in the ACL category (name without `@`).
    pub fn in_category(&self, category: &str) -> bool {
        self.categories
            .iter()
            .any(|c| c.eq_ignore_ascii_case(category))
    }

    /// The subcommands of a container (empty for any other command), in
    /// name order.
    pub fn subcommands(&self) -> &'static [Meta] {
        if self.sub.is_some() {
            return &[];
        }
        let all = data::COMMANDS;
        let Some(at) = all.iter().position(|m| std::ptr::eq(m, self)) else {
            return &[];
        };
        let end = all[at + 1..]
            .iter()
            .position(|m| m.command != self.command)
            .map_or(all.len(), |n| at + 1 + n);
        &all[at + 1..end]
    }
}

/// One key spec (see redis's "Key specifications" documentation).
#[derive(Debug)]
pub struct KeySpec {
    /// Free-text notes.
    pub notes: Option<&'static str>,
    /// `RO`, `RW`, `OW`, `RM`, `access`, `update`, `insert`, `delete`,
    /// `not_key`, `incomplete`, `variable_flags`, in that order.
    pub flags: &'static [&'static str],
    /// Where the search for keys starts.
    pub begin_search: BeginSearch,
    /// How keys are found from there.
    pub find_keys: FindKeys,
}

/// A key spec's `begin_search`.
#[derive(Debug, Clone, Copy)]
pub enum BeginSearch {
    /// Not describable.
    Unknown,
    /// At a fixed argument index.
    Index(i32),
    /// After a keyword, searched from `startfrom` (negative: from the end).
    Keyword {
        /// The keyword.
        keyword: &'static str,
        /// Where the search starts.
        startfrom: i32,
    },
}

/// A key spec's `find_keys`.
#[derive(Debug, Clone, Copy)]
pub enum FindKeys {
    /// Not describable.
    Unknown,
    /// A range from the begin point.
    Range {
        /// Last key, relative to the begin point (negative: from the end).
        lastkey: i32,
        /// Step between keys.
        keystep: i32,
        /// With `lastkey` -1: take 1/limit of the remaining arguments.
        limit: i32,
    },
    /// A count argument followed by the keys.
    Keynum {
        /// The count's index, relative to the begin point.
        keynumidx: i32,
        /// The first key's index, relative to the begin point.
        firstkey: i32,
        /// Step between keys.
        keystep: i32,
    },
}

/// One argument of a command's documentation.
#[derive(Debug)]
pub struct Arg {
    /// Name, lower case.
    pub name: &'static str,
    /// `string`, `integer`, `double`, `key`, `pattern`, `unix-time`,
    /// `pure-token`, `oneof`, `block`.
    pub kind: &'static str,
    /// Its key spec (-1: not a key).
    pub key_spec_index: i32,
    /// The token that introduces it, upper case.
    pub token: Option<&'static str>,
    /// Summary.
    pub summary: Option<&'static str>,
    /// The version that added it.
    pub since: Option<&'static str>,
    /// The version that deprecated it.
    pub deprecated_since: Option<&'static str>,
    /// `optional`, `multiple`, `multiple_token`.
    pub flags: &'static [&'static str],
    /// Sub-arguments of a `oneof` or `block`.
    pub arguments: &'static [Arg],
}

/// Every command and subcommand of redis-server 7.0, sorted by command then
/// subcommand, each container just before its subcommands.
pub fn all() -> &'static [Meta] {
    data::COMMANDS
}

/// The position of `m` in [`all`] (every description is one of its
/// entries).
pub fn position(m: &'static Meta) -> usize {
    let base = data::COMMANDS.as_ptr() as usize;
    (m as *const Meta as usize - base) / std::mem::size_of::<Meta>()
}

/// redis 7.0's ACL categories (without `@`), in ACL CAT order.
pub fn all_categories() -> &'static [&'static str] {
    data::CATEGORIES
}

/// Compares a stored lower-case name with one as a client sent it.
fn cmp_name(stored: &str, asked: &[u8]) -> std::cmp::Ordering {
    stored
        .as_bytes()
        .iter()
        .copied()
        .cmp(asked.iter().map(u8::to_ascii_lowercase))
}

/// The description of a command, or of one of its subcommands; names are
/// matched case-insensitively, without allocating.
pub fn find(name: &[u8], sub: Option<&[u8]>) -> Option<&'static Meta> {
    data::COMMANDS
        .binary_search_by(|m| {
            cmp_name(m.command, name).then_with(|| match (m.sub, sub) {
                (None, None) => std::cmp::Ordering::Equal,
                (None, Some(_)) => std::cmp::Ordering::Less,
                (Some(_), None) => std::cmp::Ordering::Greater,
                (Some(s), Some(asked)) => cmp_name(s, asked),
            })
        })
        .ok()
        .map(|i| &data::COMMANDS[i])
}

/// A command by its full name as `COMMAND INFO` takes it: `get`, or
/// `client|list`.
pub fn find_full(fullname: &[u8]) -> Option<&'static Meta> {
    match fullname.iter().position(|&b| b == b'|') {
        Some(bar) => find(&fullname[..bar], Some(&fullname[bar + 1..])),
        None => find(fullname, None),
    }
}

/// The ACL categories of a command or subcommand (names without `@`, lower
/// case, in ACL CAT order, implicit ones included); empty for a name redis
/// 7.0 does not know.
pub fn categories(name: &str, sub: Option<&str>) -> &'static [&'static str] {
    find(name.as_bytes(), sub.map(str::as_bytes)).map_or(&[], |m| m.categories)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{Access, TABLE};

    #[test]
    fn sorted_for_binary_search() {
        for pair in all().windows(2) {
            let key = |m: &Meta| (m.command, m.sub.unwrap_or(""));
            assert!(key(&pair[0]) < key(&pair[1]), "{}", pair[1].name);
        }
        for m in all() {
            assert!(std::ptr::eq(
                find(m.command.as_bytes(), m.sub.map(str::as_bytes)).unwrap(),
                m
            ));
            assert!(std::ptr::eq(find_full(m.name.as_bytes()).unwrap(), m));
        }
        assert_eq!(find(b"GeT", None).map(|m| m.name), Some("get"));
        assert_eq!(
            find(b"CLIENT", Some(b"List")).map(|m| m.name),
            Some("client|list")
        );
        assert!(find(b"nosuch", None).is_none());
        assert!(find(b"get", Some(b"x")).is_none());
    }

    /// Spot checks against what redis-server 7.0 answers to COMMAND INFO
    /// (the differential test compares every row).
    #[test]
    fn implicit_categories_and_derived_fields() {
        assert_eq!(categories("get", None), ["read", "string", "fast"]);
        assert_eq!(categories("set", None), ["write", "string", "slow"]);
        assert_eq!(
            categories("blpop", None),
            ["write", "list", "slow", "blocking"]
        );
        assert_eq!(
            categories("client", Some("kill")),
            ["admin", "slow", "dangerous", "connection"]
        );
        assert_eq!(categories("client", None), ["slow"]);
        assert!(categories("nosuch", None).is_empty());
        assert_eq!(all_categories().len(), 21);
        assert_eq!(all_categories()[0], "keyspace");
        let zunionstore = find(b"zunionstore", None).unwrap();
        assert!(zunionstore.has_flag("movablekeys"));
        assert_eq!(
            (
                zunionstore.first_key,
                zunionstore.last_key,
                zunionstore.step
            ),
            (1, 1, 1)
        );
        let mset = find(b"mset", None).unwrap();
        assert_eq!((mset.first_key, mset.last_key, mset.step), (1, -1, 2));
        let client = find(b"client", None).unwrap();
        assert!(client.subcommands().iter().any(|m| m.name == "client|list"));
        assert!(client.subcommands().iter().all(|m| m.command == "client"));
        assert!(find(b"get", None).unwrap().subcommands().is_empty());
    }

    /// Where the flags of respite's command table deliberately differ from
    /// redis's description: (command, why).
    const DIFFERENCES: &[(&str, &str)] = &[
        (
            "object",
            "a container whose subcommands are all reads in redis, run as one read here, so its row says readonly where redis's container has no flags; COMMAND INFO shows redis's",
        ),
        (
            "migrate",
            "a write in redis, run here from the connection (a read on the writer, the transfer, a delete on the writer), so its row has no write flag",
        ),
        (
            "xinfo",
            "a container of reads, run as one read here, as OBJECT",
        ),
        (
            "xgroup",
            "a container of writes (HELP aside), run as one write here, so its row says write where redis's container has no flags",
        ),
    ];

    /// Every row of the command table has redis's description, and the
    /// arity it is checked with and the flags it is planned with agree with
    /// it (but for the differences listed above).
    #[test]
    fn every_table_row_has_metadata_that_agrees() {
        let mut problems = Vec::new();
        for spec in TABLE.iter() {
            let Some(meta) = find(spec.name.as_bytes(), None) else {
                problems.push(format!("{}: no metadata", spec.name));
                continue;
            };
            if meta.arity != spec.arity {
                problems.push(format!(
                    "{}: arity {} here, {} in redis",
                    spec.name, spec.arity, meta.arity
                ));
            }
            let ours: Vec<&str> = spec.flags().collect();
            let theirs: Vec<&str> = meta.flags.to_vec();
            let mut a = ours.clone();
            let mut b = theirs.clone();
            a.sort_unstable();
            b.sort_unstable();
            let intended = DIFFERENCES.iter().any(|(name, _)| *name == spec.name);
            if a != b && !intended {
                problems.push(format!(
                    "{}: flags {ours:?} here, {theirs:?} in redis",
                    spec.name
                ));
            }
            let writes = meta.has_flag("write");
            if writes != (spec.access == Access::Write) && spec.access != Access::Local && !intended
            {
                problems.push(format!("{}: write flag disagrees", spec.name));
            }
            if let Some((_, subs)) = spec.subcommands {
                for sub in subs {
                    if find(spec.name.as_bytes(), Some(sub.as_bytes())).is_none() {
                        problems.push(format!("{}|{sub}: no metadata", spec.name));
                    }
                }
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}
