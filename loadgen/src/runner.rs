//! Running one phase of a workload against one target.
//!
//! Threads: each of `--threads` OS threads runs a current-thread tokio
//! runtime and drives its share of the connections as local tasks. Keeping
//! a connection on one thread for its whole life means its statistics can
//! live in a plain `RefCell` shared by the thread's tasks: no atomics and no
//! locks on the per-reply path, and one set of histograms per thread rather
//! than per connection. Threads only meet at start (a barrier, so that
//! connecting is not measured) and once a second, when each sends its
//! interval histograms to the main thread for the live line and the
//! time series.
//!
//! Closed loop: a connection encodes `--pipeline` requests into one reused
//! buffer, writes it with one call, and reads the replies; each reply's
//! latency is measured from the write to the read that completed it.
//!
//! Open loop (`--rate`): each connection has a schedule of intended send
//! times. A writer sends whatever is due (all of it at once when behind) and
//! a reader, running concurrently on the same task, matches replies to
//! requests in order. Latency is measured from the *intended* send time, so a
//! server that stalls is charged for the requests that should have been sent
//! while it stalled (coordinated omission); service time, from the actual
//! write, is kept separately.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio::io::AsyncWriteExt;

use crate::conn::{Conn, ConnOpts};
use crate::error::Error;
use crate::resp::{self, Reply};
use crate::target::Target;
use crate::verify::{Checker, Tag};
use crate::workload::{Encoder, Phase, Workload};

/// Largest latency tracked (5 minutes, in microseconds); larger values are
/// clamped rather than lost.
const MAX_US: u64 = 300_000_000;

/// An empty latency histogram (microseconds, three significant digits).
/// Every histogram of a run comes from here, so any two can be added.
pub fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_US, 3).expect("constant histogram bounds are valid")
}

/// How to run each phase: the command line's settings, minus the workload.
#[derive(Debug, Clone)]
pub struct RunCfg {
    /// OS threads (capped at one per connection).
    pub threads: usize,
    /// Connections in total, spread round-robin over the threads.
    pub connections: usize,
    /// Requests per write in the closed loop.
    pub pipeline: usize,
    /// Open loop: requests per second over all connections; `None` for the
    /// closed loop.
    pub rate: Option<f64>,
    /// Stop after this many measured requests (per phase).
    pub requests: Option<u64>,
    /// Stop after this much measured time (per phase).
    pub duration: Option<Duration>,
    /// Unmeasured time before each phase's measurement starts.
    pub warmup: Duration,
    /// Base seed; each connection derives its own from it.
    pub seed: u64,
    /// Check every reply (`--verify`).
    pub verify: bool,
    /// Connection setup for every connection.
    pub conn: ConnOpts,
    /// Where to print per-second progress, if anywhere.
    pub live: Option<crate::live::Live>,
}

/// How many distinct error texts are kept per operation; later distinct
/// texts are still counted in `errors`.
pub const MAX_ERROR_TEXTS: usize = 5;

/// Error texts are cut to this many characters: enough to read the
/// reason, short enough for a table.
const MAX_ERROR_LEN: usize = 200;

/// Adds `n` occurrences of `text` to `texts` (distinct texts with their
/// counts, first seen first), unless `MAX_ERROR_TEXTS` are already kept.
fn note_error(texts: &mut Vec<(String, u64)>, text: &str, n: u64) {
    if let Some(e) = texts.iter_mut().find(|(t, _)| t == text) {
        e.1 += n;
    } else if texts.len() < MAX_ERROR_TEXTS {
        texts.push((text.to_string(), n));
    }
}

/// Everything measured for one operation of a phase.
#[derive(Clone)]
pub struct OpStats {
    /// The operation's name in reports.
    pub name: String,
    /// Latency of measured successful replies, in µs: from the write in the
    /// closed loop, from the intended send time in the open loop. Error
    /// replies are left out: a server refusing fast must not look fast.
    pub latency: Histogram<u64>,
    /// Open loop only: from the actual write.
    pub service: Histogram<u64>,
    /// Measured replies that were not errors: what ops/s counts.
    pub ops: u64,
    /// Measured replies that were errors.
    pub errors: u64,
    /// The first distinct error texts (at most `MAX_ERROR_TEXTS`), with
    /// how often each came.
    pub error_texts: Vec<(String, u64)>,
    /// Replies `--verify` rejected, warm-up included: a wrong answer is
    /// wrong whenever it comes.
    pub mismatches: u64,
    /// Request bytes sent, as encoded.
    pub tx: u64,
    /// Reply bytes received, as encoded.
    pub rx: u64,
}

impl OpStats {
    /// Empty statistics for the operation `name`.
    pub fn new(name: &str) -> OpStats {
        OpStats {
            name: name.to_string(),
            latency: new_hist(),
            service: new_hist(),
            ops: 0,
            errors: 0,
            error_texts: Vec::new(),
            mismatches: 0,
            tx: 0,
            rx: 0,
        }
    }
    /// Adds `o`'s figures to these (threads' results, or phases').
    pub fn merge(&mut self, o: &OpStats) {
        // Same bounds on both sides: addition cannot fail.
        let _ = self.latency.add(&o.latency);
        let _ = self.service.add(&o.service);
        self.ops += o.ops;
        self.errors += o.errors;
        for (t, n) in &o.error_texts {
            note_error(&mut self.error_texts, t, *n);
        }
        self.mismatches += o.mismatches;
        self.tx += o.tx;
        self.rx += o.rx;
    }
}

/// One second of the run, per operation.
#[derive(Clone)]
pub struct Interval {
    /// Latencies completed in this second, indexed like the phase's ops.
    pub hists: Vec<Histogram<u64>>,
    /// Error replies in this second, all operations together.
    pub errors: u64,
}

/// What `--verify` found, summed over threads (and, in reports, phases).
#[derive(Default)]
pub struct VerifyOutcome {
    /// Replies checked.
    pub checked: u64,
    /// Replies that failed their check.
    pub mismatches: u64,
    /// The first few mismatches, described (at most `MAX_SAMPLES`).
    pub samples: Vec<String>,
}

/// Everything measured in one phase against one target.
pub struct PhaseResult {
    /// Per operation, indexed like the phase's ops.
    pub ops: Vec<OpStats>,
    /// From the start of measurement to the last measured reply; rates are
    /// computed over this, so shutting down after the last reply does not
    /// dilute them.
    pub elapsed: Duration,
    /// One entry per measured second (the last may be partial).
    pub intervals: Vec<Interval>,
    /// Empty unless `--verify`.
    pub verify: VerifyOutcome,
}

/// State shared by every thread of a phase.
///
/// Created only once every connection is up, so `start` excludes
/// connecting; published to the threads through a mutex between the two
/// barrier waits (see `thread_main`).
struct Shared {
    /// When the phase begins (warm-up included); the open loop's schedule
    /// counts from here.
    start: Instant,
    /// When measurement begins: requests sent earlier are not recorded.
    measure_start: Instant,
    /// With `--duration`, when sending stops.
    end: Option<Instant>,
    /// With `-n`, how many measured requests to send in all.
    requests: Option<u64>,
    /// Measured requests handed out so far (may overshoot `requests`;
    /// `claim` trims the excess).
    claimed: AtomicU64,
    /// Set when any connection fails, so the others stop promptly.
    stop: AtomicBool,
}

impl Shared {
    /// Claims up to `want` measured requests; 0 means the run is complete.
    #[inline]
    fn claim(&self, want: usize) -> usize {
        match self.requests {
            None => want,
            Some(total) => {
                let prev = self.claimed.fetch_add(want as u64, Ordering::Relaxed);
                total.saturating_sub(prev).min(want as u64) as usize
            }
        }
    }
    /// Whether sending must stop: past `end`, or another connection failed.
    fn over(&self, now: Instant) -> bool {
        self.stop.load(Ordering::Relaxed) || self.end.is_some_and(|e| now >= e)
    }
}

/// One thread's figures, shared by its connections' tasks (see the module
/// docs for why a `RefCell` suffices).
struct ThreadStats {
    /// Per operation, for the whole phase.
    ops: Vec<OpStats>,
    /// Per operation, for the current second; sent and reset by the ticker.
    interval: Vec<Histogram<u64>>,
    /// Errors in the current second.
    interval_errors: u64,
    /// With `--verify`, the thread's checker.
    checker: Option<Checker>,
    /// When this thread's last measured reply arrived.
    last_done: Option<Instant>,
}

impl ThreadStats {
    /// Everything about one reply except its latency: the check, the
    /// counters and errors (the latter only when measured). Returns whether
    /// the reply was a measured success, whose latency is to be recorded.
    #[inline]
    fn reply(
        &mut self,
        op: usize,
        tag: &Tag,
        reply: &Reply<'_>,
        tx: usize,
        rx: usize,
        measured: bool,
    ) -> bool {
        let s = &mut self.ops[op];
        if let Some(ch) = &mut self.checker {
            if ch.check(&s.name, tag, reply) {
                s.mismatches += 1;
            }
        }
        if !measured {
            return false;
        }
        s.tx += tx as u64;
        s.rx += rx as u64;
        if let Reply::Error(e) = reply {
            s.errors += 1;
            self.interval_errors += 1;
            // Off the fast path: only error replies pay for the text.
            let text = String::from_utf8_lossy(e);
            // Redis and Valkey quote the request's first arguments after
            // this phrase (`ERR unknown command 'FOO', with args beginning
            // with: 'key:17'`): kept, every key would be its own "distinct"
            // text, and the arguments are the run's own anyway.
            let text = match text.find(", with args beginning with:") {
                Some(i) => &text[..i],
                None => &text[..],
            };
            let text: String = text.chars().take(MAX_ERROR_LEN).collect();
            note_error(&mut s.error_texts, &text, 1);
            return false;
        }
        s.ops += 1;
        true
    }

    /// Records `n` measured replies of `op` that share one latency.
    #[inline]
    fn latency(&mut self, op: usize, lat: Duration, n: u64) {
        let us = (lat.as_micros() as u64).max(1);
        // `saturating_record_n` clamps like `saturating_record`.
        self.ops[op].latency.saturating_record_n(us, n);
        self.interval[op].saturating_record_n(us, n);
    }

    /// Records one reply with its own latency (and, in the open loop, its
    /// service time); the open loop's path, where replies are timed singly.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn record(
        &mut self,
        op: usize,
        tag: &Tag,
        reply: &Reply<'_>,
        tx: usize,
        rx: usize,
        lat: Duration,
        svc: Option<Duration>,
        measured: bool,
    ) {
        if !self.reply(op, tag, reply, tx, rx, measured) {
            return;
        }
        self.latency(op, lat, 1);
        if let Some(svc) = svc {
            self.ops[op]
                .service
                .saturating_record((svc.as_micros() as u64).max(1));
        }
    }
}

/// A thread's statistics as its tasks hold them.
type Stats = Rc<RefCell<ThreadStats>>;

/// Attributes a parse failure to `target`.
fn proto(target: &str, source: resp::ProtoError) -> Error {
    Error::Protocol {
        target: target.to_string(),
        source,
    }
}

/// Drives one connection in the closed loop (see the module docs) until
/// the request budget or the duration runs out.
async fn closed_loop(
    mut c: Conn,
    mut enc: Encoder,
    sh: Arc<Shared>,
    st: Stats,
    pipeline: usize,
) -> Result<(), Error> {
    let mut wbuf = Vec::with_capacity(4096);
    // The requests in flight, in send order: (op, request bytes, tag).
    let mut pend: Vec<(usize, usize, Tag)> = Vec::with_capacity(pipeline);
    let mut counts: Vec<u64> = vec![0; enc.ops()];
    loop {
        let now = Instant::now();
        if sh.over(now) {
            break;
        }
        // During warm-up requests are free; once measuring, they are
        // claimed from the shared budget so `-n` is exact across threads.
        let measured = now >= sh.measure_start;
        let k = if measured {
            sh.claim(pipeline)
        } else {
            pipeline
        };
        if k == 0 {
            break;
        }
        wbuf.clear();
        pend.clear();
        for _ in 0..k {
            let op = enc.pick();
            let before = wbuf.len();
            let tag = enc.encode(op, &mut wbuf, None);
            pend.push((op, wbuf.len() - before, tag));
        }
        let t0 = Instant::now();
        c.send(&wbuf).await?;
        let mut t_read = t0;
        let mut i = 0;
        loop {
            // Every reply completed by one read shares one latency (the
            // clock is read once per read, not per reply), so they are
            // counted per operation here and recorded into the histograms
            // once per read with `record_n` rather than once per reply.
            // The borrow is scoped to this block so it spans no await.
            let complete = {
                let mut g = st.borrow_mut();
                loop {
                    let parsed =
                        resp::parse(c.reader.rbuf.data()).map_err(|e| proto(&c.target, e))?;
                    let Some((reply, n)) = parsed else { break };
                    if reply != Reply::Push {
                        let (op, tx, tag) = &pend[i];
                        if g.reply(*op, tag, &reply, *tx, n, measured) {
                            counts[*op] += 1;
                        }
                        i += 1;
                    }
                    c.reader.rbuf.consume(n);
                    if i == k {
                        break;
                    }
                }
                for (op, cnt) in counts.iter_mut().enumerate() {
                    if *cnt > 0 {
                        g.latency(op, t_read - t0, *cnt);
                        *cnt = 0;
                    }
                }
                if i == k && measured {
                    g.last_done = Some(t_read);
                }
                i == k
            };
            if complete {
                break;
            }
            c.reader.fill().await?;
            t_read = Instant::now();
        }
    }
    Ok(())
}

/// A request the open loop's writer sent, queued for the reader to match
/// with its reply (replies come back in send order).
struct Sent {
    /// Index of the operation in the phase.
    op: usize,
    /// Request size in bytes.
    tx: usize,
    /// When the schedule said to send it: latency counts from here.
    intended: Instant,
    /// When it was written: service time counts from here.
    actual: Instant,
    /// Whether it was due after warm-up.
    measured: bool,
    /// What `--verify` expects of the reply.
    tag: Tag,
}

/// Drives one connection in the open loop (see the module docs): request
/// `n` is due at `start + offset + n * every`. `offset` staggers the
/// connections so their sends interleave instead of arriving in bursts;
/// `max_batch` bounds how much one catch-up write may carry.
#[allow(clippy::too_many_arguments)]
async fn open_loop(
    c: Conn,
    mut enc: Encoder,
    sh: Arc<Shared>,
    st: Stats,
    every: Duration,
    offset: Duration,
    max_batch: usize,
) -> Result<(), Error> {
    let Conn {
        mut reader,
        mut wr,
        target,
    } = c;
    let (qtx, mut qrx) = tokio::sync::mpsc::unbounded_channel::<Sent>();
    let sh2 = Arc::clone(&sh);
    let writer = async move {
        let sh = sh2;
        let t_start = sh.start + offset;
        let at = |n: u64| t_start + every.mul_f64(n as f64);
        let mut n: u64 = 0;
        let mut wbuf = Vec::with_capacity(4096);
        let mut batch: Vec<Sent> = Vec::new();
        'run: loop {
            let intended = at(n);
            if sh.over(intended) {
                break;
            }
            let now = Instant::now();
            if intended > now {
                tokio::time::sleep_until(intended.into()).await;
                continue;
            }
            // Send everything that is due: when behind, catch up at once, as
            // a real open-loop client population would.
            wbuf.clear();
            let mut done = false;
            while batch.len() < max_batch {
                let it = at(n);
                if it > now || sh.over(it) {
                    break;
                }
                let measured = it >= sh.measure_start;
                if measured && sh.claim(1) == 0 {
                    done = true;
                    break;
                }
                let op = enc.pick();
                let before = wbuf.len();
                let tag = enc.encode(op, &mut wbuf, None);
                batch.push(Sent {
                    op,
                    tx: wbuf.len() - before,
                    intended: it,
                    actual: now,
                    measured,
                    tag,
                });
                n += 1;
            }
            let actual = Instant::now();
            for mut s in batch.drain(..) {
                s.actual = actual;
                // The reader lives as long as we do unless it failed, in
                // which case its error is the one reported.
                if qtx.send(s).is_err() {
                    break 'run;
                }
            }
            if !wbuf.is_empty() {
                wr.write_all(&wbuf).await.map_err(|source| Error::Io {
                    target: target.clone(),
                    source,
                })?;
            }
            if done {
                break;
            }
        }
        drop(qtx);
        Ok::<(), Error>(())
    };
    let reader_task = async {
        // Like the closed loop, the clock is read once per read: replies
        // that arrived together are stamped together.
        let mut t_read = Instant::now();
        while let Some(s) = qrx.recv().await {
            loop {
                let parsed =
                    resp::parse(reader.rbuf.data()).map_err(|e| proto(&reader.target, e))?;
                match parsed {
                    Some((Reply::Push, n)) => reader.rbuf.consume(n),
                    Some((reply, n)) => {
                        let mut g = st.borrow_mut();
                        g.record(
                            s.op,
                            &s.tag,
                            &reply,
                            s.tx,
                            n,
                            t_read.saturating_duration_since(s.intended),
                            Some(t_read.saturating_duration_since(s.actual)),
                            s.measured,
                        );
                        if s.measured {
                            g.last_done = Some(t_read);
                        }
                        drop(g);
                        reader.rbuf.consume(n);
                        break;
                    }
                    None => {
                        reader.fill().await?;
                        t_read = Instant::now();
                    }
                }
            }
        }
        Ok::<(), Error>(())
    };
    let (w, r) = tokio::join!(writer, reader_task);
    if w.is_err() || r.is_err() {
        sh.stop.store(true, Ordering::Relaxed);
    }
    r?;
    w
}

/// The body of one worker thread: connects its share of the connections
/// (`conn_ids`), runs them to the end of the phase and returns its figures.
///
/// Start-up is a two-step barrier with the main thread. Every thread
/// connects, then waits once; the main thread, now knowing everyone is
/// connected (or that someone failed and set `abort`), fixes the start time
/// in `shared`, and a second wait publishes it. A thread that failed still
/// takes part in both waits, or the others would block forever. Each
/// completed second goes to the main thread over `itx`.
#[allow(clippy::too_many_arguments)]
fn thread_main(
    conn_ids: Vec<usize>,
    target: Target,
    wl: Arc<Workload>,
    phase: Arc<Phase>,
    cfg: Arc<RunCfg>,
    shared: Arc<Mutex<Option<Arc<Shared>>>>,
    barrier: Arc<Barrier>,
    abort: Arc<AtomicBool>,
    itx: mpsc::Sender<(u64, Interval)>,
) -> Result<ThreadStats, Error> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime);
    let conns = match &rt {
        Ok(rt) => rt.block_on(async {
            let mut v = Vec::with_capacity(conn_ids.len());
            for _ in &conn_ids {
                v.push(Conn::connect(&target, &cfg.conn).await?);
            }
            Ok::<_, Error>(v)
        }),
        Err(_) => Ok(Vec::new()),
    };
    if conns.is_err() || rt.is_err() {
        abort.store(true, Ordering::SeqCst);
    }
    barrier.wait();
    barrier.wait();
    let rt = rt?;
    let conns = conns?;
    let sh = match shared.lock() {
        Ok(g) => g.clone(),
        Err(p) => p.into_inner().clone(),
    };
    let Some(sh) = sh else {
        return Err(Error::WorkerPanic);
    };
    let names: Vec<&str> = phase.ops.iter().map(|o| o.name.as_str()).collect();
    let st: Stats = Rc::new(RefCell::new(ThreadStats {
        ops: names.iter().map(|n| OpStats::new(n)).collect(),
        interval: names.iter().map(|_| new_hist()).collect(),
        interval_errors: 0,
        checker: cfg.verify.then(|| Checker::new(wl.filler.clone())),
        last_done: None,
    }));
    if abort.load(Ordering::SeqCst) {
        // Another thread failed to connect and will report why; this one
        // contributes empty figures.
        return Rc::try_unwrap(st)
            .map(RefCell::into_inner)
            .map_err(|_| Error::WorkerPanic);
    }
    // Sends the current second's histograms as interval `idx` and starts a
    // new second.
    let flush = {
        let st = Rc::clone(&st);
        move |idx: u64| {
            let mut g = st.borrow_mut();
            let hists = g
                .interval
                .iter_mut()
                .map(|h| {
                    let c = h.clone();
                    h.reset();
                    c
                })
                .collect();
            let errors = std::mem::take(&mut g.interval_errors);
            // The main thread only stops listening once every thread is done.
            let _ = itx.send((idx, Interval { hists, errors }));
        }
    };
    let local = tokio::task::LocalSet::new();
    let total = cfg.connections.max(1) as u64;
    let result = local.block_on(&rt, async {
        let mut handles = Vec::new();
        for (c, id) in conns.into_iter().zip(conn_ids) {
            let enc = Encoder::new(
                &wl,
                Arc::clone(&phase),
                cfg.seed
                    .wrapping_add((id as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
                id as u64,
                total,
                cfg.verify,
            );
            let sh = Arc::clone(&sh);
            let st = Rc::clone(&st);
            handles.push(match cfg.rate {
                None => tokio::task::spawn_local(closed_loop(c, enc, sh, st, wl.pipeline)),
                Some(rate) => {
                    let every = Duration::from_secs_f64(total as f64 / rate.max(1e-6));
                    let offset = every.mul_f64(id as f64 / total as f64);
                    let batch = wl.pipeline.max(64);
                    tokio::task::spawn_local(open_loop(c, enc, sh, st, every, offset, batch))
                }
            });
        }
        let ticker = {
            let flush = flush.clone();
            let ms = sh.measure_start;
            tokio::task::spawn_local(async move {
                let mut k = 0u64;
                loop {
                    tokio::time::sleep_until((ms + Duration::from_secs(k + 1)).into()).await;
                    flush(k);
                    k += 1;
                }
            })
        };
        let mut first_err = None;
        for h in handles {
            let r = match h.await {
                Ok(r) => r,
                Err(_) => Err(Error::WorkerPanic),
            };
            if let Err(e) = r {
                sh.stop.store(true, Ordering::Relaxed);
                first_err.get_or_insert(e);
            }
        }
        ticker.abort();
        let now = Instant::now();
        if now >= sh.measure_start {
            flush((now - sh.measure_start).as_secs());
        }
        first_err.map_or(Ok(()), Err)
    });
    // Drop every other holder of `st` (tasks in the set, the flush
    // closure) so that the figures can be taken out of the `Rc`.
    drop(local);
    drop(flush);
    result?;
    Rc::try_unwrap(st)
        .map(RefCell::into_inner)
        .map_err(|_| Error::WorkerPanic)
}

/// Runs the phase's preparation on one connection, pipelined, before any
/// worker starts: every `Prepare` step runs its ops for each key in turn,
/// in batches of roughly 512 commands or 1 MiB so neither side buffers
/// without bound. Any error reply aborts the run (`Error::Prepare`).
pub fn prepare(
    target: &Target,
    wl: &Workload,
    phase: &Phase,
    opts: &ConnOpts,
) -> Result<(), Error> {
    if phase.prepare.is_empty() {
        return Ok(());
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    rt.block_on(async {
        let mut c = Conn::connect(target, opts).await?;
        for p in &phase.prepare {
            let ph = Arc::new(Phase {
                ops: p.ops.clone(),
                prepare: Vec::new(),
            });
            let mut enc = Encoder::new(wl, ph, 1, 0, 1, false);
            let mut buf = Vec::new();
            let mut queued = 0usize;
            let mut k = 0u64;
            while k < p.keys || queued > 0 {
                if k < p.keys && buf.len() < 1 << 20 && queued < 512 {
                    for i in 0..p.ops.len() {
                        enc.encode(i, &mut buf, Some(k));
                        queued += 1;
                    }
                    k += 1;
                    continue;
                }
                c.send(&buf).await?;
                buf.clear();
                for _ in 0..queued {
                    let err = c.reader.read_reply(|r| r.error_message()).await?;
                    if let Some(reply) = err {
                        return Err(Error::Prepare {
                            target: target.name.clone(),
                            reply,
                        });
                    }
                }
                queued = 0;
            }
        }
        Ok(())
    })
}

/// Connects once to `target` and runs `Conn::probe` on it: fails when the
/// server refuses commands (say, a password is missing), and otherwise
/// returns its version fields.
pub fn probe(target: &Target, opts: &ConnOpts) -> Result<Vec<(String, String)>, Error> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    rt.block_on(async {
        let mut c = Conn::connect(target, opts).await?;
        c.probe().await
    })
}

/// Runs one phase against one target and gathers its figures.
pub fn run_phase(
    target: &Target,
    wl: &Arc<Workload>,
    phase: &Arc<Phase>,
    cfg: &Arc<RunCfg>,
    label: &str,
) -> Result<PhaseResult, Error> {
    prepare(target, wl, phase, &cfg.conn)?;
    let threads = cfg.threads.clamp(1, cfg.connections.max(1));
    let barrier = Arc::new(Barrier::new(threads + 1));
    let abort = Arc::new(AtomicBool::new(false));
    let shared: Arc<Mutex<Option<Arc<Shared>>>> = Arc::new(Mutex::new(None));
    let (itx, irx) = mpsc::channel::<(u64, Interval)>();
    let mut handles = Vec::new();
    for t in 0..threads {
        // Round-robin, so every thread gets an equal share (within one).
        let ids: Vec<usize> = (0..cfg.connections.max(1))
            .filter(|i| i % threads == t)
            .collect();
        let (target, wl, phase, cfg) = (
            target.clone(),
            Arc::clone(wl),
            Arc::clone(phase),
            Arc::clone(cfg),
        );
        let (shared, barrier, abort, itx) = (
            Arc::clone(&shared),
            Arc::clone(&barrier),
            Arc::clone(&abort),
            itx.clone(),
        );
        let h = std::thread::Builder::new()
            .name(format!("loadgen-{t}"))
            .spawn(move || thread_main(ids, target, wl, phase, cfg, shared, barrier, abort, itx))
            .map_err(Error::Runtime)?;
        handles.push(h);
    }
    drop(itx);
    barrier.wait();
    let start = Instant::now();
    let measure_start = start + cfg.warmup;
    let sh = Arc::new(Shared {
        start,
        measure_start,
        end: cfg.duration.map(|d| measure_start + d),
        requests: cfg.requests,
        claimed: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    });
    match shared.lock() {
        Ok(mut g) => *g = Some(Arc::clone(&sh)),
        Err(p) => *p.into_inner() = Some(Arc::clone(&sh)),
    }
    barrier.wait();

    // Gather the threads' seconds until every sender is gone. Waiting a
    // little past each second boundary gives all threads time to report
    // that second before the live line prints it.
    let nops = phase.ops.len();
    let mut intervals: Vec<Interval> = Vec::new();
    let mut printed = 0u64;
    let mut done_ops = 0u64;
    let live = cfg.live.clone();
    loop {
        let deadline = measure_start + Duration::from_secs(printed + 1) + Duration::from_millis(30);
        let wait = deadline.saturating_duration_since(Instant::now());
        match irx.recv_timeout(wait) {
            Ok((idx, iv)) => {
                let idx = idx as usize;
                while intervals.len() <= idx {
                    intervals.push(Interval {
                        hists: (0..nops).map(|_| new_hist()).collect(),
                        errors: 0,
                    });
                }
                let slot = &mut intervals[idx];
                for (a, b) in slot.hists.iter_mut().zip(&iv.hists) {
                    let _ = a.add(b);
                }
                slot.errors += iv.errors;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let (Some(live), Some(iv)) = (&live, intervals.get(printed as usize)) {
                    let mut all = new_hist();
                    for h in &iv.hists {
                        let _ = all.add(h);
                    }
                    done_ops += all.len();
                    live.print(
                        label,
                        printed + 1,
                        &all,
                        iv.errors,
                        done_ops,
                        cfg.requests,
                        cfg.duration,
                    );
                }
                printed += 1;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    if let Some(live) = &live {
        live.finish();
    }
    let mut ops: Vec<OpStats> = phase.ops.iter().map(|o| OpStats::new(&o.name)).collect();
    let mut verify = VerifyOutcome::default();
    let mut last_done: Option<Instant> = None;
    let mut first_err = None;
    for h in handles {
        match h.join() {
            Ok(Ok(out)) => {
                for (a, b) in ops.iter_mut().zip(&out.ops) {
                    a.merge(b);
                }
                if let Some(ch) = out.checker {
                    verify.checked += ch.checked;
                    verify.mismatches += ch.mismatches;
                    for s in ch.samples {
                        if verify.samples.len() < crate::verify::MAX_SAMPLES {
                            verify.samples.push(s);
                        }
                    }
                }
                last_done = last_done.max(out.last_done);
            }
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(_) => {
                first_err.get_or_insert(Error::WorkerPanic);
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    let elapsed = last_done.map_or(Duration::ZERO, |t| {
        t.saturating_duration_since(measure_start)
    });
    Ok(PhaseResult {
        ops,
        elapsed,
        intervals,
        verify,
    })
}
