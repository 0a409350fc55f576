//! The command table: every family's rows, gathered once at start-up and
//! sorted by name for lookups. The one place that names every family.

use super::Spec;
use crate::cmd::{
    acl, bitmaps, client, config, connection, dump, geo, hashes, hyperloglog, info, introspection,
    keys, lists, memory, migrate, monitor, pubsub, replication, scripting, server, sets, slowlog,
    sort, streams, strings, transactions, zsets,
};

/// The command table: every family's rows, sorted by name once at
/// start-up, with the rows the connection's fast paths use.
pub struct Table {
    specs: Vec<Spec>,
    /// GET's row, for the fast path.
    pub get: Option<usize>,
    /// SET's row, for the fast path.
    pub set: Option<usize>,
}

impl Table {
    fn build() -> Table {
        let mut specs: Vec<Spec> = [
            acl::commands(),
            bitmaps::commands(),
            client::commands(),
            config::commands(),
            connection::commands(),
            dump::commands(),
            geo::commands(),
            hashes::commands(),
            hyperloglog::commands(),
            info::commands(),
            introspection::commands(),
            keys::commands(),
            lists::commands(),
            memory::commands(),
            migrate::commands(),
            monitor::commands(),
            pubsub::commands(),
            replication::commands(),
            scripting::commands(),
            crate::cmd::functions::commands(),
            server::commands(),
            sets::commands(),
            slowlog::commands(),
            sort::commands(),
            streams::commands(),
            strings::commands(),
            transactions::commands(),
            zsets::commands(),
        ]
        .into_iter()
        .flatten()
        .collect();
        specs.sort_by_key(|s| s.name);
        let position = |name: &str| specs.iter().position(|s| s.name == name);
        let (get, set) = (position("get"), position("set"));
        Table { specs, get, set }
    }
}

impl std::ops::Deref for Table {
    type Target = [Spec];
    fn deref(&self) -> &[Spec] {
        &self.specs
    }
}

/// Every command respite knows, in alphabetical order.
pub static TABLE: std::sync::LazyLock<Table> = std::sync::LazyLock::new(Table::build);

/// Finds a command by name, case-insensitively.
pub fn lookup(name: &[u8]) -> Option<&'static Spec> {
    lookup_index(name).map(|i| &TABLE[i])
}

/// The command's row number in [`TABLE`]. Compares case-insensitively
/// without allocating: this runs for every request.
pub fn lookup_index(name: &[u8]) -> Option<usize> {
    TABLE
        .binary_search_by(|s| {
            let lower = name.iter().map(u8::to_ascii_lowercase);
            s.name.as_bytes().iter().copied().cmp(lower)
        })
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Access;

    #[test]
    fn table_is_sorted_unique_and_finds_every_name() {
        for pair in TABLE.windows(2) {
            assert!(
                pair[0].name < pair[1].name,
                "{} {}",
                pair[0].name,
                pair[1].name
            );
        }
        for (i, spec) in TABLE.iter().enumerate() {
            assert_eq!(lookup_index(spec.name.as_bytes()), Some(i));
            assert_eq!(lookup_index(spec.name.to_uppercase().as_bytes()), Some(i));
        }
        assert_eq!(TABLE.get.map(|i| TABLE[i].name), Some("get"));
        assert_eq!(TABLE.set.map(|i| TABLE[i].name), Some("set"));
    }

    #[test]
    fn read_and_write_flags_come_from_the_trait() {
        for spec in TABLE.iter() {
            let flags: Vec<&str> = spec.flags().collect();
            // MIGRATE is a write in redis's description (COMMAND INFO says
            // so), but runs from the connection: a read on the writer, the
            // transfer, then a delete on the writer (see cmd/migrate.rs).
            let from_connection = spec.name == "migrate";
            assert_eq!(
                flags.contains(&"write"),
                spec.access == Access::Write || from_connection,
                "{}",
                spec.name
            );
            // EVAL_RO and EVALSHA_RO run their script on the connection's
            // own plan (a local command) and refuse every write, so they
            // carry redis's `readonly` as an extra flag; no other row may.
            let read_only_script = matches!(spec.name, "eval_ro" | "evalsha_ro" | "fcall_ro");
            assert_eq!(
                flags.contains(&"readonly"),
                spec.access == Access::Read || read_only_script,
                "{}",
                spec.name
            );
            let extra: Vec<&str> = spec.extra_flags().collect();
            assert!(!extra.contains(&"write") || from_connection);
            assert!(!extra.contains(&"readonly") || read_only_script);
        }
    }

    /// docs/commands.md lists exactly the commands of the table, each once.
    #[test]
    fn commands_md_lists_exactly_the_table() {
        let doc = include_str!("../../../../docs/commands.md");
        let mut listed: Vec<String> = doc
            .lines()
            .filter_map(|line| {
                let mut cells = line.split('|').map(str::trim);
                cells.next()?;
                let name = cells.next()?;
                let syntax = cells.next()?;
                let is_command = !name.is_empty()
                    && name.chars().all(|c| c.is_ascii_uppercase() || c == '_')
                    && syntax.starts_with('`');
                is_command.then(|| name.to_ascii_lowercase())
            })
            .collect();
        let count = listed.len();
        listed.sort();
        listed.dedup();
        assert_eq!(listed.len(), count, "a command is listed twice");
        let table: Vec<String> = TABLE.iter().map(|s| s.name.to_string()).collect();
        assert_eq!(listed, table);
        let count_line = format!("respite implements the {} commands below", TABLE.len());
        assert!(
            doc.contains(&count_line),
            "docs/commands.md should say: {count_line}"
        );
    }
}
