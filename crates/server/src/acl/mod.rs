//! Access control lists: users, what each may run and touch, and the check
//! every command passes.
//!
//! This is Redis 7.0's model, so that `ACL SETUSER` lines, `ACL LIST`
//! output and `users.acl` files move between redis-server and respite
//! unchanged. A user has a name, is `on` or `off` (an `off` user cannot
//! log in; connections already logged in keep working, as in Redis), and
//! has any number of passwords, kept only as SHA-256 hashes (`nopass`
//! accepts any password). Its permissions are
//!
//! - commands: a bitmap with one bit per command id (below), set and
//!   cleared by `+cmd`, `-cmd`, `+@category`, `-@category`, `allcommands`
//!   (`+@all`) and `nocommands` (`-@all`); `+cmd|sub` allows one
//!   subcommand of a container (CONFIG GET), or, for a command without
//!   subcommands, only calls whose first argument is `sub` (Redis's
//!   deprecated first-arg rule, kept for compatibility);
//! - keys: glob patterns (`~pattern`, `%R~` for reads only, `%W~` for
//!   writes only, `allkeys`/`~*`, `resetkeys`);
//! - pub/sub channels: `&pattern`, `allchannels`/`&*`, `resetchannels`,
//!   in place for when pub/sub lands (no command here names a channel yet).
//!
//! The default user exists from the start with every permission and
//! `nopass`: a fresh server behaves as before ACLs existed. `requirepass`
//! is, as in Redis, nothing but the default user's password.
//!
//! # Command ids
//!
//! Every command and subcommand redis-server 7.0 has ([`crate::meta`],
//! whose order puts each container just before its subcommands) has an id,
//! its position there. So rules may name any Redis command, as on
//! redis-server, categories select the same commands, and the description
//! of a user's rules (ACL LIST), which weighs categories over the whole
//! command set, reads as redis-server's. The check is handed a request
//! with its command's description ([`Request`]), so it indexes the bitmap
//! straight from it; a container's request uses its subcommand's id. This
//! module knows commands only by that description, never by the command
//! table.
//!
//! # The cost of the check
//!
//! A connection keeps the user it logged in as (`SessionAcl`), with one
//! flag that says whether the user may run anything on any key. For such a
//! user (the default user, unless restricted) the check is that flag and
//! one relaxed atomic load that notices any ACL change since the user was
//! taken. A restricted user costs a bit test; keys are extracted and
//! matched only when the user has key patterns rather than `allkeys`. The
//! connection's fast paths for plain GET and SET (which skip the command
//! table) make the same decision inline (`SessionAcl::fast_allowed`): a
//! user allowed the command and the key keeps them; a refusal, or an ACL
//! change not yet taken, sends the request the general way.
//!
//! Which keys a request names comes from the command's key range,
//! and for the commands whose keys move (a `numkeys` argument, SORT's
//! STORE) from their arguments; what access each key needs (`%R~` allows
//! reads, `%W~` writes) from Redis's key specs in `cmd::meta`, as Redis
//! decides it (SET reads its key only with GET). Where no key spec covers
//! a key, a read-only command's key needs R and a write command's W.
//!
//! Selectors (`(rules...)`, Redis 7.0's) are further sets of command, key
//! and channel rules: a command runs if the root rules or any selector
//! allow it.

mod check;
mod rules;
mod users;

pub use check::{Denied, Request};
pub use rules::{
    categories, category_commands, hash_password, id_name, RuleError, User, UserDetails,
};
pub use users::{kill_clients_of, now_ms, Acl, DeniedCounts, LogEntry, Reason, SessionAcl};

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::check::*;
    use super::rules::*;
    use super::*;
    use crate::meta;

    #[test]
    fn passwords_are_sha256_hex() {
        assert_eq!(
            hash_password(b"foo"),
            "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"
        );
        assert!(same_in_constant_time(b"abc", b"abc"));
        assert!(!same_in_constant_time(b"abc", b"abd"));
        assert!(!same_in_constant_time(b"abc", b"ab"));
    }

    #[test]
    fn the_default_user_is_described_as_redis_does() {
        let u = User::default_user();
        assert_eq!(u.describe(), "on nopass ~* &* +@all");
        assert!(u.unrestricted());
        let n = User::new("x");
        assert_eq!(n.describe(), "off resetchannels -@all");
    }

    #[test]
    fn rules_set_and_clear_command_bits() {
        let mut u = User::new("x");
        for op in ["on", ">pw", "~k*", "%R~r*", "+get", "+config|get"] {
            u.apply(op.as_bytes()).unwrap();
        }
        assert_eq!(
            u.describe(),
            format!(
                "on #{} ~k* %R~r* resetchannels -@all +config|get +get",
                hash_password(b"pw")
            )
        );
        let get = crate::command::lookup(b"get").unwrap();
        let set = crate::command::lookup(b"set").unwrap();
        let req = |a: &[&str]| {
            a.iter()
                .map(|s| Bytes::from(s.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            Acl::check_user(&u, get.acl_request(&req(&["get", "k1"]))),
            Ok(())
        );
        assert_eq!(
            Acl::check_user(&u, get.acl_request(&req(&["get", "r1"]))),
            Ok(())
        );
        assert_eq!(
            Acl::check_user(&u, get.acl_request(&req(&["get", "x"]))),
            Err(Denied::Key(1))
        );
        assert_eq!(
            Acl::check_user(&u, set.acl_request(&req(&["set", "k", "v"]))),
            Err(Denied::Command(meta::position(set.meta)))
        );
        u.apply(b"+set").unwrap();
        assert_eq!(
            Acl::check_user(&u, set.acl_request(&req(&["set", "k", "v"]))),
            Ok(())
        );
        assert_eq!(
            Acl::check_user(&u, set.acl_request(&req(&["set", "r", "v"]))),
            Err(Denied::Key(1))
        );
        // %W~ allows a plain SET, not SET ... GET (which reads), nor GET.
        u.apply(b"%W~w*").unwrap();
        assert_eq!(
            Acl::check_user(&u, set.acl_request(&req(&["set", "w1", "v"]))),
            Ok(())
        );
        assert_eq!(
            Acl::check_user(&u, set.acl_request(&req(&["set", "w1", "v", "GET"]))),
            Err(Denied::Key(1))
        );
        assert_eq!(
            Acl::check_user(&u, get.acl_request(&req(&["get", "w1"]))),
            Err(Denied::Key(1))
        );
        assert_eq!(u.apply(b"+nosuch"), Err(RuleError::Unknown));
        assert_eq!(u.apply(b"+@nosuch"), Err(RuleError::Unknown));
        assert_eq!(u.apply(b"<nosuch"), Err(RuleError::NoSuchPassword));
        assert_eq!(u.apply(b"#abc"), Err(RuleError::BadHash));
        assert_eq!(u.apply(b"+config|get|x"), Err(RuleError::FirstArgOfSub));
        assert!(u.accepts(b"pw"));
        assert!(!u.accepts(b"no"));
        u.apply(b"off").unwrap();
        assert!(!u.accepts(b"pw"));
    }

    #[test]
    fn selectors_are_merged_and_any_one_allows() {
        let args: Vec<&[u8]> = vec![b"on", b"(+set", b"~b*)", b"(+get)", b"~a*"];
        assert_eq!(
            merge_selectors(&args).unwrap(),
            vec![
                b"on".to_vec(),
                b"(+set ~b*)".to_vec(),
                b"(+get)".to_vec(),
                b"~a*".to_vec()
            ]
        );
        assert_eq!(merge_selectors(&[b"x", b"(+get", b"~a"]), Err(1));
        let mut u = User::new("x");
        for op in ["+get", "~a*", "(+set ~b*)"] {
            u.apply(op.as_bytes()).unwrap();
        }
        let set = crate::command::lookup(b"set").unwrap();
        let req = |a: &[&str]| {
            a.iter()
                .map(|s| Bytes::from(s.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            Acl::check_user(&u, set.acl_request(&req(&["set", "b1", "v"]))),
            Ok(())
        );
        // The root refuses the command, the selector the key: the key wins.
        assert_eq!(
            Acl::check_user(&u, set.acl_request(&req(&["set", "a1", "v"]))),
            Err(Denied::Key(1))
        );
        assert_eq!(
            u.describe(),
            "off ~a* resetchannels -@all +get (~b* resetchannels -@all +set)"
        );
    }

    #[test]
    fn first_args_of_plain_commands() {
        let mut u = User::new("x");
        u.apply(b"+select|0").unwrap();
        let select = crate::command::lookup(b"select").unwrap();
        let req = |a: &[&str]| {
            a.iter()
                .map(|s| Bytes::from(s.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            Acl::check_user(&u, select.acl_request(&req(&["select", "0"]))),
            Ok(())
        );
        assert_eq!(
            Acl::check_user(&u, select.acl_request(&req(&["select", "1"]))),
            Err(Denied::Command(meta::position(select.meta)))
        );
        assert_eq!(u.describe(), "off resetchannels -@all +select|0");
    }

    #[test]
    fn movable_keys_are_found() {
        let spec = crate::command::lookup(b"zunionstore").unwrap();
        let req: Vec<Bytes> = ["zunionstore", "d", "2", "a", "b", "WEIGHTS", "1", "2"]
            .iter()
            .map(|s| Bytes::from(s.to_string()))
            .collect();
        assert_eq!(
            key_positions(&spec.acl_request(&req)),
            vec![(3, (true, false)), (4, (true, false)), (1, (false, true))]
        );
        let spec = crate::command::lookup(b"mset").unwrap();
        let req: Vec<Bytes> = ["mset", "a", "1", "b", "2"]
            .iter()
            .map(|s| Bytes::from(s.to_string()))
            .collect();
        assert_eq!(
            key_positions(&spec.acl_request(&req)),
            vec![(1, (false, true)), (3, (false, true))]
        );
        // MSET's keys are written, not read (OW update).
        let specs = spec.meta.key_specs;
        assert_eq!(key_access(specs, "mset", 3, &req), Some((false, true)));
    }
}
