//! The ACL check of a request, as `dispatch` makes it: the rules are
//! [`crate::acl`]'s, which knows commands only by redis's description;
//! this hands it the row's description, key range and kind, and turns a
//! refusal into the ACL LOG entry and redis's NOPERM text.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::{Session, TABLE};
use crate::acl::{id_name, Acl, Denied, Reason};
use crate::error::CommandError;

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
