//! Protected mode: what keeps a server with no password from serving the
//! network.
//!
//! A fresh respited trusts every client: the default user needs no
//! password, and every client starts out as that user, with every
//! command. That is fine on 127.0.0.1, where only this host's programs can
//! connect, and dangerous as soon as someone runs `--bind 0.0.0.0` to reach
//! it from a container or another machine: anything that reaches the port
//! may then run FLUSHALL, SHUTDOWN or `CONFIG SET requirepass`. Redis's
//! answer is protected mode, on by default, and respite keeps it: while
//! the default user needs no password, a TCP client from any address but
//! 127.0.0.1 and ::1 is sent Redis's `-DENIED` explanation (naming
//! respite) and closed before it can send anything. Unix-socket clients
//! are local by construction and always admitted.
//!
//! Redis applies the rule to every listener; respite applies it to
//! listeners bound beyond loopback only, which is where it matters: a
//! listener bound to 127.0.0.1 can only be reached from this host, so a
//! client from 127.0.0.2 there is still a local program. What lifts the
//! protection is what Redis names: a password for the default user
//! (`requirepass`, or ACL SETUSER default >...), the default user turned
//! `off` (then no client is served without AUTH anyway), or
//! `protected_mode = false` in the file, `--protected-mode no`, or
//! `CONFIG SET protected-mode no` from a local client.
//!
//! Each refusal counts in INFO's `rejected_connections`, as in Redis, and
//! is logged at warning level, at most once a minute per source address,
//! so a scanner hammering the port cannot flood the journal.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::acl::Acl;
use crate::clients::Peer;
use crate::sync::lock;

/// Redis's DENIED reply, with respite in Redis's place.
pub const DENIED: &[u8] = b"-DENIED respite is running in protected mode because protected \
mode is enabled and no password is set for the default user. \
In this mode connections are only accepted from the loopback interface. \
If you want to connect from external computers to respite you \
may adopt one of the following solutions: \
1) Just disable protected mode sending the command \
'CONFIG SET protected-mode no' from the loopback interface \
by connecting to respite from the same host the server is \
running, however MAKE SURE respite is not publicly accessible \
from internet if you do so. Use protected_mode = false in the configuration file \
to make this change permanent. \
2) Alternatively you can just disable the protected mode by \
editing the respite configuration file, and setting protected_mode \
to false, and then restarting the server. \
3) If you started the server manually just for testing, restart \
it with the '--protected-mode no' option. \
4) Setup a an authentication password for the default user. \
NOTE: You only need to do one of the above things in order for \
the server to start accepting connections from the outside.\r\n";

/// How often one source's refusals are logged.
const LOG_EVERY: Duration = Duration::from_secs(60);

/// Sources remembered for the log's rate limit; past this the memory is
/// cleared (a flood from many addresses then logs a line per address per
/// clearing, which is still bounded).
const LOG_SOURCES: usize = 1024;

/// When each source's refusal was last logged.
#[derive(Default)]
pub struct RefusalLog(Mutex<HashMap<IpAddr, Instant>>);

impl RefusalLog {
    /// Whether a refusal of `ip` should be logged now (and notes it).
    fn should_log(&self, ip: IpAddr) -> bool {
        let mut seen = lock(&self.0);
        let now = Instant::now();
        if seen.len() >= LOG_SOURCES {
            seen.clear();
        }
        match seen.get(&ip) {
            Some(at) if now.duration_since(*at) < LOG_EVERY => false,
            _ => {
                seen.insert(ip, now);
                true
            }
        }
    }
}

/// Whether `ip` is the loopback address Redis calls local (127.0.0.1 or
/// ::1, also as an IPv4-mapped IPv6 address).
fn is_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4 == std::net::Ipv4Addr::LOCALHOST,
        IpAddr::V6(v6) => {
            v6 == std::net::Ipv6Addr::LOCALHOST
                || v6.to_ipv4_mapped() == Some(std::net::Ipv4Addr::LOCALHOST)
        }
    }
}

/// What protected mode reads of the server: whether it is on, the users
/// (does the default user let anyone in without a password?), the count
/// of refusals (INFO's `rejected_connections`) and the refusals' log.
pub struct Guard<'a> {
    /// `protected-mode`.
    pub enabled: bool,
    /// The ACL users.
    pub acl: &'a Acl,
    /// INFO's `rejected_connections`.
    pub rejected: &'a AtomicU64,
    /// When a refusal was last logged, per source address.
    pub log: &'a RefusalLog,
}

/// Whether a client that just connected from `peer`, on a listener that
/// is (`exposed`) or is not bound beyond loopback, must be refused. Logs
/// the refusal (rate-limited) and counts it.
pub fn refuses(guard: Guard<'_>, peer: &Peer, exposed: bool) -> bool {
    let Peer::Tcp(addr, _) = peer else {
        return false;
    };
    if !exposed
        || is_local(addr.ip())
        || !guard.enabled
        // The default user lets a client in without a password: what
        // protected mode guards against.
        || !guard.acl.default_user_open()
    {
        return false;
    }
    guard.rejected.fetch_add(1, Ordering::Relaxed);
    if guard.log.should_log(addr.ip()) {
        tracing::warn!(
            source = %addr.ip(),
            "protected mode: refused a client from {}: no password is set for the default user \
             (set requirepass, or protected_mode = false; this source is logged at most once a minute)",
            addr.ip()
        );
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_two_loopback_addresses_are_local() {
        assert!(is_local("127.0.0.1".parse().unwrap()));
        assert!(is_local("::1".parse().unwrap()));
        assert!(is_local("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!is_local("127.0.0.2".parse().unwrap()));
        assert!(!is_local("10.0.0.1".parse().unwrap()));
    }

    #[test]
    fn a_source_is_logged_once_a_minute() {
        let log = RefusalLog::default();
        let ip: IpAddr = "10.1.2.3".parse().unwrap();
        assert!(log.should_log(ip));
        assert!(!log.should_log(ip));
        assert!(log.should_log("10.1.2.4".parse().unwrap()));
    }
}
