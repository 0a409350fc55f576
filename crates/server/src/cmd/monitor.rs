//! MONITOR: every command the server runs, streamed to the clients that
//! asked. The feed, its format and the monitor mode's rules are in
//! [`crate::monitor`] and `crate::connection`'s modes; this is the
//! command that turns a connection into a monitor.

use crate::args::Args;
use crate::command::{LocalCommand, Plan, Session};
use crate::error::CommandError;
use crate::reply::Reply;

/// `MONITOR`
pub struct Monitor;

impl LocalCommand for Monitor {
    fn parse(_args: &mut Args, _s: &Session) -> Result<Self, CommandError> {
        Ok(Monitor)
    }
    fn apply(self, s: &mut Session) -> Result<Plan, CommandError> {
        // In MULTI, and inside EXEC (a client waiting for one reply per
        // command cannot switch to a stream).
        if s.multi.is_some() || s.acl.in_exec {
            return Err(CommandError::Other(
                "MONITOR isn't allowed for DENY BLOCKING client".into(),
            ));
        }
        if s.client.state.monitor.is_monitoring() {
            // Already monitoring: redis ignores it, without a reply.
            return Ok(Plan::Reply(Reply::Silent));
        }
        // Subscribed now: every command after this one's OK is shown.
        s.shared.monitors.start(&s.client.state.monitor);
        Ok(Plan::Reply(Reply::Ok))
    }
}

/// This family's rows of the command table (see [`crate::command::table`]).
#[rustfmt::skip]
pub(crate) fn commands() -> Vec<crate::command::Spec> {
    use crate::command::Spec;
    vec![
        Spec::local::<Monitor>("monitor"),
    ]
}
