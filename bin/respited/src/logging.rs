//! Logging: plain lines on stderr, or journal lines under systemd.
//!
//! Run by hand, respited writes tracing's usual lines (time, level,
//! target, message) to stderr. Under systemd, stderr is a stream into the
//! journal, which adds its own timestamps and reads a priority from a
//! `<N>` prefix on each line (`SyslogLevelPrefix=`, on by default). So
//! when `JOURNAL_STREAM` names the very stream stderr is connected to (the
//! check sd_journal_stream_fd's documentation asks for, since a child
//! started from a unit inherits the variable even when its stderr goes
//! elsewhere), each line starts with its syslog priority (`<3>` error,
//! `<4>` warning, `<6>` info, `<7>` debug) and carries no timestamp and no
//! level word: `journalctl -p warning -u respited` then filters as
//! expected. This is chosen over tracing-journald's native protocol for
//! its simplicity: nothing but stderr, and the same bytes a test can read.
//!
//! The filter sits behind a reload handle, so SIGHUP can change
//! `log_level` without a restart.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::prelude::*;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{reload, EnvFilter};

/// Whether stderr is the journal stream systemd set up for this service.
fn stderr_is_journal() -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some(expected) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    // /proc/self/fd/2 resolves to stderr's file, pipe or socket.
    match std::fs::metadata("/proc/self/fd/2") {
        Ok(m) => expected.to_str() == Some(&format!("{}:{}", m.dev(), m.ino())),
        Err(_) => false,
    }
}

/// Prefixes each event with its syslog priority.
struct Journal<F>(F);

impl<S, N, F> FormatEvent<S, N> for Journal<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let priority = match *event.metadata().level() {
            Level::ERROR => 3,
            Level::WARN => 4,
            Level::INFO => 6,
            Level::DEBUG | Level::TRACE => 7,
        };
        write!(writer, "<{priority}>")?;
        self.0.format_event(ctx, writer, event)
    }
}

/// Changes the log filter of the running process (for SIGHUP).
pub type SetLevel = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// Sets up the global subscriber with `level` as the filter (falling back
/// to `info` if it does not parse); returns the function that changes the
/// filter later.
pub fn init(level: &str) -> SetLevel {
    let filter = EnvFilter::try_new(level).unwrap_or_else(|_| EnvFilter::new("info"));
    let (filter, handle) = reload::Layer::new(filter);
    let registry = tracing_subscriber::registry().with(filter);
    if stderr_is_journal() {
        let format = tracing_subscriber::fmt::format()
            .without_time()
            .with_level(false)
            .with_ansi(false);
        registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_ansi(false)
                    .event_format(Journal(format)),
            )
            .init();
    } else {
        registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())),
            )
            .init();
    }
    Box::new(move |level: &str| {
        let filter = EnvFilter::try_new(level).map_err(|e| e.to_string())?;
        handle.reload(filter).map_err(|e| e.to_string())
    })
}
