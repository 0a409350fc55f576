//! CLIENT: the connected clients, as tools see and steer them.
//!
//! `CLIENT LIST` and `CLIENT INFO` print redis's fields in redis's order,
//! with redis 7.2's `lib-name` and `lib-ver` (set by CLIENT SETINFO, which
//! client libraries send on connect) at the end. `CLIENT KILL` takes every
//! filter redis has. `CLIENT PAUSE` holds commands back (every command, or
//! only writes) until its deadline or CLIENT UNPAUSE, as redis does: a
//! paused command waits before it is planned, on its connection, after the
//! replies to what came before it have been sent. `CLIENT REPLY OFF|SKIP`
//! silences replies: the plan of a silenced command answers with
//! [`Reply::Silent`], which encodes to nothing, wherever it runs.
//!
//! What CLIENT keeps per client lives in the registry's entry
//! ([`crate::clients::ClientState`]); the server-wide pause is
//! [`crate::clients::Pause`]; applying REPLY OFF|SKIP to a plan is the
//! framework's (`command/silence.rs`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::common::help;
use crate::args::subcommand;
use crate::args::{upper, Args};
use crate::clients::{ClientHandle, REPLY_OFF, REPLY_ON, REPLY_SKIP};
use crate::command::{LocalCommand, Plan, Session};
use crate::error::CommandError;
use crate::reply::Reply;
use crate::state::Shared;
use crate::sync::lock;

/// Client types as CLIENT LIST and KILL take them; every respite client
/// is `normal`.
fn client_type(t: &[u8]) -> Result<ClientType, CommandError> {
    match upper(t).as_str() {
        "NORMAL" => Ok(ClientType::Normal),
        "PUBSUB" => Ok(ClientType::PubSub),
        "MASTER" => Ok(ClientType::Master),
        "REPLICA" | "SLAVE" => Ok(ClientType::Replica),
        _ => Err(CommandError::Other(format!(
            "Unknown client type '{}'",
            String::from_utf8_lossy(t)
        ))),
    }
}

/// The client type CLIENT LIST and CLIENT KILL select by (`TYPE`), as
/// redis's `getClientType`: the link to this replica's master is
/// `master`, a replica's connection (SYNC or PSYNC) `replica`, a client
/// subscribed to anything `pubsub`, every other one (MONITOR included)
/// `normal`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ClientType {
    /// No `TYPE`: every client.
    Any,
    /// `normal`.
    Normal,
    /// `pubsub`.
    PubSub,
    /// `master`.
    Master,
    /// `replica` (or `slave`).
    Replica,
}

impl ClientType {
    fn matches(self, c: &ClientHandle) -> bool {
        use crate::clients::{LINK_MASTER, LINK_REPLICA};
        let link = c.state.link.load(Ordering::Relaxed);
        let monitor = c.state.monitor.is_monitoring();
        let kind = if link == LINK_MASTER {
            ClientType::Master
        } else if link == LINK_REPLICA && !monitor {
            ClientType::Replica
        } else if c.pubsub.active() {
            ClientType::PubSub
        } else {
            ClientType::Normal
        };
        self == ClientType::Any || self == kind
    }
}

/// Which clients CLIENT KILL targets.
pub struct KillFilter {
    id: Option<u64>,
    addr: Option<String>,
    laddr: Option<String>,
    skipme: bool,
    /// `TYPE`.
    kind: ClientType,
    /// `USER`: only that user's clients.
    user: Option<String>,
    max_age: Option<u64>,
    /// The old one-argument form answers OK or an error, not a count.
    old_form: bool,
}

/// `CLIENT ID | INFO | LIST [TYPE type] [ID id ...] | SETNAME name |
/// GETNAME | SETINFO LIB-NAME|LIB-VER value | KILL ... | UNBLOCK id
/// [TIMEOUT|ERROR] | PAUSE timeout [WRITE|ALL] | UNPAUSE | REPLY
/// ON|OFF|SKIP | NO-EVICT ON|OFF | NO-TOUCH ON|OFF | GETREDIR | HELP`
pub enum Client {
    /// CLIENT ID
    Id,
    /// CLIENT SETNAME name
    SetName(Bytes),
    /// CLIENT GETNAME
    GetName,
    /// CLIENT LIST, optionally only these ids; `false` when a TYPE was
    /// given that no client here has; the bytes of this command's
    /// arguments (the caller's `argv-mem`).
    List(Option<Vec<u64>>, ClientType, u64),
    /// CLIENT INFO, with the bytes of its arguments.
    Info(u64),
    /// CLIENT KILL with its filters.
    Kill(KillFilter),
    /// CLIENT SETINFO: which attribute (true: lib-name), and the value.
    SetInfo(bool, String),
    /// CLIENT UNBLOCK id [TIMEOUT|ERROR]
    Unblock(u64, crate::blocking::Cancel),
    /// CLIENT PAUSE: for how long, and whether every command waits.
    Pause(Duration, bool),
    /// CLIENT UNPAUSE
    Unpause,
    /// CLIENT REPLY: the new mode.
    Reply(u8),
    /// CLIENT NO-EVICT on/off
    NoEvict(bool),
    /// CLIENT NO-TOUCH on/off
    NoTouch(bool),
    /// CLIENT GETREDIR (no tracking: -1)
    GetRedir,
    /// CLIENT TRACKING ON|OFF [options]: its arguments after TRACKING,
    /// checked when it runs (some checks depend on the client's state).
    Tracking(Vec<Bytes>),
    /// CLIENT CACHING YES|NO: its argument.
    Caching(Bytes),
    /// CLIENT TRACKINGINFO
    TrackingInfo,
    /// CLIENT HELP
    Help,
}

fn on_off(arg: &[u8]) -> Result<bool, CommandError> {
    match upper(arg).as_str() {
        "ON" => Ok(true),
        "OFF" => Ok(false),
        _ => Err(CommandError::Syntax),
    }
}

impl LocalCommand for Client {
    fn parse(args: &mut Args, s: &Session) -> Result<Self, CommandError> {
        // Names and arities were checked with the table's subcommand list.
        // "client" and every argument after it: the caller's `argv-mem`.
        let own_argv = (b"client".len() + args.bytes_left()) as u64;
        let sub = subcommand(args)?;
        Ok(match sub.name.as_str() {
            "ID" => Client::Id,
            "GETNAME" => Client::GetName,
            "INFO" => Client::Info(own_argv),
            "HELP" => Client::Help,
            "GETREDIR" => Client::GetRedir,
            "TRACKINGINFO" => Client::TrackingInfo,
            "CACHING" => Client::Caching(args.next()?),
            "TRACKING" => {
                let mut rest = Vec::new();
                while let Some(a) = args.next_opt() {
                    rest.push(a);
                }
                Client::Tracking(rest)
            }
            "UNPAUSE" => Client::Unpause,
            "SETNAME" => Client::SetName(args.next()?),
            "SETINFO" => {
                let attr = args.next()?;
                let value = args.next()?;
                let lib_name = match upper(&attr).as_str() {
                    "LIB-NAME" => true,
                    "LIB-VER" => false,
                    _ => {
                        return Err(CommandError::Other(format!(
                            "Unrecognized option '{}'",
                            String::from_utf8_lossy(&attr)
                        )))
                    }
                };
                if value.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
                    return Err(CommandError::Other(format!(
                        "{} cannot contain spaces, newlines or special characters.",
                        String::from_utf8_lossy(&attr)
                    )));
                }
                Client::SetInfo(lib_name, String::from_utf8_lossy(&value).into_owned())
            }
            "LIST" => {
                let mut ids = None;
                let mut kind = ClientType::Any;
                while args.remaining() > 0 {
                    match args.next_upper()?.as_str() {
                        "TYPE" if args.remaining() >= 1 => {
                            kind = client_type(&args.next()?)?;
                        }
                        "ID" if args.remaining() >= 1 => {
                            let mut v = Vec::new();
                            while args.remaining() > 0 {
                                let id = crate::args::parse_i64(&args.next()?)
                                    .filter(|i| *i > 0)
                                    .ok_or_else(|| {
                                    CommandError::Other("Invalid client ID".into())
                                })?;
                                v.push(id as u64);
                            }
                            ids = Some(v);
                        }
                        _ => return Err(CommandError::Syntax),
                    }
                }
                Client::List(ids, kind, own_argv)
            }
            "KILL" => Client::Kill(parse_kill(args, &s.shared)?),
            "UNBLOCK" => {
                let id = args.next()?;
                let why = match args.next_opt().map(|r| upper(&r)) {
                    None => crate::blocking::Cancel::Timeout,
                    Some(r) if r == "TIMEOUT" => crate::blocking::Cancel::Timeout,
                    Some(r) if r == "ERROR" => crate::blocking::Cancel::Error,
                    Some(_) => {
                        return Err(CommandError::Other(
                            "CLIENT UNBLOCK reason should be TIMEOUT or ERROR".into(),
                        ))
                    }
                };
                let id = crate::args::parse_i64(&id).ok_or(CommandError::NotInteger)?;
                Client::Unblock(id as u64, why)
            }
            "PAUSE" => {
                let ms = args.next()?;
                let all = match args.next_opt() {
                    None => true,
                    Some(m) => match upper(&m).as_str() {
                        "ALL" => true,
                        "WRITE" => false,
                        _ => {
                            return Err(CommandError::Other(
                                "CLIENT PAUSE mode must be WRITE or ALL".into(),
                            ))
                        }
                    },
                };
                if args.remaining() > 0 {
                    return Err(sub.syntax("CLIENT"));
                }
                let ms = crate::args::parse_i64(&ms).ok_or_else(|| {
                    CommandError::Other("timeout is not an integer or out of range".into())
                })?;
                if ms < 0 {
                    return Err(CommandError::Other("timeout is negative".into()));
                }
                Client::Pause(Duration::from_millis(ms as u64), all)
            }
            "REPLY" => Client::Reply(match args.next_upper()?.as_str() {
                "ON" => REPLY_ON,
                "OFF" => REPLY_OFF,
                "SKIP" => REPLY_SKIP,
                _ => return Err(CommandError::Syntax),
            }),
            "NO-EVICT" => Client::NoEvict(on_off(&args.next()?)?),
            "NO-TOUCH" => Client::NoTouch(on_off(&args.next()?)?),
            _ => return Err(sub.unknown("CLIENT")),
        })
    }

    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        let st = &s.client.state;
        let reply = match self {
            Client::Id => Reply::Int(s.client.id as i64),
            Client::SetName(name) => {
                super::connection::set_name(s, &name)?;
                Reply::Ok
            }
            Client::GetName => match lock(&s.client.name).clone() {
                Some(n) => Reply::bulk(n),
                None => Reply::Nil,
            },
            Client::Info(own) => Reply::Verbatim(format!(
                "{}\n",
                crate::command::track::client_line(&s.client, Some(&s.shared), Some(own))
            )),
            Client::List(ids, kind, own) => {
                let mut handles: Vec<_> = lock(&s.shared.clients).values().cloned().collect();
                handles.sort_by_key(|c| c.id);
                let mut out = String::new();
                for c in handles {
                    if ids.as_ref().is_some_and(|ids| !ids.contains(&c.id)) || !kind.matches(&c) {
                        continue;
                    }
                    let own = (c.id == s.client.id).then_some(own);
                    out.push_str(&crate::command::track::client_line(&c, Some(&s.shared), own));
                    out.push('\n');
                }
                Reply::Verbatim(out)
            }
            Client::SetInfo(lib_name, value) => {
                let slot = if lib_name { &st.lib_name } else { &st.lib_ver };
                *lock(slot) = Some(value).filter(|v| !v.is_empty());
                Reply::Ok
            }
            Client::Unblock(id, why) => {
                let target = lock(&s.shared.clients).get(&id).cloned();
                let ticket = target.and_then(|c| lock(&c.blocked).clone());
                Reply::Int(ticket.is_some_and(|t| t.unblock(why)) as i64)
            }
            Client::Kill(f) => return kill(s, &f).map(Plan::Reply),
            Client::Pause(d, all) => {
                let until = s.shared.pause.pause(Instant::now() + d, all);
                // Both kinds of pause stop the expiry of keys too, as in
                // redis: nothing in the file changes until the pause ends.
                s.shared.engine.pause_expiry(Some(until));
                Reply::Ok
            }
            Client::Unpause => {
                s.shared.pause.unpause();
                s.shared.engine.pause_expiry(None);
                Reply::Ok
            }
            Client::Reply(mode) => {
                st.set_reply_mode(mode);
                Reply::Ok
            }
            Client::NoEvict(on) => {
                st.no_evict.store(on, Ordering::Relaxed);
                Reply::Ok
            }
            Client::NoTouch(on) => {
                st.no_touch.store(on, Ordering::Relaxed);
                Reply::Ok
            }
            Client::GetRedir => {
                let t = s.client.tracking.settings();
                Reply::Int(if t.on { t.redirect as i64 } else { -1 })
            }
            Client::Tracking(args) => return tracking(s, args).map(|()| Plan::Reply(Reply::Ok)),
            Client::Caching(opt) => {
                let t = s.client.tracking.settings();
                if !t.on {
                    return Err(CommandError::Other(
                        "CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled".into(),
                    ));
                }
                match upper(&opt).as_str() {
                    "YES" if t.optin => s.client.tracking.set_caching(),
                    "YES" => {
                        return Err(CommandError::Other(
                            "CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.".into(),
                        ))
                    }
                    "NO" if t.optout => s.client.tracking.set_caching(),
                    "NO" => {
                        return Err(CommandError::Other(
                            "CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.".into(),
                        ))
                    }
                    _ => return Err(CommandError::Syntax),
                }
                Reply::Ok
            }
            Client::TrackingInfo => tracking_info(&s.client),
            Client::Help => help(
                "CLIENT",
                &[
                    "CACHING (YES|NO)",
                    "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
                    "GETREDIR",
                    "    Return the client ID we are redirecting to when tracking is enabled.",
                    "GETNAME",
                    "    Return the name of the current connection.",
                    "ID",
                    "    Return the ID of the current connection.",
                    "INFO",
                    "    Return information about the current client connection.",
                    "KILL <ip:port>",
                    "    Kill connection made from <ip:port>.",
                    "KILL <option> <value> [<option> <value> [...]]",
                    "    Kill connections. Options are:",
                    "    * ADDR (<ip:port>|<unixsocket>:0)",
                    "      Kill connections made from the specified address",
                    "    * LADDR (<ip:port>|<unixsocket>:0)",
                    "      Kill connections made to specified local address",
                    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
                    "      Kill connections by type.",
                    "    * USER <username>",
                    "      Kill connections authenticated by <username>.",
                    "    * SKIPME (YES|NO)",
                    "      Skip killing current connection (default: yes).",
                    "    * ID <client-id>",
                    "      Kill connections by client id.",
                    "    * MAXAGE <maxage>",
                    "      Kill connections older than the specified age.",
                    "LIST [options ...]",
                    "    Return information about client connections. Options:",
                    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
                    "      Return clients of specified type.",
                    "UNPAUSE",
                    "    Stop the current client pause, resuming traffic.",
                    "PAUSE <timeout> [WRITE|ALL]",
                    "    Suspend all, or just write, clients for <timeout> milliseconds.",
                    "REPLY (ON|OFF|SKIP)",
                    "    Control the replies sent to the current connection.",
                    "SETNAME <name>",
                    "    Assign the name <name> to the current connection.",
                    "SETINFO <option> <value>",
                    "    Set client meta attr. Options are:",
                    "    * LIB-NAME: the client lib name.",
                    "    * LIB-VER: the client lib version.",
                    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
                    "    Unblock the specified blocked client.",
                    "NO-EVICT (ON|OFF)",
                    "    Protect current client connection from eviction.",
                    "NO-TOUCH (ON|OFF)",
                    "    Will not touch LRU/LFU stats when this mode is on.",
                ],
            ),
        };
        Ok(Plan::Reply(reply))
    }
}

/// CLIENT TRACKING, checked in redis's order: the options as they come
/// (a REDIRECT to a client that does not exist is refused at once), then
/// ON or OFF, then the options against each other and the client's state.
fn tracking(s: &mut Session, args: Vec<Bytes>) -> Result<(), CommandError> {
    let err = |m: &str| Err(CommandError::Other(m.into()));
    let mut redirect: i64 = 0;
    let (mut bcast, mut optin, mut optout, mut noloop) = (false, false, false, false);
    let mut prefixes = Vec::new();
    let mut i = 1;
    while i < args.len() {
        let more = i + 1 < args.len();
        match upper(&args[i]).as_str() {
            "REDIRECT" if more => {
                i += 1;
                if redirect != 0 {
                    return err("A client can only redirect to a single other client");
                }
                redirect = crate::args::parse_i64(&args[i]).ok_or(CommandError::NotInteger)?;
                let exists = u64::try_from(redirect)
                    .is_ok_and(|id| lock(&s.shared.clients).contains_key(&id));
                if !exists {
                    return err("The client ID you want redirect to does not exist");
                }
            }
            "BCAST" => bcast = true,
            "OPTIN" => optin = true,
            "OPTOUT" => optout = true,
            "NOLOOP" => noloop = true,
            "PREFIX" if more => {
                i += 1;
                prefixes.push(args[i].clone());
            }
            _ => return Err(CommandError::Syntax),
        }
        i += 1;
    }
    let current = s.client.tracking.settings();
    match upper(&args[0]).as_str() {
        "ON" => {
            if !bcast && !prefixes.is_empty() {
                return err("PREFIX option requires BCAST mode to be enabled");
            }
            if current.on && current.bcast != bcast {
                return err("You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.");
            }
            if bcast && (optin || optout) {
                return err("OPTIN and OPTOUT are not compatible with BCAST");
            }
            if optin && optout {
                return err("You can't specify both OPTIN mode and OPTOUT mode");
            }
            if (optin && current.optout) || (optout && current.optin) {
                return err("You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.");
            }
            if bcast {
                if let Some(e) = crate::tracking::overlap_error(&prefixes, &current.prefixes) {
                    return Err(CommandError::Other(e));
                }
            }
            let options = crate::tracking::Settings {
                redirect: redirect as u64,
                bcast,
                optin,
                optout,
                noloop,
                prefixes: prefixes.into_iter().collect(),
                ..Default::default()
            };
            s.shared
                .tracking
                .enable(s.shared.engine.notifier(), s.client.as_ref(), options);
            // A tracker without REDIRECT gets its messages on its own
            // connection.
            if redirect == 0 {
                s.shared.pubsub.ensure_queue(&s.client);
            }
        }
        "OFF" => s
            .shared
            .tracking
            .disable(s.shared.engine.notifier(), s.client.as_ref()),
        _ => return Err(CommandError::Syntax),
    }
    Ok(())
}

/// CLIENT TRACKINGINFO: a map of `flags` (a set), `redirect`, `prefixes`.
fn tracking_info(c: &ClientHandle) -> Reply {
    let t = c.tracking.settings();
    let caching = c.tracking.caching();
    let mut flags = vec![Reply::bulk(if t.on { "on" } else { "off" })];
    if t.bcast {
        flags.push(Reply::bulk("bcast"));
    }
    if t.optin {
        flags.push(Reply::bulk("optin"));
        if caching {
            flags.push(Reply::bulk("caching-yes"));
        }
    }
    if t.optout {
        flags.push(Reply::bulk("optout"));
        if caching {
            flags.push(Reply::bulk("caching-no"));
        }
    }
    if t.noloop {
        flags.push(Reply::bulk("noloop"));
    }
    if t.broken {
        flags.push(Reply::bulk("broken_redirect"));
    }
    Reply::Map(vec![
        (Reply::bulk("flags"), Reply::Set(flags)),
        (
            Reply::bulk("redirect"),
            Reply::Int(if t.on { t.redirect as i64 } else { -1 }),
        ),
        (
            Reply::bulk("prefixes"),
            Reply::Array(t.prefixes.into_iter().map(Reply::Bulk).collect()),
        ),
    ])
}

fn parse_kill(args: &mut Args, shared: &Shared) -> Result<KillFilter, CommandError> {
    let mut f = KillFilter {
        id: None,
        addr: None,
        laddr: None,
        skipme: true,
        kind: ClientType::Any,
        user: None,
        max_age: None,
        old_form: false,
    };
    let n = args.remaining();
    if n == 1 {
        // The old form, which may kill the caller itself.
        f.addr = Some(String::from_utf8_lossy(&args.next()?).into_owned());
        f.old_form = true;
        f.skipme = false;
        return Ok(f);
    }
    if n % 2 == 1 {
        return Err(CommandError::Syntax);
    }
    while args.remaining() > 0 {
        let opt = args.next_upper()?;
        let val = args.next()?;
        let text = String::from_utf8_lossy(&val).into_owned();
        match opt.as_str() {
            "ID" => {
                let id = crate::args::parse_i64(&val)
                    .filter(|i| *i > 0)
                    .ok_or_else(|| {
                        CommandError::Other("client-id should be greater than 0".into())
                    })?;
                f.id = Some(id as u64);
            }
            "ADDR" => f.addr = Some(text),
            "LADDR" => f.laddr = Some(text),
            "SKIPME" => match text.to_ascii_lowercase().as_str() {
                "yes" => f.skipme = true,
                "no" => f.skipme = false,
                _ => return Err(CommandError::Syntax),
            },
            "TYPE" => f.kind = client_type(&val)?,
            "USER" => {
                if shared.acl.user(&text).is_none() {
                    return Err(CommandError::Other(format!("No such user '{text}'")));
                }
                f.user = Some(text);
            }
            // Redis 7.4's filter: clients at least this many seconds old.
            "MAXAGE" => {
                let age = crate::args::parse_i64(&val).ok_or_else(|| {
                    CommandError::Other("maxage is not an integer or out of range".into())
                })?;
                if age <= 0 {
                    return Err(CommandError::Other(
                        "maxage should be greater than 0".into(),
                    ));
                }
                f.max_age = Some(age as u64);
            }
            _ => return Err(CommandError::Syntax),
        }
    }
    Ok(f)
}

fn kill(s: &Session, f: &KillFilter) -> Result<Reply, CommandError> {
    let clients: Vec<Arc<ClientHandle>> = lock(&s.shared.clients).values().cloned().collect();
    let mut killed = 0;
    for c in clients {
        if f.skipme && c.id == s.client.id {
            continue;
        }
        if !f.kind.matches(&c)
            || f.user.as_ref().is_some_and(|u| *u != *lock(&c.user))
            || f.max_age
                .is_some_and(|age| c.created.elapsed().as_secs() < age)
            || f.id.is_some_and(|id| id != c.id)
            || f.addr.as_ref().is_some_and(|a| *a != c.addr())
            || f.laddr.as_ref().is_some_and(|a| *a != c.laddr())
        {
            continue;
        }
        c.killed.store(true, Ordering::SeqCst);
        c.kill_notify.notify_one();
        killed += 1;
    }
    if f.old_form {
        if killed == 0 {
            return Err(CommandError::Other("No such client".into()));
        }
        return Ok(Reply::Ok);
    }
    Ok(Reply::Int(killed))
}

/// This family's rows of the command table (see [`crate::command::table`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::local::<Client>("client")
            .with_subcommands("CLIENT", &["caching", "getname", "getredir", "help", "id", "info", "kill", "list", "no-evict", "no-touch", "pause", "reply", "setinfo", "setname", "tracking", "trackinginfo", "unblock", "unpause"]),
    ]
}
