//! `client-output-buffer-limit`: a class's limit, its parsing and its
//! printing as redis-server does them, and the normal class's limit as the
//! connection loops read it. A leaf: the TOML configuration, CONFIG and
//! the connections' output all read it, and it reads none of them.

use std::sync::atomic::{AtomicU64, Ordering};

/// One class's `client-output-buffer-limit`: bytes and seconds, 0 for no
/// limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClassLimit {
    /// Close the client as soon as its pending output is over this.
    pub hard: u64,
    /// Close the client when its pending output stays over this ...
    pub soft: u64,
    /// ... for this many seconds.
    pub soft_seconds: u64,
}

/// The classes Redis names, in the order CONFIG GET prints them.
pub const CLASSES: [&str; 3] = ["normal", "slave", "pubsub"];

/// `client-output-buffer-limit` as Redis parses it: one or more
/// `<class> <hard> <soft> <soft seconds>` groups, sizes with Redis's memory
/// units (`32mb`), class `replica` as another name of `slave`.
pub fn parse_limits(text: &str, current: [ClassLimit; 3]) -> Result<[ClassLimit; 3], &'static str> {
    let words: Vec<&str> = text.split_whitespace().collect();
    if !words.len().is_multiple_of(4) {
        return Err("Wrong number of arguments in buffer limit configuration.");
    }
    let mut limits = current;
    for group in words.chunks(4) {
        let class = match group[0].to_ascii_lowercase().as_str() {
            "normal" => 0,
            "slave" | "replica" => 1,
            "pubsub" => 2,
            _ => return Err("Invalid client class specified in buffer limit configuration."),
        };
        let memory = |s: &str| parse_memory(s);
        let (Some(hard), Some(soft)) = (memory(group[1]), memory(group[2])) else {
            return Err(
                "Error in hard, soft or soft_seconds setting in buffer limit configuration.",
            );
        };
        let Ok(soft_seconds) = group[3].parse::<u64>() else {
            return Err(
                "Error in hard, soft or soft_seconds setting in buffer limit configuration.",
            );
        };
        limits[class] = ClassLimit {
            hard,
            soft,
            soft_seconds,
        };
    }
    Ok(limits)
}

/// The limits as CONFIG GET prints them (`normal 0 0 0 slave ...`).
pub fn format_limits(limits: &[ClassLimit; 3]) -> String {
    CLASSES
        .iter()
        .zip(limits)
        .map(|(class, l)| format!("{class} {} {} {}", l.hard, l.soft, l.soft_seconds))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Redis's defaults: no limit for normal clients, 256mb/64mb/60 for
/// replicas, 32mb/8mb/60 for pub/sub.
pub const DEFAULT_LIMITS: &str =
    "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60";

/// The normal class's limit, as the connection loops read it: atomics, so
/// CONFIG SET takes effect on the next write of every client.
#[derive(Debug, Default)]
pub struct NormalLimit {
    hard: AtomicU64,
    soft: AtomicU64,
    soft_seconds: AtomicU64,
}

impl NormalLimit {
    /// Sets the limit.
    pub fn store(&self, l: ClassLimit) {
        self.hard.store(l.hard, Ordering::Relaxed);
        self.soft.store(l.soft, Ordering::Relaxed);
        self.soft_seconds.store(l.soft_seconds, Ordering::Relaxed);
    }

    /// The limit in force.
    pub fn load(&self) -> ClassLimit {
        ClassLimit {
            hard: self.hard.load(Ordering::Relaxed),
            soft: self.soft.load(Ordering::Relaxed),
            soft_seconds: self.soft_seconds.load(Ordering::Relaxed),
        }
    }
}

/// Parses a size with redis's memory units (`1gb`, `512mb`, `100k`), as
/// its `memtoull`.
pub fn parse_memory(text: &str) -> Option<u64> {
    let t = text.to_ascii_lowercase();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    n.checked_mul(mul)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_as_redis() {
        let defaults = parse_limits(DEFAULT_LIMITS, [ClassLimit::default(); 3]).unwrap();
        assert_eq!(format_limits(&defaults), DEFAULT_LIMITS);
        let set = parse_limits("normal 10mb 1mb 5 replica 0 0 0", defaults).unwrap();
        assert_eq!(
            set[0],
            ClassLimit {
                hard: 10 << 20,
                soft: 1 << 20,
                soft_seconds: 5
            }
        );
        assert_eq!(set[1], ClassLimit::default());
        assert_eq!(set[2], defaults[2]);
        assert!(parse_limits("normal 1 2", defaults).is_err());
        assert!(parse_limits("master 1 2 3", defaults).is_err());
        assert!(parse_limits("normal x 2 3", defaults).is_err());
        assert!(parse_limits("normal 1 2 -3", defaults).is_err());
    }
}
