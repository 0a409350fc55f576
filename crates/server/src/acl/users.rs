//! The users registry: every user, the ACL file, the ACL LOG and INFO's
//! counters, and each connection's view of its user ([`SessionAcl`]).

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use bytes::Bytes;
use respite_engine::glob::glob_match;

use crate::clients::{ClientHandle, Registry};
use crate::meta::{self, Meta};
use crate::sync::lock;

use super::rules::{has_spaces, merge_selectors, RuleError, User};

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
    pub fn default_user(acl: &Acl) -> SessionAcl {
        let version = acl.version();
        let user = acl
            .user("default")
            .unwrap_or_else(|| Arc::new(User::default_user()));
        SessionAcl {
            unrestricted: user.unrestricted(),
            user,
            version,
            in_exec: false,
        }
    }

    /// Whether the user may run anything on anything (the check passes
    /// at once).
    pub fn unrestricted(&self) -> bool {
        self.unrestricted
    }

    /// Back to the `default` user (RESET).
    pub fn log_out(&mut self, acl: &Acl, client: &ClientHandle) {
        *self = SessionAcl::default_user(acl);
        *lock(&client.user) = self.user.name.clone();
    }

    /// Logs in as `user`. This and [`SessionAcl::log_out`] are the only
    /// writers of the registry entry's user name (CLIENT LIST `user=`,
    /// CLIENT KILL USER), which always names the user whose rules the
    /// session holds.
    pub fn switch(&mut self, acl: &Acl, user: Arc<User>, client: &ClientHandle) {
        self.version = acl.version();
        self.unrestricted = user.unrestricted();
        *lock(&client.user) = user.name.clone();
        self.user = user;
    }

    /// Takes the user's current rules if the ACLs changed. A user that was
    /// deleted keeps no permission at all (its connections are closed by
    /// the deletion; this covers the commands already read).
    pub fn refresh(&mut self, acl: &Acl) {
        // Only EXEC's own planning is "in EXEC"; a command dispatched from
        // the connection never is, whatever an earlier one left behind.
        self.in_exec = false;
        let version = acl.version();
        if version == self.version {
            return;
        }
        let user = acl.user(&self.user.name).unwrap_or_else(|| {
            let mut gone = User::new(&self.user.name);
            let _ = gone.apply(b"resetkeys");
            Arc::new(gone)
        });
        self.unrestricted = user.unrestricted();
        self.user = user;
        self.version = version;
    }

    /// Whether a plain GET (`write` false) or SET (`write` true) of `key`,
    /// described by `command`, may take the connection's fast path, which skips
    /// `dispatch` and so the general check: the user is unrestricted, or
    /// may run the command and reach the key for that access (SET without
    /// options only writes its key, GET only reads it). Anything else, and
    /// any ACL change not yet taken, goes the general way, which refreshes
    /// the user and answers a refusal.
    pub fn fast_allowed(
        &self,
        acl: &Acl,
        command: Option<&'static Meta>,
        key: &[u8],
        write: bool,
    ) -> bool {
        if acl.version() != self.version {
            return false;
        }
        if self.unrestricted {
            return true;
        }
        let Some(command) = command else {
            return false;
        };
        std::iter::once(&self.user.root)
            .chain(&self.user.selectors)
            .any(|s| {
                (s.allcommands || s.bit(meta::position(command)))
                    && (s.allkeys
                        || s.keys.iter().any(|k| {
                            (if write { k.write } else { k.read }) && glob_match(&k.pattern, key)
                        }))
            })
    }
}

/// Closes every connection logged in as one of `names`.
pub fn kill_clients_of(clients: &Registry, names: &dyn Fn(&str) -> bool) {
    for c in lock(clients).values() {
        if names(&lock(&c.user)) {
            c.killed.store(true, Ordering::SeqCst);
            c.kill_notify.notify_one();
        }
    }
}
