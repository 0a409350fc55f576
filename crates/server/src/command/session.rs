//! Per-connection state commands can see and change.

use std::sync::Arc;

use respite_engine::Txn;

use super::multi::{unwatch, Queue, WatchList};
use super::Ctx;
use crate::clients::ClientHandle;
use crate::reply::Reply;
use crate::state::Shared;

/// Per-connection state commands can see and change.
pub struct Session {
    /// Shared server state.
    pub shared: Arc<Shared>,
    /// This client's registry entry: the one owner of its database, its
    /// protocol and its user's name, which the session reads and writes
    /// through it (CLIENT LIST reads the same fields).
    pub client: Arc<ClientHandle>,
    /// Passed AUTH (always true when no password is set).
    pub authenticated: bool,
    /// The commands queued since MULTI, while a transaction is open.
    pub multi: Option<Queue>,
    /// The keys this connection WATCHes.
    pub watched: WatchList,
    /// The ACL user it runs as.
    pub acl: crate::acl::SessionAcl,
}

impl Session {
    /// The context this client's commands are parsed in.
    pub fn ctx(&self) -> Ctx<'_> {
        let resp3 = self.resp3();
        let mut ctx = Ctx::new(&self.shared, self.db(), resp3, self.touches());
        ctx.subscribed = !resp3 && self.client.pubsub.active();
        ctx
    }

    /// The selected database.
    pub fn db(&self) -> u32 {
        self.client.db.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether the client speaks RESP3 (after HELLO 3).
    pub fn resp3(&self) -> bool {
        self.client.resp.load(std::sync::atomic::Ordering::Relaxed) == 3
    }

    /// Whether this client's reads count as accesses: not in CLIENT
    /// NO-TOUCH mode.
    pub fn touches(&self) -> bool {
        !self
            .client
            .state
            .no_touch
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Selects database `db` (in the registry entry, which commands and
    /// CLIENT LIST both read).
    pub fn select(&mut self, db: u32) {
        self.client
            .db
            .store(db, std::sync::atomic::Ordering::Relaxed);
    }

    /// Switches to RESP3 (`true`) or RESP2, in the registry entry.
    pub fn set_resp3(&mut self, resp3: bool) {
        self.client.resp.store(
            if resp3 { 3 } else { 2 },
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// An operation for the writer that ends this connection's watches and
    /// then answers `reply`; `None` when nothing is watched.
    pub fn end_watches(&mut self, reply: Reply) -> Option<respite_engine::WriteOp<Reply>> {
        if !std::mem::take(&mut self.watched.active) {
            return None;
        }
        let watches = self.shared.engine.watches();
        // The ended watches go with the operation that ends them; a WATCH
        // after this one fills a new list. Sharing one list let an EXEC's
        // early check (below) read entries of watches already ended by an
        // operation still queued for the writer: a pipeline `WATCH k;
        // <write k>; DISCARD; WATCH k; MULTI; EXEC` could then fail its EXEC
        // on a loaded server (found by the random pipeline test, seed 38).
        let keys = std::mem::take(&mut self.watched.keys);
        Some(Box::new(move |_: &mut Txn<'_, '_>| {
            unwatch(&watches, &keys);
            Ok(reply)
        }))
    }

    /// A new connection's session: database 0, RESP2, no transaction, the
    /// `default` user; authenticated unless that user needs a password.
    pub fn new(shared: Arc<Shared>, client: Arc<ClientHandle>) -> Session {
        Session {
            authenticated: shared.acl.default_user_open(),
            acl: crate::acl::SessionAcl::default_user(&shared.acl),
            shared,
            client,
            multi: None,
            watched: Default::default(),
        }
    }
}

/// A session on a fresh engine in `dir`, as the fuzz target builds one.
#[cfg(test)]
pub(crate) fn test_session(dir: &std::path::Path) -> Session {
    let config = crate::Config {
        db: dir.join("t.db"),
        readers: 1,
        ..crate::Config::default()
    };
    let engine =
        respite_engine::Engine::<crate::reply::Reply>::open(config.engine()).expect("engine");
    let shared = Arc::new(Shared::new(engine, config));
    let client = Arc::new(ClientHandle::new(
        1,
        crate::clients::Peer::Unix("test".into()),
    ));
    Session::new(shared, client)
}
