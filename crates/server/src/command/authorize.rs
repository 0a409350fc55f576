//! The ACL check of a request, as `dispatch` makes it: the rules are
//! [`crate::acl`]'s, which knows commands only by redis's description;
//! this hands it the row's description, key range and kind, and turns a
//! refusal into the ACL LOG entry and redis's NOPERM text.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::{Session, TABLE};
use crate::acl::{id_name, Acl, Denied, Reason, User};
use crate::error::CommandError;
use crate::state::Shared;

/// The permission check of `dispatch`: passes unrestricted users at once;
/// otherwise checks the command, its keys and channels, and on a refusal
/// writes the ACL LOG entry and returns Redis's NOPERM error.
pub fn authorize(session: &Session, row: usize, request: &[Bytes]) -> Result<(), CommandError> {
    if session.acl.unrestricted() {
        return Ok(());
    }
    let Err(denied) = Acl::check_user(&session.acl.user, TABLE[row].acl_request(request)) else {
        return Ok(());
    };
    let (reason, object, text) = match denied {
        Denied::Command(id) => (
            Reason::Command,
            id_name(id).to_string(),
            format!(
                "NOPERM this user has no permissions to run the '{}' command",
                id_name(id)
            ),
        ),
        Denied::Key(pos) => (
            Reason::Key,
            String::from_utf8_lossy(&request[pos]).into_owned(),
            "NOPERM this user has no permissions to access one of the keys used as arguments"
                .to_string(),
        ),
        Denied::Channel(pos) => (
            Reason::Channel,
            String::from_utf8_lossy(&request[pos]).into_owned(),
            "NOPERM this user has no permissions to access one of the channels used as arguments"
                .to_string(),
        ),
    };
    let context = if session.multi.is_some() || session.acl.in_exec {
        "multi"
    } else {
        "toplevel"
    };
    let text = if session.acl.in_exec {
        let reason = match denied {
            Denied::Command(_) => "no permission to execute the command or subcommand",
            Denied::Key(_) => "no permission to touch the specified keys",
            Denied::Channel(_) => "no permission to access one of the channels used as arguments",
        };
        format!("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}")
    } else {
        text
    };
    // CLIENT LIST's `cmd=` names the refused command, as in Redis.
    session.client.last_cmd.store(row, Ordering::Relaxed);
    session.shared.acl.log_denial(
        reason,
        context,
        object,
        session.acl.user.name().to_string(),
        super::track::client_line(&session.client, None, None),
    );
    Err(CommandError::Raw(text))
}

/// The ACL check of a script's `redis.call`s and `redis.acl_check_cmd`:
/// the calling client's user as it was when the script was called, as
/// redis runs a script's commands as its caller's user.
pub struct ScriptAcl {
    user: std::sync::Arc<User>,
    shared: std::sync::Arc<Shared>,
    /// The caller's CLIENT LIST line, for the ACL LOG's `client-info`.
    client: String,
}

impl ScriptAcl {
    /// The check for a script `session` calls: `None` for a user who may
    /// run anything on anything.
    pub fn of(session: &Session) -> Option<ScriptAcl> {
        if session.acl.unrestricted() {
            return None;
        }
        Some(ScriptAcl {
            user: session.acl.user.clone(),
            shared: session.shared.clone(),
            client: super::track::client_line(&session.client, None, None),
        })
    }

    /// `redis.call`'s check (redis's `scriptVerifyACL`): a refusal is
    /// logged in the ACL LOG with the context `lua`, and is redis's
    /// "The user executing the script ..." error.
    pub fn check(&self, row: usize, request: &[Bytes]) -> Result<(), CommandError> {
        let Err(denied) = Acl::check_user(&self.user, TABLE[row].acl_request(request)) else {
            return Ok(());
        };
        let (reason, object, text) = match denied {
            Denied::Command(id) => (
                Reason::Command,
                id_name(id).to_string(),
                "can't run this command or subcommand",
            ),
            Denied::Key(pos) => (
                Reason::Key,
                String::from_utf8_lossy(&request[pos]).into_owned(),
                "can't access at least one of the keys mentioned in the command arguments",
            ),
            Denied::Channel(pos) => (
                Reason::Channel,
                String::from_utf8_lossy(&request[pos]).into_owned(),
                "can't publish to the channel mentioned in the command",
            ),
        };
        self.shared.acl.log_denial(
            reason,
            "lua",
            object,
            self.user.name().to_string(),
            self.client.clone(),
        );
        Err(CommandError::Other(format!(
            "The user executing the script {text}"
        )))
    }

    /// `redis.acl_check_cmd`: whether the user may run `request` (row
    /// `row`), logging nothing.
    pub fn allows(&self, row: usize, request: &[Bytes]) -> bool {
        Acl::check_user(&self.user, TABLE[row].acl_request(request)).is_ok()
    }
}
