//! Targets: the servers a run is aimed at.
//!
//! A single run may measure several servers one after another with the same
//! workload (that is how respite is compared with redis-server), so a target
//! is a name for the report plus an address. The syntax is deliberately
//! small: `[NAME=]HOST:PORT` or `[NAME=]unix:PATH` (a bare absolute path also
//! means a Unix socket). Without `--target`, `--host/--port/--socket` describe
//! the one target.

use std::fmt;
use std::path::PathBuf;

use crate::error::ArgError;

/// Where a server listens. Its `Display` form (`HOST:PORT` or `unix:PATH`)
/// is what reports show as the address and, without a name, as the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Addr {
    /// A TCP endpoint; the host may be a name, resolved when dialing.
    Tcp { host: String, port: u16 },
    /// A Unix domain socket.
    Unix(PathBuf),
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Addr::Tcp { host, port } => write!(f, "{host}:{port}"),
            Addr::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// One server to measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The label in tables, file names and JSON (the address when unnamed).
    pub name: String,
    /// Where to connect.
    pub addr: Addr,
}

impl Target {
    /// Parses `[NAME=]HOST:PORT`, `[NAME=]unix:PATH` or `[NAME=]/abs/path`.
    pub fn parse(s: &str) -> Result<Target, ArgError> {
        let bad = || ArgError::Target(s.to_string());
        let (name, addr) = match s.split_once('=') {
            Some((n, a)) if !n.is_empty() => (Some(n), a),
            Some(_) => return Err(bad()),
            None => (None, s),
        };
        let addr = if let Some(path) = addr.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(bad());
            }
            Addr::Unix(PathBuf::from(path))
        } else if addr.starts_with('/') {
            Addr::Unix(PathBuf::from(addr))
        } else {
            let (host, port) = addr.rsplit_once(':').ok_or_else(bad)?;
            let port = port.parse::<u16>().map_err(|_| bad())?;
            if host.is_empty() {
                return Err(bad());
            }
            Addr::Tcp {
                host: host.to_string(),
                port,
            }
        };
        let name = name.map_or_else(|| addr.to_string(), str::to_string);
        Ok(Target { name, addr })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_forms() {
        let t = Target::parse("redis=127.0.0.1:6379").unwrap();
        assert_eq!(t.name, "redis");
        assert_eq!(
            t.addr,
            Addr::Tcp {
                host: "127.0.0.1".into(),
                port: 6379
            }
        );
        let t = Target::parse("respite=unix:/tmp/r.sock").unwrap();
        assert_eq!(t.addr, Addr::Unix("/tmp/r.sock".into()));
        let t = Target::parse("127.0.0.1:7000").unwrap();
        assert_eq!(t.name, "127.0.0.1:7000");
        assert!(Target::parse("x=nohost").is_err());
        assert!(Target::parse("=1.2.3.4:5").is_err());
    }
}
