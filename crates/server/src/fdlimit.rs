//! The open files limit, raised to what `maxclients` needs.
//!
//! Every client is a socket, and a process may hold no more descriptors
//! than its soft `RLIMIT_NOFILE`: a shell's usual 1024 would make the
//! thousandth connection fail in `accept` however high `maxclients` is.
//! redis-server raises the limit to `maxclients` plus a reserve at start
//! and again on every `CONFIG SET maxclients` (`adjustOpenFilesLimit`),
//! and refuses the setting when the system will not go that far; respite
//! does the same, at start (from `main`), on CONFIG SET and on a SIGHUP
//! reload.
//!
//! How far it goes is redis's rule too: as high as the system allows, up
//! to what is wanted. An unprivileged process may move its soft limit up
//! to the hard one; a privileged one (CAP_SYS_RESOURCE) may raise the hard
//! limit too, up to the kernel's `fs.nr_open`. Where redis sets both
//! limits to its target (and so lowers the hard limit of an unprivileged
//! process for good), respite moves the hard limit only upwards.

use std::io;

/// Descriptors kept beside the clients' sockets: the listeners, the
/// database, its WAL and shared-memory file for the writer and each reader
/// of the pool, the log. Redis reserves 32 (`CONFIG_MIN_RESERVED_FDS`);
/// respite's SQLite connections need a few more.
pub const RESERVED_FDS: u64 = 64;

/// What raising the limit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Raised {
    /// The soft limit already allowed it.
    Enough,
    /// The soft limit went from `from` to `to` (`to` is what was wanted).
    Raised {
        /// The soft limit before.
        from: u64,
        /// The soft limit now.
        to: u64,
    },
}

/// The limit could not reach what `maxclients` needs.
#[derive(Debug, thiserror::Error)]
#[error("the open files limit is {limit}, below the {wanted} that maxclients needs")]
pub struct TooLow {
    /// The soft limit now (raised as far as the system allowed).
    pub limit: u64,
    /// What was wanted: `maxclients` plus [`RESERVED_FDS`].
    pub wanted: u64,
    /// Why it could go no further, when a call said (unreadable limits).
    pub cause: Option<io::Error>,
}

impl TooLow {
    /// The most clients the limit allows (redis's "try with N").
    pub fn clients(&self) -> u64 {
        self.limit.saturating_sub(RESERVED_FDS)
    }
}

fn get() -> io::Result<libc::rlimit> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(lim)
}

fn set(soft: u64, hard: u64) -> io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: setrlimit reads one rlimit from a struct we own.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The kernel's ceiling for any process's limit (`fs.nr_open`).
fn nr_open() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Raises the soft open files limit (and, where allowed, the hard one) to
/// `maxclients + RESERVED_FDS`, or as near as the system allows.
pub fn raise_for(maxclients: u64) -> Result<Raised, TooLow> {
    let wanted = maxclients.saturating_add(RESERVED_FDS);
    let lim = get().map_err(|e| TooLow {
        limit: 0,
        wanted,
        cause: Some(e),
    })?;
    let (soft, hard) = (lim.rlim_cur, lim.rlim_max);
    if soft >= wanted {
        return Ok(Raised::Enough);
    }
    if wanted > hard {
        // Only a privileged process may raise the hard limit, and only up
        // to fs.nr_open: try the whole way, then that ceiling. A refusal
        // (EPERM) leaves both limits as they were.
        let ceiling = nr_open().map_or(wanted, |n| n.min(wanted));
        for target in [wanted, ceiling] {
            if target > hard && set(target, target).is_ok() {
                return if target == wanted {
                    Ok(Raised::Raised {
                        from: soft,
                        to: target,
                    })
                } else {
                    Err(TooLow {
                        limit: target,
                        wanted,
                        cause: None,
                    })
                };
            }
        }
    }
    let target = wanted.min(hard);
    if target > soft {
        if let Err(e) = set(target, hard) {
            return Err(TooLow {
                limit: soft,
                wanted,
                cause: Some(e),
            });
        }
    }
    if target < wanted {
        return Err(TooLow {
            limit: target.max(soft),
            wanted,
            cause: None,
        });
    }
    Ok(Raised::Raised {
        from: soft,
        to: target,
    })
}

/// The soft open files limit now, if it can be read.
pub fn current() -> Option<u64> {
    get().ok().map(|l| l.rlim_cur)
}
