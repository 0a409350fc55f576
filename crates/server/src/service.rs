//! Life under a service manager: readiness, status, the watchdog, reloads
//! and stopping, told to systemd through `sd_notify`.
//!
//! systemd learns how a `Type=notify` service is doing from datagrams the
//! service sends to the socket named in `NOTIFY_SOCKET`. respited sends
//! `READY=1` only once it could answer a client: the database is open
//! (and recovered, if the last run crashed) and every listener is bound, so
//! units ordered `After=respited.service` start when it really serves.
//! While it runs, a monitor task sends a one-line `STATUS=` every few
//! seconds (what `systemctl status` shows) and, if the unit has
//! `WatchdogSec=`, `WATCHDOG=1`, but only while the writer thread is
//! making progress. The writer raises a counter at every operation and at
//! every turn of its loop, which it takes at least every 100 ms when idle
//! (see `writer.rs`), so a counter that stands still for half the watchdog
//! period means a writer stuck in the middle of something: the pings stop
//! and systemd restarts the service, which is the only cure for a writer
//! that will never answer again. The pings also prove the async runtime
//! answers, since the monitor is one of its tasks. A reload (SIGHUP) is
//! framed by `RELOADING=1` and `READY=1`, and a stop starts with
//! `STOPPING=1`; while the final drain and checkpoint run, the stop
//! timeout is extended in steps so a big WAL is copied rather than cut
//! short by SIGKILL, up to a bound after which systemd may act.
//!
//! Outside systemd (`NOTIFY_SOCKET` unset) every call here is a no-op, so
//! the daemon behaves exactly as before when run by hand.
//!
//! Reloading the configuration file is here too, since it is an event of
//! the service's life rather than of any one connection: what can change
//! at run time is applied (the same code as CONFIG SET), what cannot is
//! listed in the log as needing a restart, and a file that does not parse
//! changes nothing.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use sd_notify::NotifyState;

use crate::config::Config;
use crate::state::Shared;
use crate::sync::lock;

/// How often STATUS= is refreshed.
const STATUS_EVERY: Duration = Duration::from_secs(2);

/// How much each EXTEND_TIMEOUT_USEC asks for while stopping, and how
/// often it is sent.
const EXTEND_BY: Duration = Duration::from_secs(20);
const EXTEND_EVERY: Duration = Duration::from_secs(5);

/// The longest a stop extends its own timeout: past this, systemd's
/// TimeoutStopSec applies again (a drain that takes this long is stuck).
const EXTEND_AT_MOST: Duration = Duration::from_secs(300);

/// Sends states to the service manager, if there is one. A failure (the
/// manager went away) is logged once at debug level: it must never stop
/// the server.
pub fn notify(states: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::debug!(error = %e, "cannot notify the service manager");
    }
}

/// Whether a service manager listens (`NOTIFY_SOCKET` is set).
pub fn managed() -> bool {
    std::env::var_os("NOTIFY_SOCKET").is_some()
}

/// The one-line summary STATUS= carries, from counters taken `elapsed`
/// after `before`.
struct Sample {
    at: Instant,
    commands: u64,
    ops: u64,
    batches: u64,
}

impl Sample {
    fn take(shared: &Shared) -> Sample {
        let stats = shared.engine.stats();
        Sample {
            at: Instant::now(),
            commands: shared.counters.commands_processed.load(Ordering::Relaxed),
            ops: stats.ops,
            batches: stats.batches,
        }
    }
}

fn status_line(shared: &Shared, before: &Sample, now: &Sample) -> String {
    let secs = now.at.duration_since(before.at).as_secs_f64().max(0.001);
    // Counters go back to zero on CONFIG RESETSTAT: saturate rather than
    // report a wrapped figure for that one interval.
    let commands = now.commands.saturating_sub(before.commands) as f64;
    let ops = now.ops.saturating_sub(before.ops);
    let batches = now.batches.saturating_sub(before.batches);
    let per_commit = if batches == 0 {
        0.0
    } else {
        ops as f64 / batches as f64
    };
    format!(
        "{} clients, {:.0} ops/s, {:.1} writes/commit, write queue {}",
        lock(&shared.clients).len(),
        commands / secs,
        per_commit,
        shared.engine.write_queue_len(),
    )
}

/// Tells the manager the server is ready, with a first status line.
pub fn ready(shared: &Shared) {
    let now = Sample::take(shared);
    let line = status_line(shared, &now, &now);
    notify(&[NotifyState::Ready, NotifyState::Status(&line)]);
}

/// Runs until shutdown begins: STATUS= every [`STATUS_EVERY`], and
/// WATCHDOG=1 at a quarter of the watchdog period while the writer makes
/// progress. Does nothing outside systemd.
pub async fn monitor(shared: Arc<Shared>) {
    if !managed() {
        return;
    }
    let watchdog = sd_notify::watchdog_enabled().filter(|d| !d.is_zero());
    if let Some(period) = watchdog {
        tracing::info!(
            period_ms = period.as_millis() as u64,
            "systemd watchdog enabled"
        );
    }
    let tick = watchdog.map_or(STATUS_EVERY, |w| (w / 4).min(STATUS_EVERY));
    let mut interval = tokio::time::interval(tick);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_status = Sample::take(&shared);
    let mut seen = shared.engine.writer_progress();
    let mut advanced = Instant::now();
    let mut stalled_logged = false;
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = shared.wait_for_shutdown() => return,
        }
        if let Some(period) = watchdog {
            let progress = shared.engine.writer_progress();
            if progress != seen {
                seen = progress;
                advanced = Instant::now();
            }
            if advanced.elapsed() < period / 2 {
                notify(&[NotifyState::Watchdog]);
                stalled_logged = false;
            } else if !stalled_logged {
                tracing::error!(
                    stalled_ms = advanced.elapsed().as_millis() as u64,
                    queue = shared.engine.write_queue_len(),
                    "the writer thread has made no progress; withholding the watchdog ping"
                );
                stalled_logged = true;
            }
        }
        let now = Sample::take(&shared);
        if now.at.duration_since(last_status.at) >= STATUS_EVERY {
            let line = status_line(&shared, &last_status, &now);
            notify(&[NotifyState::Status(&line)]);
            last_status = now;
        }
    }
}

/// Tells the manager the stop has begun, and keeps extending its timeout
/// while the drain and final checkpoint run (for at most
/// [`EXTEND_AT_MOST`]). Returns when `done` resolves.
pub async fn stopping<F: std::future::Future>(done: F) -> F::Output {
    if !managed() {
        return done.await;
    }
    let started = Instant::now();
    let usec = |d: Duration| u32::try_from(d.as_micros()).unwrap_or(u32::MAX);
    tokio::pin!(done);
    let mut interval = tokio::time::interval(EXTEND_EVERY);
    loop {
        tokio::select! {
            out = &mut done => return out,
            _ = interval.tick() => {
                if started.elapsed() < EXTEND_AT_MOST {
                    notify(&[NotifyState::ExtendTimeoutUsec(usec(EXTEND_BY))]);
                }
            }
        }
    }
}

/// One setting's change, for the log.
fn changed(name: &str, from: impl std::fmt::Display, to: impl std::fmt::Display) -> String {
    format!("{name} {from} -> {to}")
}

/// What [`reload`] did.
#[derive(Debug, Default)]
pub struct ReloadOutcome {
    /// Settings changed now, as `name old -> new`.
    pub applied: Vec<String>,
    /// Settings whose new value waits for a restart.
    pub need_restart: Vec<String>,
}

/// Applies a freshly read configuration to the running server (SIGHUP):
/// the settings that can change at run time change now, the others are
/// reported as needing a restart. `set_log_level` swaps the log filter.
pub fn reload(
    shared: &Shared,
    new: &Config,
    set_log_level: &dyn Fn(&str) -> Result<(), String>,
) -> ReloadOutcome {
    use crate::params::{apply_change, Change};
    let mut out = ReloadOutcome::default();
    let s = &shared.settings;
    let mut changes = Vec::new();
    let old = s.maxclients.load(Ordering::Relaxed);
    if old != new.maxclients {
        out.applied.push(changed("maxclients", old, new.maxclients));
        changes.push(Change::MaxClients(new.maxclients));
        // As at start: raised as far as the system allows, and said so
        // when that is not far enough (the setting stays, as at start).
        if let Err(e) = crate::fdlimit::raise_for(new.maxclients as u64) {
            tracing::warn!(
                limit = e.limit,
                maxclients = new.maxclients,
                wanted = e.wanted,
                "the open files limit (hard RLIMIT_NOFILE) is below what maxclients needs: \
                 raise 'ulimit -n' or LimitNOFILE, or lower maxclients"
            );
        }
    }
    let old = s.proto_max_bulk_len.load(Ordering::Relaxed);
    if old != new.proto_max_bulk_len {
        out.applied
            .push(changed("proto_max_bulk_len", old, new.proto_max_bulk_len));
        changes.push(Change::ProtoMaxBulkLen(new.proto_max_bulk_len));
    }
    let old = s.client_query_buffer_limit.load(Ordering::Relaxed);
    if old != new.client_query_buffer_limit {
        out.applied.push(changed(
            "client_query_buffer_limit",
            old,
            new.client_query_buffer_limit,
        ));
        changes.push(Change::QueryBufferLimit(new.client_query_buffer_limit));
    }
    if let Ok(limits) = new.output_limits() {
        let old = *lock(&s.output_limits);
        if old != limits {
            out.applied.push(changed(
                "client_output_buffer_limit",
                crate::limits::format_limits(&old),
                crate::limits::format_limits(&limits),
            ));
            changes.push(Change::OutputLimits(limits));
        }
    }
    let old = shared.engine.max_batch();
    if old != new.max_batch {
        out.applied.push(changed("max_batch", old, new.max_batch));
        changes.push(Change::MaxBatch(new.max_batch));
    }
    let old = *lock(&s.appendfsync);
    if old != new.appendfsync {
        out.applied.push(changed(
            "appendfsync",
            old.as_str(),
            new.appendfsync.as_str(),
        ));
        changes.push(Change::AppendFsync(new.appendfsync));
    }
    let old = s.protected_mode.load(Ordering::Relaxed);
    if old != new.protected_mode {
        out.applied
            .push(changed("protected_mode", old, new.protected_mode));
        changes.push(Change::ProtectedMode(new.protected_mode));
    }
    if shared.requirepass() != new.requirepass {
        // Never the password itself in the log.
        out.applied.push(
            match &new.requirepass {
                Some(_) => "requirepass changed",
                None => "requirepass removed",
            }
            .into(),
        );
        changes.push(Change::RequirePass(new.requirepass.clone()));
    }
    for change in changes {
        apply_change(shared, change);
    }
    let old = lock(&s.log_level).clone();
    if old != new.log_level {
        match set_log_level(&new.log_level) {
            Ok(()) => {
                out.applied.push(changed("log_level", &old, &new.log_level));
                *lock(&s.log_level) = new.log_level.clone();
            }
            Err(e) => out.need_restart.push(format!(
                "log_level '{}' is not a valid filter: {e}",
                new.log_level
            )),
        }
    }
    // The [redis] table: parameters under their redis names, applied as
    // CONFIG SET would (a parameter dropped from the file keeps its value
    // until a restart, as CONFIG SET's does).
    match crate::params::apply_table(shared, &new.redis) {
        Ok(applied) => out.applied.extend(applied),
        Err(e) => out.need_restart.push(e),
    }
    match crate::tls::reload(&shared.tls, new) {
        None => {}
        Some(Ok(())) => out.applied.push("TLS certificates re-read".into()),
        Some(Err(e)) => out.need_restart.push(format!(
            "TLS certificates not reloaded, the old ones stay: {e}"
        )),
    }
    out.need_restart
        .extend(shared.config.restart_only_differences(new));
    out
}
