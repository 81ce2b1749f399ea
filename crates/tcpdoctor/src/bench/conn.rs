//! One benchmark connection: connect, send what the conversation allows, read, time, repeat.
//!
//! 1. Up to `--pipeline` requests are outstanding. Requests that can go together leave in one
//!    `write` (a pipelined batch is one syscall), unless `--split-writes` asks for each request
//!    in pieces, each its own `write` — the write-write-read client of PHYSICS §3.
//! 2. Closed loop: a request's intended start is the moment a slot frees — for the first
//!    requests on a reopened connection, the moment the previous one ended, so the connect
//!    is charged to the exchange that waited for it. Open loop: the slots of a fixed
//!    per-connection schedule; a late connection sends at once and keeps the slot's time, so
//!    the wait counts in the latency. A slot is waited for on a `timerfd` armed a little
//!    before it, then by yielding until the clock reads it (`proxy/timer.rs`): requests leave
//!    within microseconds of their slot, not tokio's millisecond late. How late the driver
//!    itself sent each request (from the later of its slot and the moment the connection
//!    could send) is recorded, and the yielding's CPU is counted apart from the driver's work.
//!    Closed loop on one connection: while answers come within [`POLL_NS`] of their request,
//!    the driver looks for the answer without sleeping for up to [`POLL_NS`] (a `recv` that
//!    never waits, then `sched_yield`, so a server on the same CPU runs) before it sleeps in
//!    the poller. A driver asleep wakes up late (tens of microseconds on a VM whose idle
//!    vCPUs halt), and that wake-up would be in every exchange's latency as if the server
//!    had taken it. The polling is the driver's CPU, counted apart from its work (as the open
//!    loop's yielding is). An answer that took longer than [`POLL_NS`] stops the polling until one
//!    comes within it again: a distant server costs no spinning.
//!    Open loop (unless `--spin 0`): the same looking, on any number of connections, between
//!    looks yielding to the thread's other connections (a tokio yield) as well as to the CPU,
//!    and ending early at a slot that comes due; before each slot the connection stays awake
//!    for `--spin` (`proxy/timer.rs` rule 4). The spinning is counted per thread, and every
//!    poll of a connection settles it first (`crate::spin`), so one connection's work done
//!    during another's yield is not counted as spin.
//! 3. The oldest outstanding request not answered within `--timeout` costs a timeout for every
//!    outstanding request and a new connection; so does a response the framing rejects (an
//!    error) or the peer closing with requests outstanding.
//! 4. A conversation that finishes its script is closed and a new one starts on a new
//!    connection; connect failures back off (10 ms doubling to 1 s) and are counted by reason.
//! 5. A server that closes after a complete response (HTTP `Connection: close`, a keep-alive
//!    limit, a close-delimited body) is reopened as curl and wrk do: a reconnect, counted,
//!    not an error; requests pipelined behind the closing response are re-sent on the new
//!    connection with their intended times (their budget was already taken). So is a
//!    connection that got through its setup and answered a request, and is then closed or
//!    reset with requests outstanding
//!    and not one byte of their answers received (a keep-alive connection the server closed
//!    while idle, as nginx's `keepalive_timeout` does, just as a request left): those requests
//!    are re-sent once on a new connection, as curl does; a fresh connection that fails the
//!    same way is an error.
//! 6. An assertion of the greeting or a `[[setup]]` step that fails (a login refused) ends the
//!    connection: nothing after it can succeed there. So does a connection closed, reset,
//!    timed out or answered with bytes the framing rejects before its setup was done (a server
//!    that hangs up on a bad password). It is retried on a new connection after a back-off of
//!    its own (100 ms, doubling per failure in a row of that connection, at most 2 s); after
//!    [`MAX_SETUP_FAILURES`] such failures in a row over all connections the run stops and
//!    the command exits 2 with the server's answer. A connection that gets through its setup
//!    starts both counts again.
//! 7. (`run`) The first connections ([`tcpdoctor_core::message_ends::MAX_CONNECTIONS`]) record
//!    where each request they wrote and each response their framing read ended in its byte
//!    stream — a push per message, none past [`tcpdoctor_core::message_ends::MAX_ENDS`] — and
//!    hand the offsets in when they end: the analysis's proof of where messages begin.

use std::collections::VecDeque;
use std::io;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tcpdoctor_core::flow::Direction;
use tcpdoctor_core::message_ends::ConnectionEnds;
use tcpdoctor_core::script::{Completed, Conversation};
use tcpdoctor_core::Timestamp;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};

#[cfg(doc)]
use super::recorder::MAX_SETUP_FAILURES;
use super::recorder::{Local, Recorder};
use super::{BenchConfig, SplitWrites};
use crate::proxy::timer::Timer;
use crate::proxy::Addr;

const READ_BUF: usize = 64 * 1024;
const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);
const SETUP_BACKOFF_MIN: Duration = Duration::from_millis(100);

/// A connected socket.
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

pub async fn connect(cfg: &BenchConfig) -> io::Result<Stream> {
    let attempt = async {
        match &cfg.target {
            Addr::Tcp(a) => {
                let s = TcpStream::connect(a).await?;
                s.set_nodelay(!cfg.nagle)?;
                Ok(Stream::Tcp(s))
            }
            Addr::Unix(p) => Ok(Stream::Unix(UnixStream::connect(p).await?)),
        }
    };
    match tokio::time::timeout(cfg.timeout, attempt).await {
        Ok(r) => r,
        Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out")),
    }
}

/// The error without the "(os error N)" suffix, lower case: "connection refused".
pub fn reason(e: &io::Error) -> String {
    let s = e.to_string();
    let s = s.split(" (os error").next().unwrap_or(&s);
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().chain(c).collect(),
        None => "unknown error".into(),
    }
}

/// A connected socket the driver can read and write.
///
/// After a read shorter than the buffer, tokio itself forgets the socket's cached readiness
/// (with the readiness event it read under), so the next read waits for the poller without a
/// `read` that can only say EAGAIN. Clearing it again afterwards (`try_io` with a would-block
/// closure) is a lost wake-up on a multi-thread runtime: bytes that arrived after the read
/// and whose edge another worker already took are forgotten, and the connection times out
/// with the response in its socket (issue 12: `run` through `wan:15ms`).
trait Socket: AsyncRead + AsyncWrite + Unpin + AsRawFd {}

impl Socket for TcpStream {}

impl Socket for UnixStream {}

/// How long a one-connection closed loop looks for an answer before it sleeps (rule 2).
const POLL_NS: u64 = 200_000;

/// The open-loop schedule of one connection: slot k at `offset + k × interval`.
struct Schedule {
    offset_ns: f64,
    interval_ns: f64,
    k: u64,
}

impl Schedule {
    fn new(rate: f64, connections: u64, conn: u64) -> Schedule {
        let interval_ns = connections as f64 * 1e9 / rate;
        Schedule {
            offset_ns: interval_ns * conn as f64 / connections as f64,
            interval_ns,
            k: 0,
        }
    }

    fn due(&self) -> Timestamp {
        Timestamp((self.offset_ns + self.k as f64 * self.interval_ns) as u64)
    }
}

/// How a connection ended.
enum End {
    /// The script finished: start it again on a new connection.
    Finished,
    /// Timeout, bad response, peer closed: a new connection.
    Reconnect,
    /// Nothing more may be sent: the connection task is done.
    Done,
    /// An assertion of the greeting or a `[[setup]]` step failed (a refused login): the
    /// conversation cannot go on; retried on a new connection after a back-off (rule 6).
    SetupFailed(String),
}

/// Buffers one connection task keeps across its TCP connections.
struct Io {
    read: Vec<u8>,
    write: Vec<u8>,
    sent_at: VecDeque<Timestamp>,
    /// Responses one read completed (reused: no allocation per read).
    done: Vec<Completed>,
    /// Intended times of requests the server will not answer on the connection it closed
    /// (rule 5): re-sent first on the next one.
    retry: VecDeque<Timestamp>,
    /// Closed loop: when the previous connection ended, the intended start of the first
    /// requests on the next (rule 2).
    resume_at: Option<Timestamp>,
    /// Per step: part of the setup (greeting or `[[setup]]`)?
    setup_steps: Vec<bool>,
    /// The failed setup assertion of the current connection (rule 6).
    setup_failed: Option<String>,
    /// The current connection got through its setup (a non-setup exchange completed).
    setup_done: bool,
    /// Why the current connection ended with an error (a close, reset, timeout or bad
    /// response): before its setup was done, that is a setup failure too (rule 6).
    ended_badly: Option<String>,
    /// This task's setups that failed in a row: its back-off.
    setup_fails: u64,
    /// Bytes of the oldest outstanding answer arrived, not all of it (`timeline.rs`).
    partial: bool,
    /// What this connection last told the timeline: it owes an answer not begun.
    owing: bool,
    /// What this connection last told the timeline: an answer begun, not complete.
    told_partial: bool,
    /// Where this connection's messages ended, when it is one `run` records (rule 7).
    ends: Option<ConnectionEnds>,
}

/// The task of connection number `id`, until the run ends; `first` is a connection already
/// made for it.
pub async fn run(cfg: Arc<BenchConfig>, rec: Arc<Recorder>, id: u64, mut first: Option<Stream>) {
    let mut local = Local::new(rec.clone(), id);
    let mut io = Io {
        read: vec![0; READ_BUF],
        write: Vec::with_capacity(4096),
        sent_at: VecDeque::with_capacity(cfg.pipeline),
        done: Vec::with_capacity(cfg.pipeline),
        retry: VecDeque::new(),
        resume_at: None,
        setup_steps: (0..cfg.script.step_names().len())
            .map(|i| cfg.script.is_setup(tcpdoctor_core::script::StepId(i)))
            .collect(),
        setup_failed: None,
        setup_done: false,
        ended_badly: None,
        setup_fails: 0,
        partial: false,
        owing: false,
        told_partial: false,
        ends: None,
    };
    let has_setup = io.setup_steps.iter().any(|&s| s);
    let mut schedule = cfg.rate.map(|r| Schedule::new(r, cfg.connections, id));
    // Without a timerfd (fd limit reached), tokio's millisecond timer still wakes the slots.
    let timer = cfg.rate.and_then(|_| Timer::awake(cfg.spin).ok());
    let mut backoff = BACKOFF_MIN;
    let mut round = 0u64;
    loop {
        if rec.is_stopped() || (io.retry.is_empty() && rec.take_would_fail(rec.clock.now())) {
            return;
        }
        let attempt = match first.take() {
            Some(s) => Ok(s),
            None => connect(&cfg).await,
        };
        let stream = match attempt {
            Ok(s) => s,
            Err(e) => {
                rec.errors().add_connect_reason(&reason(&e), 1);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        };
        backoff = BACKOFF_MIN;
        rec.connections_opened
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let seed = cfg
            .seed
            .wrapping_add(id.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .wrapping_add(round);
        round += 1;
        io.setup_done = false;
        io.ended_badly = None;
        let mut conv = Conversation::new(cfg.script.clone(), id, seed);
        let now = rec.clock.now();
        // `now_unix()` in templates: the wall clock, read here so the core reads none.
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        conv.set_wall_clock(unix, now);
        conv.connected(now);
        let mut d = Driver {
            cfg: &cfg,
            rec: &rec,
            local: &mut local,
            io: &mut io,
            schedule: schedule.as_mut(),
            timer: timer.as_ref(),
            conv: &mut conv,
        };
        let end = match stream {
            Stream::Tcp(s) => {
                d.io.ends = recorded_ends(&cfg, &s);
                d.drive(s).await
            }
            Stream::Unix(s) => d.drive(s).await,
        };
        if let (Some(log), Some(ends)) = (&cfg.message_ends, io.ends.take()) {
            log.hand_in(ends);
        }
        io.partial = false;
        if let Some(t) = &cfg.timeline {
            t.set(&mut io.owing, false);
        }
        let end = match (io.setup_failed.take(), io.ended_badly.take()) {
            (Some(answer), _) => End::SetupFailed(answer),
            (None, Some(why)) if has_setup && !io.setup_done => {
                End::SetupFailed(format!("{why}, before the setup was done"))
            }
            _ => end,
        };
        match end {
            End::Finished | End::Reconnect => {
                if cfg.rate.is_none() {
                    io.resume_at.get_or_insert(rec.clock.now());
                }
            }
            End::SetupFailed(answer) => {
                rec.setup_failed(&answer);
                if rec.is_stopped() {
                    return;
                }
                io.setup_fails += 1;
                tokio::time::sleep(setup_backoff(io.setup_fails)).await;
                if cfg.rate.is_none() {
                    io.resume_at.get_or_insert(rec.clock.now());
                }
            }
            End::Done => return,
        }
    }
}

/// A recorder of this connection's message ends, when `run` asks for them and it is one of
/// the first connections (rule 7).
fn recorded_ends(cfg: &BenchConfig, s: &TcpStream) -> Option<ConnectionEnds> {
    let log = cfg.message_ends.as_ref()?;
    let (local, peer) = (s.local_addr().ok()?, s.peer_addr().ok()?);
    log.claim().then(|| {
        let ep = |a: std::net::SocketAddr| tcpdoctor_core::wire::Endpoint {
            ip: a.ip(),
            port: a.port(),
        };
        ConnectionEnds::new(ep(local), ep(peer))
    })
}

/// The wait before the `n`th setup retry in a row: 100 ms, doubling, at most 2 s.
fn setup_backoff(n: u64) -> Duration {
    (SETUP_BACKOFF_MIN * 2u32.saturating_pow(n.saturating_sub(1).min(16) as u32))
        .min(BACKOFF_MAX * 2)
}

struct Driver<'a> {
    cfg: &'a BenchConfig,
    rec: &'a Recorder,
    local: &'a mut Local,
    io: &'a mut Io,
    schedule: Option<&'a mut Schedule>,
    /// Open loop: waits for the slots to the microsecond.
    timer: Option<&'a Timer>,
    conv: &'a mut Conversation,
}

impl Driver<'_> {
    async fn drive<S: Socket>(&mut self, mut s: S) -> End {
        let clock = self.rec.clock;
        self.io.sent_at.clear();
        let far = clock.instant(clock.now()) + Duration::from_secs(86_400 * 365);
        let sleep = tokio::time::sleep_until(far);
        tokio::pin!(sleep);
        let mut armed = far;
        // The last time bytes moved either way: silence (idle framing, an awaited greeting) is
        // counted from here.
        let mut last_io = clock.now();
        // One clock read per wake-up: the time a read or timer returned is also when the
        // slots it freed became free, the intended start of the requests sent next.
        let mut now = last_io;
        // Since when the connection could send (rule 2's lateness): it is open, and a
        // pipeline slot was free while it waited for the schedule.
        let mut room_at = now;
        let mut free = false;
        // Rule 2: whether this connection looks for its answers without sleeping (a closed
        // loop on one connection, an open loop unless --spin 0), and whether answers have
        // lately come within POLL_NS.
        let open_loop = self.schedule.is_some();
        let looks = if open_loop {
            !self.cfg.spin.is_zero()
        } else {
            self.cfg.connections == 1
        };
        let mut quick = true;
        loop {
            // A refused setup: nothing after it can succeed on this connection (rule 6).
            if self.io.setup_failed.is_some() {
                return End::Reconnect;
            }
            if !free {
                room_at = now;
            }
            let sent_before = self.io.sent_at.len();
            let (slot, blocked) = match self.issue(&mut s, now, room_at).await {
                Ok(x) => x,
                Err(e) => return self.lost(&reason(&e), e.kind()),
            };
            if self.io.sent_at.len() != sent_before {
                last_io = now;
                self.tell_timeline();
            }
            free = blocked == Blocked::Schedule;
            if self.conv.is_finished() {
                return End::Finished;
            }
            let outstanding = self.conv.outstanding();
            if outstanding == 0 && blocked == Blocked::Run {
                return End::Done;
            }
            // Nothing sent but something awaited (a greeting, a capture): time out from the
            // last bytes (or the connect).
            let timeout_at = match self.io.sent_at.front() {
                Some(&t) => Some(t.plus(self.cfg.timeout)),
                None if outstanding > 0 || blocked == Blocked::Script => {
                    Some(last_io.plus(self.cfg.timeout))
                }
                None => None,
            };
            let idle_at = self.conv.idle_period().map(|d| last_io.plus(d));
            let precise_slot = slot.filter(|_| self.timer.is_some());
            let tokio_slot = slot.filter(|_| self.timer.is_none());
            let wake = [timeout_at, idle_at, tokio_slot]
                .into_iter()
                .flatten()
                .min();
            let wake = wake.map_or(far, |t| clock.instant(t));
            // The timeout deadline moves forward with every answer; re-arming the timer each
            // time would cost a timer-wheel update per exchange. A timer armed too early just
            // wakes the loop once, which re-arms it.
            if wake < armed {
                sleep.as_mut().reset(wake);
                armed = wake;
            }
            if looks && quick && outstanding > 0 {
                // Never past the timeout (an answer later than that is a timeout), nor past a
                // slot that comes due meanwhile.
                let until = [timeout_at, slot]
                    .into_iter()
                    .flatten()
                    .fold(clock.now().plus(Duration::from_nanos(POLL_NS)), Ord::min);
                if let Some(r) = self.look_for_answer(s.as_raw_fd(), until, open_loop).await {
                    now = clock.now();
                    quick = self.answered_within(now, POLL_NS);
                    if let Some(end) = self.on_read(r, now, &mut last_io) {
                        return end;
                    }
                    continue;
                }
                if slot.is_some_and(|t| clock.now() >= t) {
                    now = clock.now();
                    continue;
                }
            }
            tokio::select! {
                biased;
                r = s.read(&mut self.io.read) => {
                    now = clock.now();
                    quick = self.answered_within(now, POLL_NS);
                    if let Some(end) = self.on_read(r, now, &mut last_io) {
                        return end;
                    }
                }
                r = slot_wait(self.timer, precise_slot.map(|t| clock.std_instant(t))),
                    if precise_slot.is_some() => {
                    // A timerfd that fails is given up for the rest of this connection:
                    // tokio's timer wakes its slots (a millisecond late, as without one),
                    // rather than a wait that returns at once and spins to the slot.
                    if r.is_err() {
                        self.timer = None;
                    }
                    now = clock.now();
                }
                () = &mut sleep => {
                    armed = far;
                    now = clock.now();
                    if idle_at.is_some_and(|t| now >= t) {
                        let mut v = self.conv.on_idle(now);
                        self.completed(&mut v);
                    } else if timeout_at.is_some_and(|t| now >= t) {
                        let n = (self.conv.outstanding() as u64).max(1);
                        self.rec.errors().timeouts += n;
                        self.io.ended_badly = Some(format!(
                            "no answer within {}",
                            tcpdoctor_core::units::fmt_duration(self.cfg.timeout)
                        ));
                        return End::Reconnect;
                    }
                }
            }
        }
    }

    /// What a read brought: the exchanges it completed, or how the connection ends.
    fn on_read(
        &mut self,
        r: io::Result<usize>,
        now: Timestamp,
        last_io: &mut Timestamp,
    ) -> Option<End> {
        match r {
            Ok(0) => Some(self.eof(now)),
            Ok(n) => {
                self.local.received(n);
                *last_io = now;
                let mut done = std::mem::take(&mut self.io.done);
                let r = self.conv.on_bytes_into(&self.io.read[..n], now, &mut done);
                // Bytes that completed no answer began one (or continued it); an answer
                // completed leaves the next one not begun, as far as the driver can tell.
                self.io.partial = done.is_empty();
                self.completed(&mut done);
                self.io.done = done;
                if let Some(t) = &self.cfg.timeline {
                    t.arrived();
                }
                self.tell_timeline();
                if let Err(e) = r {
                    return Some(self.bad_response(&e.to_string()));
                }
                if self.conv.server_closes() {
                    return Some(self.server_closed(now));
                }
                None
            }
            Err(e) => Some(self.lost(&reason(&e), e.kind())),
        }
    }

    /// Tells `run`'s timeline whether this connection owes an answer not begun: a request is
    /// out beyond the one whose answer is arriving.
    fn tell_timeline(&mut self) {
        if let Some(t) = &self.cfg.timeline {
            let out = self.io.sent_at.len();
            self.io.partial &= out > 0;
            t.set(&mut self.io.owing, out > usize::from(self.io.partial));
            t.set_partial(&mut self.io.told_partial, self.io.partial);
        }
    }

    /// Whether the oldest outstanding request (the one a read at `now` answers first) was
    /// sent within `ns` before it; true when none is outstanding.
    fn answered_within(&self, now: Timestamp, ns: u64) -> bool {
        self.io
            .sent_at
            .front()
            .is_none_or(|t| now.0.saturating_sub(t.0) <= ns)
    }

    /// Rule 2: looks for the answer without sleeping until `until`: a `recv` that never
    /// waits, then `sched_yield` (a server on this CPU runs first) and, in an open loop
    /// (`cooperative`), a tokio yield so the thread's other connections run too. What a `recv`
    /// gave (bytes, end of stream or an error), or None when nothing came by `until`. The
    /// looking is marked as spin (`crate::spin`) from the first `recv` that found nothing, and
    /// settled here, so what follows is work; the `recv` that brings the answer is counted in
    /// the spin (about a microsecond). The socket's readiness in the poller is left alone: at
    /// worst the next `read` there finds nothing and waits for the next edge.
    async fn look_for_answer(
        &mut self,
        fd: std::os::fd::RawFd,
        until: Timestamp,
        cooperative: bool,
    ) -> Option<io::Result<usize>> {
        let clock = self.rec.clock;
        let got = loop {
            if let Some(r) = self.try_recv(fd) {
                break Some(r);
            }
            if clock.now() >= until {
                break None;
            }
            crate::spin::yielding();
            // SAFETY: sched_yield takes no arguments.
            unsafe { libc::sched_yield() };
            if cooperative {
                tokio::task::yield_now().await;
            }
        };
        self.local.spun(crate::spin::settle());
        got
    }

    /// One `recv` that never waits: bytes, end of stream or an error; None when nothing is
    /// there yet.
    fn try_recv(&mut self, fd: std::os::fd::RawFd) -> Option<io::Result<usize>> {
        loop {
            let buf = &mut self.io.read;
            // SAFETY: recv(2) into our buffer, never waiting.
            let n =
                unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
            if n >= 0 {
                return Some(Ok(n as usize));
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::WouldBlock => return None,
                io::ErrorKind::Interrupted => continue,
                _ => return Some(Err(e)),
            }
        }
    }

    /// Sends what may be sent now. Returns the next open-loop slot still to come, and what
    /// stopped the sending.
    async fn issue<S: AsyncWrite + Unpin>(
        &mut self,
        s: &mut S,
        now: Timestamp,
        room_at: Timestamp,
    ) -> io::Result<(Option<Timestamp>, Blocked)> {
        let rec = self.rec;
        let mut slot = None;
        let mut blocked = Blocked::Pipeline;
        let mut held: Option<super::recorder::Ticket> = None;
        self.io.write.clear();
        let sent_before = self.io.sent_at.len();
        while self.conv.outstanding() < self.cfg.pipeline {
            // A request the server closed on (rule 5) goes first, under its own intended time.
            let retry = self.io.retry.front().copied();
            let intended = match (retry, &self.schedule) {
                (Some(_), _) if rec.is_stopped() => {
                    blocked = Blocked::Run;
                    break;
                }
                (Some(t), _) => t,
                (None, Some(sch)) if sch.due() > now => {
                    slot = Some(sch.due());
                    blocked = Blocked::Schedule;
                    break;
                }
                (None, Some(sch)) => sch.due(),
                (None, None) => self.io.resume_at.unwrap_or(now),
            };
            // Closed loop: one ticket for the whole batch; open loop: one per slot (each slot
            // has its own intended time, on either side of the warmup's end).
            if retry.is_none() && !matches!(&held, Some(t) if t.left > 0) {
                let want = if self.schedule.is_some() {
                    1
                } else {
                    (self.cfg.pipeline - self.conv.outstanding()) as u64
                };
                held = rec.take(intended, want);
                if held.is_none() {
                    blocked = Blocked::Run;
                    break;
                }
            }
            // The request is appended to the batch; split writes send what came before it,
            // then its pieces.
            let at = self.io.write.len();
            let Some(req) = self.conv.next_request_into(intended, &mut self.io.write) else {
                blocked = Blocked::Script;
                break;
            };
            if retry.is_some() {
                self.io.retry.pop_front();
            } else {
                if let Some(t) = held.as_mut() {
                    t.left -= 1;
                }
                if let Some(sch) = self.schedule.as_mut() {
                    sch.k += 1;
                }
            }
            if self.schedule.is_some() {
                self.local
                    .sent_late(intended, now.since(intended.max(room_at)));
            }
            self.io.sent_at.push_back(now);
            self.local.sent(req.len);
            if let Some(e) = self.io.ends.as_mut() {
                e.message(Direction::ClientToServer, req.len);
            }
            if self.cfg.split == SplitWrites::Whole {
                continue;
            }
            if at > 0 {
                s.write_all(&self.io.write[..at]).await?;
            }
            let bytes = &self.io.write[at..];
            for r in pieces(req.len, self.cfg.split, req.header_len) {
                s.write_all(&bytes[r]).await?;
            }
            self.io.write.clear();
        }
        drop(held);
        if self.io.sent_at.len() != sent_before {
            self.io.resume_at = None;
        }
        if !self.io.write.is_empty() {
            s.write_all(&self.io.write).await?;
        }
        Ok((slot, blocked))
    }

    /// Records the completed responses and empties `done`.
    fn completed(&mut self, done: &mut Vec<Completed>) {
        if done.is_empty() {
            return;
        }
        self.rec
            .completed
            .fetch_add(done.len() as u64, std::sync::atomic::Ordering::Relaxed);
        for c in done.drain(..) {
            if let Some(e) = self.io.ends.as_mut() {
                e.message(Direction::ServerToClient, c.response_bytes);
            }
            if c.request_bytes > 0 {
                self.io.sent_at.pop_front();
            }
            let setup = self.io.setup_steps.get(c.step.0).copied().unwrap_or(false);
            if let Some(msg) = c.failed_assertion {
                let name = self.step_name(c.step.0);
                let example = format!("step {name}: {msg}");
                if setup {
                    self.io.setup_failed.get_or_insert_with(|| example.clone());
                }
                let mut e = self.rec.errors();
                e.assertion += 1;
                e.add_example(example);
                continue;
            }
            if c.request_bytes > 0 {
                if !setup && !self.io.setup_done {
                    self.io.setup_done = true;
                    self.io.setup_fails = 0;
                    self.rec.setup_succeeded();
                }
                self.local.exchange(c.step.0, c.intended, c.finished);
            }
        }
    }

    fn step_name(&self, i: usize) -> String {
        self.cfg
            .script
            .step_names()
            .get(i)
            .cloned()
            .unwrap_or_else(|| format!("#{i}"))
    }

    fn eof(&mut self, now: Timestamp) -> End {
        if self.silently_closed() {
            return self.server_closed(now);
        }
        match self.conv.on_eof(now) {
            Ok(mut v) => self.completed(&mut v),
            Err(e) => return self.bad_response(&e.to_string()),
        }
        let lost = self.conv.outstanding() as u64;
        if lost > 0 {
            let why = format!("the server closed the connection with {lost} request(s) unanswered");
            let mut e = self.rec.errors();
            e.closed += lost;
            e.add_example(why.clone());
            self.io.ended_badly = Some(why);
        }
        if self.conv.is_finished() {
            End::Finished
        } else {
            if lost == 0 {
                // Closed after complete responses (a close-delimited body): rule 5.
                self.rec.reconnects.fetch_add(1, Ordering::Relaxed);
                if self.schedule.is_none() {
                    self.io.resume_at.get_or_insert(now);
                }
            }
            End::Reconnect
        }
    }

    /// A response said the server closes the connection after it (rule 5): what it left
    /// unanswered is re-sent first on a new connection, and the close is a reconnect.
    fn server_closed(&mut self, at: Timestamp) -> End {
        let unanswered: Vec<Timestamp> = self.conv.unanswered().collect();
        for t in unanswered.into_iter().rev() {
            self.io.retry.push_front(t);
        }
        if self.conv.is_finished() {
            return End::Finished;
        }
        self.rec.reconnects.fetch_add(1, Ordering::Relaxed);
        if self.schedule.is_none() {
            self.io.resume_at.get_or_insert(at);
        }
        End::Reconnect
    }

    fn bad_response(&mut self, msg: &str) -> End {
        let mut e = self.rec.errors();
        e.response += 1;
        e.add_example(msg.to_string());
        self.io.ended_badly = Some(msg.to_string());
        End::Reconnect
    }

    /// Rule 5's silent close: a reused connection — one that got through its setup and
    /// answered a request — closed or reset before any byte of the answers to what was sent
    /// on it. (A close during the setup is rule 6's: a login the server hung up on.)
    fn silently_closed(&self) -> bool {
        self.io.setup_done && self.conv.closed_before_any_answer()
    }

    fn lost(&mut self, msg: &str, kind: io::ErrorKind) -> End {
        let reset = matches!(
            kind,
            io::ErrorKind::ConnectionReset
                | io::ErrorKind::BrokenPipe
                | io::ErrorKind::ConnectionAborted
        );
        if reset && self.silently_closed() {
            return self.server_closed(self.rec.clock.now());
        }
        let lost = (self.conv.outstanding() as u64).max(1);
        let why = format!("connection lost: {msg}");
        let mut e = self.rec.errors();
        e.closed += lost;
        e.add_example(why.clone());
        self.io.ended_badly = Some(why);
        End::Reconnect
    }
}

/// Waits for an open-loop slot on the timerfd (its yielding is marked as spin).
async fn slot_wait(timer: Option<&Timer>, at: Option<std::time::Instant>) -> io::Result<()> {
    match (timer, at) {
        (Some(t), Some(at)) => t.sleep_until(at).await,
        _ => std::future::pending().await,
    }
}

/// Why a connection stopped sending for now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Blocked {
    /// `--pipeline` requests are outstanding.
    Pipeline,
    /// The next open-loop slot is in the future.
    Schedule,
    /// The script waits for a response (a capture, the greeting).
    Script,
    /// The run sends no more (count reached, duration over, stopped).
    Run,
}

/// The byte ranges of one request's writes (no allocation: it runs once per request).
fn pieces(
    len: usize,
    split: SplitWrites,
    header_len: Option<usize>,
) -> impl Iterator<Item = Range<usize>> {
    let cut = match split {
        SplitWrites::Whole | SplitWrites::Pieces(_) => None,
        SplitWrites::Header => Some(header_len.unwrap_or(len)),
        SplitWrites::HeaderBytes(b) => Some(b),
    }
    .map(|c| c.min(len));
    let n = match (split, cut) {
        (_, Some(c)) if c > 0 && c < len => 2,
        (SplitWrites::Pieces(n), _) => n.clamp(1, len.max(1)),
        _ => 1,
    };
    let (q, r) = (len / n, len % n);
    let bound = move |i: usize| match cut {
        Some(c) if n == 2 => [0, c, len][i],
        _ => i * q + i.min(r),
    };
    (0..n).map(move |i| bound(i)..bound(i + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_the_request_once() {
        let p = |len, split, header| pieces(len, split, header).collect::<Vec<_>>();
        assert_eq!(p(10, SplitWrites::Pieces(3), None), vec![0..4, 4..7, 7..10]);
        assert_eq!(p(2, SplitWrites::Pieces(5), None), vec![0..1, 1..2]);
        assert_eq!(p(10, SplitWrites::HeaderBytes(4), None), vec![0..4, 4..10]);
        assert_eq!(p(10, SplitWrites::HeaderBytes(40), None), vec![0..10]);
        assert_eq!(p(10, SplitWrites::Header, Some(6)), vec![0..6, 6..10]);
        assert_eq!(p(10, SplitWrites::Header, None), vec![0..10]);
        assert_eq!(p(10, SplitWrites::Whole, None), vec![0..10]);
    }

    #[test]
    fn schedule_staggers_connections() {
        let a = Schedule::new(1000.0, 4, 0);
        let mut b = Schedule::new(1000.0, 4, 1);
        assert_eq!(a.due(), Timestamp(0));
        assert_eq!(b.due(), Timestamp(1_000_000));
        b.k = 2;
        assert_eq!(b.due(), Timestamp(9_000_000));
    }

    #[test]
    fn reasons_read_like_sentences() {
        let e = io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert_eq!(reason(&e), "connection refused");
    }
}
