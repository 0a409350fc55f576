//! CONFIG REWRITE: the live parameters written back under their TOML keys
//! and the stored ones into the file's `[redis]` table under their redis
//! names, the file edited line by line so its comments stay where they
//! were; the result re-read and checked before it replaces the old file.

use crate::state::Shared;

use super::live::value;
use super::table::{Access, Source, PARAMS, TOML_KEYS};

/// Where a `key = value` line's comment starts, if it has one (a `#`
/// outside quotes).
fn comment_start(line: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        match quote {
            Some('"') if escaped => escaped = false,
            Some('"') if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '#' => return Some(i),
            None => {}
        }
    }
    None
}

/// The key of a `key = value` line, if it is one.
fn line_key(line: &str) -> Option<&str> {
    let t = line.trim_start();
    if t.starts_with('#') || t.starts_with('[') {
        return None;
    }
    let (k, _) = t.split_once('=')?;
    Some(k.trim().trim_matches('"'))
}

/// Sets `key = value` in the lines of one table (`section`: `None` for the
/// top level), keeping the line's comment, or adds it at the table's end.
fn set_line(lines: &mut Vec<String>, section: Option<&str>, key: &str, value: &str) {
    let mut current: Option<String> = None;
    let mut table_end = None;
    let mut table_found = section.is_none();
    #[allow(clippy::needless_range_loop)] // the loop replaces lines[i]
    for i in 0..lines.len() {
        let t = lines[i].trim();
        if t.starts_with('[') {
            if current.as_deref() == section && table_found {
                table_end.get_or_insert(i);
            }
            current = Some(t.trim_matches(|c| c == '[' || c == ']').trim().to_string());
            if current.as_deref() == section {
                table_found = true;
                table_end = None;
            }
            continue;
        }
        if current.as_deref() == section && line_key(&lines[i]) == Some(key) {
            let comment = comment_start(&lines[i]).map(|at| lines[i][at..].to_string());
            let indent: String = lines[i].chars().take_while(|c| c.is_whitespace()).collect();
            lines[i] = match comment {
                Some(c) => format!("{indent}{key} = {value} {c}"),
                None => format!("{indent}{key} = {value}"),
            };
            return;
        }
    }
    let new = format!("{key} = {value}");
    if !table_found {
        if lines.last().is_some_and(|l| !l.trim().is_empty()) {
            lines.push(String::new());
        }
        lines.push(format!("[{}]", section.unwrap_or_default()));
        lines.push(new);
        return;
    }
    // The end of the table: before the next header, after its last
    // non-blank line.
    let mut at = table_end.unwrap_or(lines.len());
    if section.is_none() {
        // Top-level keys must come before the first table header.
        at = lines
            .iter()
            .position(|l| l.trim().starts_with('['))
            .unwrap_or(lines.len());
    }
    while at > 0 && lines[at - 1].trim().is_empty() {
        at -= 1;
    }
    lines.insert(at, new);
}

/// A TOML literal for a value (strings quoted, numbers as numbers).
fn toml_literal(v: &str, numeric: bool) -> String {
    if numeric && v.parse::<i64>().is_ok() {
        v.to_string()
    } else {
        toml::Value::String(v.to_string()).to_string()
    }
}

/// CONFIG REWRITE: the running settings into the configuration file,
/// comments kept.
pub(super) fn rewrite(sh: &Shared) -> Result<(), String> {
    let Some(path) = &sh.config.config_file else {
        return Err("The server is running without a config file".into());
    };
    let text = std::fs::read_to_string(path).map_err(|e| format!("Rewriting config file: {e}"))?;
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for (name, key) in TOML_KEYS {
        let v = value(sh, name);
        if *name == "requirepass" && v.is_empty() {
            // No password: the key goes (an empty one would mean a
            // password of "").
            lines.retain(|l| line_key(l) != Some(key) || l.trim_start().starts_with('#'));
            continue;
        }
        let literal = match *name {
            // A TOML boolean.
            "protected-mode" => (v == "yes").to_string(),
            "requirepass" | "appendfsync" | "client-output-buffer-limit" => toml_literal(&v, false),
            _ => toml_literal(&v, true),
        };
        set_line(&mut lines, None, key, &literal);
    }
    for p in PARAMS {
        if !matches!(p.source, Source::Stored) || p.access != Access::Mutable {
            continue;
        }
        let v = sh.params.get(p.name);
        let in_file = sh.config.redis.contains_key(p.name) || lines_have(&lines, "redis", p.name);
        if v != p.default || in_file {
            set_line(&mut lines, Some("redis"), p.name, &toml_literal(&v, false));
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    // The result must load: a rewrite never leaves a file respited refuses.
    let parsed: crate::config::Config =
        toml::from_str(&out).map_err(|e| format!("Rewriting config file: {}", e.message()))?;
    parsed
        .validate()
        .map_err(|e| format!("Rewriting config file: {e}"))?;
    let tmp = path.with_extension("rewrite.tmp");
    std::fs::write(&tmp, &out)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("Rewriting config file: {e}"))?;
    Ok(())
}

fn lines_have(lines: &[String], section: &str, key: &str) -> bool {
    let mut current = None;
    for l in lines {
        let t = l.trim();
        if t.starts_with('[') {
            current = Some(t.trim_matches(|c| c == '[' || c == ']').trim().to_string());
        } else if current.as_deref() == Some(section) && line_key(l) == Some(key) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrite_keeps_comments_and_places_keys() {
        let mut lines: Vec<String> =
            "# top\nport = 6379 # the port\nmax_batch = 10\n\n[other]\nx = 1\n"
                .lines()
                .map(str::to_string)
                .collect();
        set_line(&mut lines, None, "max_batch", "20");
        set_line(&mut lines, None, "maxclients", "5");
        set_line(&mut lines, Some("redis"), "hz", "\"20\"");
        set_line(&mut lines, Some("redis"), "hz", "\"30\"");
        set_line(&mut lines, None, "port", "7000");
        let text = lines.join("\n");
        assert_eq!(
            text,
            "# top\nport = 7000 # the port\nmax_batch = 20\nmaxclients = 5\n\n[other]\nx = 1\n\n[redis]\nhz = \"30\""
        );
    }
}
