//! One owner per database file.
//!
//! SQLite itself is happy to let two processes open the same file: its
//! locks keep each transaction whole. respite is not. Its writer assumes it
//! is the only one writing (the value cache, WATCH versions and blocked
//! clients all live in this process and are kept exact by watching every
//! write go by), so a second daemon on the same file would answer GETs from
//! a cache the other one's writes never cleared. Two daemons on one file
//! are therefore refused outright.
//!
//! The lock is an OS file lock (`flock`, through `File::try_lock`) on a
//! small file beside the database, `<db>.lock`, which also holds the
//! owner's pid so the refusal can name it. The kernel drops the lock when
//! the process dies, however it dies, so a lock left by a SIGKILLed daemon
//! never blocks the restart. The file itself is left in place on exit:
//! removing it would let a starting daemon lock a file that is about to be
//! unlinked while a third one creates and locks a new one, and two owners
//! would serve. A stale pid inside it is harmless, since only the lock
//! counts. It is a separate file, not the database, because SQLite's own
//! POSIX locks on the database must not be disturbed, and because the
//! database may not exist yet when the lock is taken.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// Why the database could not be claimed.
#[derive(Debug, thiserror::Error)]
pub enum OwnerError {
    /// Another live process holds the lock.
    #[error("{db} is already in use by another respited (pid {pid}); stop it first, or point --db elsewhere")]
    Held {
        /// The database file.
        db: PathBuf,
        /// The owner's pid as it wrote it, or `unknown` if it has not yet.
        pid: String,
    },
    /// The lock file could not be opened or locked.
    #[error("cannot lock {path}: {source}")]
    Io {
        /// The lock file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
}

/// The lock on a database, held until this value is dropped (or the
/// process ends).
#[derive(Debug)]
pub struct OwnerLock {
    /// Kept open: closing it releases the lock.
    _file: File,
    path: PathBuf,
    created: bool,
}

/// The lock file of a database: `<db>.lock`.
pub fn lock_path(db: &Path) -> PathBuf {
    let mut p = db.as_os_str().to_owned();
    p.push(".lock");
    PathBuf::from(p)
}

impl OwnerLock {
    /// Claims `db` for this process, or says who has it. Creates the lock
    /// file if it is missing (see [`OwnerLock::created`]).
    pub fn acquire(db: &Path) -> Result<OwnerLock, OwnerError> {
        let path = lock_path(db);
        let io = |source| OwnerError::Io {
            path: path.clone(),
            source,
        };
        let (mut file, created) = match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(f) => (f, true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => (
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&path)
                    .map_err(io)?,
                false,
            ),
            Err(e) => return Err(io(e)),
        };
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                let pid = pid.trim();
                return Err(OwnerError::Held {
                    db: db.to_path_buf(),
                    pid: if pid.is_empty() {
                        "unknown".into()
                    } else {
                        pid.into()
                    },
                });
            }
            Err(TryLockError::Error(e)) => {
                if created {
                    let _ = std::fs::remove_file(&path);
                }
                return Err(io(e));
            }
        }
        // Ours now: record who we are for the next one to be refused.
        let written = file
            .set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| writeln!(file, "{}", std::process::id()));
        if let Err(e) = written {
            tracing::warn!(path = %path.display(), error = %e, "cannot write the pid into the lock file");
        }
        Ok(OwnerLock {
            _file: file,
            path,
            created,
        })
    }

    /// Whether this call created the lock file (so a start-up that fails
    /// later can remove it and leave the disk as it found it).
    pub fn created(&self) -> bool {
        self.created
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_claim_is_refused_and_the_first_release_frees_it() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.db");
        let first = OwnerLock::acquire(&db).unwrap();
        assert!(first.created());
        match OwnerLock::acquire(&db) {
            Err(OwnerError::Held { pid, .. }) => {
                assert_eq!(pid, std::process::id().to_string())
            }
            other => panic!("{other:?}"),
        }
        drop(first);
        let again = OwnerLock::acquire(&db).unwrap();
        assert!(!again.created());
    }
}
