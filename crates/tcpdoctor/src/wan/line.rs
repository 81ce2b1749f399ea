//! The delay line: one thread moving IP packets between the near and the far TUN device,
//! each direction through its own impairment pipeline (the core's pure state machines), and
//! writing the capture each end would take.
//!
//! Rules:
//! 1. A packet read from one device is pushed into its direction's path (the core's
//!    [`OneWayPath`]: MTU, loss, bottleneck, delay) with the time it left the sender (rule 7);
//!    what the path gives back when it is due is written to the other device at once. The thread
//!    sleeps in `ppoll` until a device is readable or shortly before the next packet is due
//!    (nanosecond timeout, timer slack 1 ns), then polls without sleeping until it is due:
//!    the delay it adds is the pipeline's plus microseconds, at the cost of a short spin per
//!    due packet.
//!    After it has read or written a packet it also *lingers*: it polls without sleeping for
//!    [`LINGER_NS`], yielding its CPU after each empty poll. An endpoint's answer (the reply
//!    to a request just delivered, the next request after a reply, the segments that follow)
//!    usually comes within that, and a thread asleep on an idle CPU reads it only once that
//!    CPU has woken up (30–50 µs on a VM whose idle vCPU halts), which would add to that
//!    packet's delay. The yield lets an endpoint the line's `write` woke run first: the
//!    kernel's TCP wake-up puts the reader on the writer's CPU, here the line's. The cost:
//!    under steady traffic (packets closer than [`LINGER_NS`]) the line keeps a CPU busy.
//!    A yield that hands the CPU away for longer than [`CONTENDED_NS`] means a thread that
//!    computes shares the line's CPU (a yield gives it the rest of its time slice,
//!    milliseconds): the line then stops lingering for [`BACKOFF_NS`] and sleeps as it did
//!    before (a sleeper's wake-up takes the CPU back at once), so such a thread costs at most
//!    one late read per [`BACKOFF_NS`].
//! 2. Addresses: the far namespace's server may listen on 127.0.0.1. Packets to the far
//!    address are rewritten to 127.0.0.1 as they enter far (the device accepts them:
//!    `route_localnet`), and the replies' source 127.0.0.1 back to the far address as they
//!    leave ([`tcpdoctor_core::wire::readdress`], checksums updated).
//! 3. The near capture holds each packet as the client's end saw it (client → server when it
//!    was read from near, server → client when it was written to near); the far capture as
//!    the server's end saw it. A packet read is recorded at the instant it entered its path
//!    (rule 7). Raw IP, pcapng, nanosecond timestamps of the host clock. A
//!    packet is recorded as the line carried it: a GSO super-packet as one record (what
//!    `tcpdump` shows on an interface with TSO or GRO), segments as segments (rule 5). Its
//!    transport checksum is recorded whole: a partial one (`NEEDS_CSUM`) is completed for the
//!    record only, the device gets it as the kernel gave it.
//! 4. Nothing is dropped here that the pipeline did not drop: a write the kernel refuses is
//!    counted and reported, and when the line is stopped it first delivers what is still in
//!    flight (at most [`DRAIN_NS`]).
//! 5. Offloads ([`super::tun`]): each packet moves with the `virtio_net_hdr` the device put in
//!    front of it. With delay only (the path's `needs_per_packet` false) a GSO super-packet
//!    (up to 64 KB) goes through the path whole and is written to the other device with the
//!    same header: the receiving kernel takes it as one (GRO-like), and the line's cost is per
//!    super-packet, not per wire packet. When the path does more (loss, rate, MTU, jitter,
//!    drop lists, reordering) a super-packet, or a packet with a partial checksum, is cut into
//!    the packets the wire would carry ([`tcpdoctor_core::wire::gso`]: MSS-sized, checksums
//!    whole) and each goes through the path and is written with a plain header, so loss,
//!    the queue, the MTU and packet numbers act on real wire packets.
//! 6. No allocation per packet: buffers come from two free lists (64 KB ones for reads and
//!    super-packets, MTU-sized ones for small packets and segments) and go back after the
//!    write; every readable device is read until it is empty (at most [`READ_BATCH`] packets at
//!    a time, so a flood one way never holds up deliveries) before the line polls again.
//! 7. A packet enters its path when it left the sending stack, not when the line read it: each
//!    device's tap ([`super::departures`]) has the kernel's stamp of that instant (what
//!    `tcpdump` on the device shows), and the line reads the packet later — after the sender's
//!    system call has finished on the CPU they share, and after its own wake-up — which a
//!    real wire would not add to the delay. The stamp is on the real-time clock; the line
//!    takes the packet's age on that clock (read just before the monotonic one, so the age is
//!    never overstated) and subtracts it from its read. The sending end's capture records that
//!    instant too. A packet enters when read if the tap has no stamp for it (no tap on the
//!    device, a full ring, a stamp more than [`MAX_TAP_AGE_NS`] old: the clock was set).
//!    No packet enters before the line's last event at that device — the entry of the packet
//!    read from it before, or the line's last write to it: a packet that left while the line
//!    wrote one the other way, and was read after, enters at that write. So each end's
//!    capture is in time order, and every packet reaches the other end at least the path's
//!    delay after its record at the sending end.

use std::io;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::Context;
use tcpdoctor_core::impair::{OneWayPath, PathCounters};
use tcpdoctor_core::time::Timestamp;
use tcpdoctor_core::wire::gso::{complete_checksum, Merge, Segmenter, VnetHdr, VNET_HDR_LEN};
use tcpdoctor_core::wire::readdress::{ipv4_addr, set_ipv4_addr, set_ipv4_addr_partial, Field};
use tcpdoctor_core::wire::write::LINKTYPE_RAW;
use tcpdoctor_core::wire::write_pcapng::PcapngWriter;

use super::tun::Tun;

/// Where the two ends' captures go.
pub struct Captures {
    pub near: PathBuf,
    pub far: PathBuf,
}

/// What the line did.
#[derive(Clone, Debug, Default)]
pub struct LineStats {
    pub c2s_packets: u64,
    pub s2c_packets: u64,
    pub c2s_bytes: u64,
    pub s2c_bytes: u64,
    /// Writes into a device that the kernel refused (rule 4).
    pub write_errors: u64,
    /// Packets the line had to cut into the wire's packets (rule 5) and could not: they went
    /// through the path whole.
    pub unsegmented: u64,
    /// The first capture write that failed: forwarding goes on, the captures are incomplete.
    pub capture_error: Option<String>,
    /// What each direction's impairments did (drops by loss, queue and MTU).
    pub c2s: PathCounters,
    pub s2c: PathCounters,
}

impl LineStats {
    /// What the line carried each way and what it dropped, in words: `the line carried 24
    /// packets (1407 bytes) client → server (2 dropped by loss) and 24 (4444 bytes) server →
    /// client`, and any write the kernel refused.
    pub fn describe(&self) -> String {
        let dropped = |c: &PathCounters| {
            let parts: Vec<String> = [
                (c.dropped_loss, "by loss"),
                (c.dropped_queue, "by the queue"),
                (c.dropped_mtu, "over the MTU"),
            ]
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| format!("{n} dropped {what}"))
            .collect();
            if parts.is_empty() {
                String::new()
            } else {
                format!(" ({})", parts.join(", "))
            }
        };
        let mut s = format!(
            "the line carried {} packets ({} bytes) client → server{} and {} ({} bytes) server → \
             client{}",
            self.c2s_packets,
            self.c2s_bytes,
            dropped(&self.c2s),
            self.s2c_packets,
            self.s2c_bytes,
            dropped(&self.s2c)
        );
        if self.unsegmented > 0 {
            s.push_str(&format!(
                "; {} packets could not be segmented and went whole",
                self.unsegmented
            ));
        }
        if self.write_errors > 0 {
            s.push_str(&format!(
                "; {} writes refused by the kernel",
                self.write_errors
            ));
        }
        s
    }
}

/// What the line needs to know of the path beyond its two directions.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// The devices' MTU: the largest packet the wire carries.
    pub mtu: u32,
    /// Whether the path does more than delay ([`PathSpec::needs_per_packet`]): then the line
    /// cuts super-packets into the wire's packets first (rule 5).
    ///
    /// [`PathSpec::needs_per_packet`]: tcpdoctor_core::impair::PathSpec::needs_per_packet
    pub per_packet: bool,
}

pub struct Line {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<anyhow::Result<LineStats>>>,
}

struct Dir {
    from: Tun,
    path: OneWayPath,
    /// Rule 5: cut super-packets into the packets the wire carries before the path.
    segment: bool,
}

type Writer = PcapngWriter<io::BufWriter<std::fs::File>>;

impl Line {
    /// Starts the thread. `far_addr` is the address the near side reaches the server at.
    pub fn start(
        near: Tun,
        far: Tun,
        far_addr: Ipv4Addr,
        c2s: OneWayPath,
        s2c: OneWayPath,
        shape: Shape,
        captures: Option<Captures>,
    ) -> anyhow::Result<Line> {
        let writers = match &captures {
            Some(c) => Some((open(&c.near, "near")?, open(&c.far, "far")?)),
            None => None,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("delay-line".into())
            .spawn(move || {
                let _helper = crate::bench::cpu::helper_thread();
                // SAFETY: prctl(PR_SET_TIMERSLACK) on this thread only.
                unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1) };
                let mut c2s = Dir {
                    from: near,
                    path: c2s.with_framing(VNET_HDR_LEN),
                    segment: shape.per_packet,
                };
                let mut s2c = Dir {
                    from: far,
                    path: s2c.with_framing(VNET_HDR_LEN),
                    segment: shape.per_packet,
                };
                let mut w = writers;
                let small = VNET_HDR_LEN + (shape.mtu as usize).max(1500);
                let r = run(&mut c2s, &mut s2c, far_addr.octets(), &mut w, &flag, small);
                if let Some((n, f)) = w {
                    let end = Timestamp(wall_ns());
                    n.finish(end, 0, 0).context("finishing the near capture")?;
                    f.finish(end, 0, 0).context("finishing the far capture")?;
                }
                r
            })
            .context("starting the delay line")?;
        Ok(Line {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the thread (after delivering what is in flight, rule 4) and says what it carried.
    pub fn stop(mut self) -> anyhow::Result<LineStats> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => anyhow::bail!("the delay line thread panicked"),
            None => Ok(LineStats::default()),
        }
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn open(path: &PathBuf, end: &str) -> anyhow::Result<Writer> {
    let f = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    PcapngWriter::new(io::BufWriter::new(f), 65535, LINKTYPE_RAW, end)
        .with_context(|| format!("writing {}", path.display()))
}

fn clock(id: libc::clockid_t) -> u64 {
    // SAFETY: clock_gettime writes the timespec.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn now() -> Timestamp {
    Timestamp(clock(libc::CLOCK_MONOTONIC))
}

fn wall_ns() -> u64 {
    clock(libc::CLOCK_REALTIME)
}

const LOCALHOST: [u8; 4] = [127, 0, 0, 1];
/// How long before a packet is due the thread stops sleeping and polls without a timeout.
const SPIN_NS: u64 = 150_000;
/// How long after it last read or wrote a packet the thread polls without sleeping (rule 1).
const LINGER_NS: u64 = 300_000;
/// A yield that kept the line off its CPU longer than this: another thread computes there.
const CONTENDED_NS: u64 = 500_000;
/// How long the line does not linger after it saw its CPU contended (rule 1).
const BACKOFF_NS: u64 = 1_000_000_000;
/// At most this many packets are read from one device before the line delivers what is due
/// (a device still readable is read again at once, after the delivery).
const READ_BATCH: usize = 64;
/// A tap stamp further back than this before the read is not believed (the real-time clock
/// was set meanwhile): the packet enters the path when read (rule 7).
const MAX_TAP_AGE_NS: u64 = 1_000_000_000;
/// How long the line keeps delivering what is in flight after it is told to stop.
const DRAIN_NS: u64 = 2_000_000_000;
/// The longest the thread sleeps without looking at the stop flag.
const STOP_CHECK_NS: u64 = 20_000_000;

/// Bytes a read may need: the header and the largest IP packet (a 64 KB super-packet).
const BIG: usize = VNET_HDR_LEN + 65_535;

/// The line's buffers, reused (rule 6): big ones for reads and the super-packets in flight,
/// small ones (a header and one device-MTU packet) for small packets and segments in flight.
struct Buffers {
    small_len: usize,
    big: Vec<Vec<u8>>,
    small: Vec<Vec<u8>>,
}

impl Buffers {
    fn big(&mut self) -> Vec<u8> {
        self.big.pop().unwrap_or_else(|| Vec::with_capacity(BIG))
    }

    fn small(&mut self) -> Vec<u8> {
        self.small
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(self.small_len))
    }

    fn give_back(&mut self, mut v: Vec<u8>) {
        v.clear();
        if v.capacity() >= BIG {
            self.big.push(v);
        } else if v.capacity() >= self.small_len {
            self.small.push(v);
        }
    }
}

fn run(
    c2s: &mut Dir,
    s2c: &mut Dir,
    far_addr: [u8; 4],
    w: &mut Option<(Writer, Writer)>,
    stop: &AtomicBool,
    small_len: usize,
) -> anyhow::Result<LineStats> {
    let mut st = LineStats::default();
    let mut bufs = Buffers {
        small_len,
        big: Vec::new(),
        small: Vec::new(),
    };
    let mut buf = bufs.big();
    // Wall clock of the captures = monotonic + this offset, fixed at the start.
    let offset = wall_ns().wrapping_sub(clock(libc::CLOCK_MONOTONIC));
    let wall = |t: Timestamp| Timestamp(t.0.wrapping_add(offset));
    let mut due: [Option<Timestamp>; 2] = [None, None];
    let mut drain_until: Option<Timestamp> = None;
    let mut late = Lateness::default();
    let mut stamps = Stamps::default();
    // The last time the line read from or wrote to each end's device (0 near, 1 far): a
    // packet read there never enters its path before it (rule 7).
    let mut end_last = [Timestamp(0); 2];
    // The packets of one delivery pass (rule 5), reused.
    let mut batch: Vec<(Timestamp, Vec<u8>)> = Vec::new();
    // When the line last read or wrote a packet (rule 1: it lingers awake after that), and
    // until when it does not linger (its CPU was contended).
    let mut active = Timestamp(0);
    let mut no_linger_until = Timestamp(0);
    let mut backoffs = 0u64;
    loop {
        let t = now();
        // Rule 4: after stop, what is in flight still arrives (up to DRAIN_NS), so the far
        // end's capture holds the client's last ACK as the near end's does.
        if drain_until.is_none() && stop.load(Ordering::Relaxed) {
            drain_until = Some(Timestamp(t.0 + DRAIN_NS));
        }
        if let Some(until) = drain_until {
            let empty =
                c2s.path.counters().in_flight() == 0 && s2c.path.counters().in_flight() == 0;
            if empty || t >= until {
                break;
            }
        }
        let wait_ns = due
            .iter()
            .flatten()
            .map(|d| d.0.saturating_sub(t.0))
            .min()
            .unwrap_or(STOP_CHECK_NS)
            .min(STOP_CHECK_NS);
        // Rule 1: sleep until shortly before the next packet is due, then look again without
        // sleeping until it is: a timer wakes tens of microseconds late, a spin does not.
        let mut wait_ns = wait_ns.saturating_sub(SPIN_NS);
        let linger =
            wait_ns > 0 && t.0.saturating_sub(active.0) < LINGER_NS && t >= no_linger_until;
        if linger {
            wait_ns = 0;
        }
        let mut fds = [
            libc::pollfd {
                fd: c2s.from.raw(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: s2c.from.raw(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ts = libc::timespec {
            tv_sec: (wait_ns / 1_000_000_000) as _,
            tv_nsec: (wait_ns % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: ppoll over two pollfds we own, with a relative timeout.
        let n = unsafe { libc::ppoll(fds.as_mut_ptr(), 2, &ts, std::ptr::null()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e).context("waiting on the TUN devices");
        }
        if n == 0 && linger {
            // Lingering (rule 1): a thread this CPU has waiting (an endpoint the last write
            // woke here) runs first; one that keeps it long ends the lingering for a while.
            // SAFETY: sched_yield takes no arguments.
            unsafe { libc::sched_yield() };
            let back = now();
            if back.0.saturating_sub(t.0) > CONTENDED_NS {
                no_linger_until = Timestamp(back.0 + BACKOFF_NS);
                backoffs += 1;
            }
        }
        // Read everything that arrived; each packet enters its path when it left (rule 7).
        for (i, dir) in [&mut *c2s, &mut *s2c].into_iter().enumerate() {
            if fds[i].revents == 0 {
                continue;
            }
            for _ in 0..READ_BATCH {
                buf.clear();
                // SAFETY: read(2) into the buffer's spare capacity, then its length set to
                // what the kernel wrote.
                let got =
                    unsafe { libc::read(dir.from.raw(), buf.as_mut_ptr().cast(), buf.capacity()) };
                if got < 0 {
                    let e = io::Error::last_os_error();
                    match e.kind() {
                        io::ErrorKind::WouldBlock => break,
                        io::ErrorKind::Interrupted => continue,
                        _ => return Err(e).context("reading a packet from a TUN device"),
                    }
                }
                if (got as usize) <= VNET_HDR_LEN {
                    break;
                }
                // SAFETY: the kernel initialised `got` bytes, within the capacity.
                unsafe { buf.set_len(got as usize) };
                // The real-time clock first: a packet's age is then never overstated, so it
                // never enters its path early.
                let wall_read = wall_ns();
                let read_at = now();
                active = read_at;
                // Rule 7: the packet entered the path when it left the sender, if the tap
                // saw that; never before the line's last event at this device, never after
                // it was read.
                let age = dir
                    .from
                    .departed(&buf[VNET_HDR_LEN..], wall_read)
                    .map(|left| wall_read.saturating_sub(left))
                    .filter(|&age| age <= MAX_TAP_AGE_NS);
                let left = Timestamp(read_at.0 - age.unwrap_or(0).min(read_at.0));
                let at = left.max(end_last[i]);
                stamps.count(age, at > left);
                end_last[i] = at;
                let hdr = VnetHdr::parse(&buf).unwrap_or(VnetHdr::PLAIN);
                if dir.segment && (hdr.is_gso() || hdr.needs_csum()) {
                    // Rule 5: the packets the wire would carry, one by one.
                    match Segmenter::new(hdr, &buf[VNET_HDR_LEN..]) {
                        Ok(seg) => {
                            for k in 0..seg.count() {
                                let mut pkt = bufs.small();
                                pkt.extend_from_slice(&VnetHdr::PLAIN.to_bytes());
                                seg.write(k, &mut pkt);
                                take(i, dir, pkt, at, far_addr, w, &wall, &mut st);
                            }
                            continue;
                        }
                        Err(_) => st.unsegmented += 1,
                    }
                }
                // One packet as it came: a small one copied into a small buffer, a large one
                // moved (and a fresh buffer taken for the next read).
                let pkt = if buf.len() <= small_len {
                    let mut p = bufs.small();
                    p.extend_from_slice(&buf);
                    p
                } else {
                    std::mem::replace(&mut buf, bufs.big())
                };
                take(i, dir, pkt, at, far_addr, w, &wall, &mut st);
            }
        }
        // Deliver what is due.
        let t = now();
        for (i, slot) in due.iter_mut().enumerate() {
            let (dir, to) = if i == 0 {
                (&mut *c2s, s2c.from.raw())
            } else {
                (&mut *s2c, c2s.from.raw())
            };
            while let Some((due_at, mut pkt)) = dir.path.pop_due(t) {
                // The receiving end's capture stamps the packet as it reaches that end's
                // kernel: before the write, which runs the receiving stack.
                let written = now();
                active = written;
                end_last[1 - i] = written;
                late.add(written.0.saturating_sub(due_at.0));
                let hdr = VnetHdr::parse(&pkt).unwrap_or(VnetHdr::PLAIN);
                if i == 0 && ipv4_addr(&pkt[VNET_HDR_LEN..], Field::Destination) == Some(far_addr) {
                    readdress(
                        &hdr,
                        &mut pkt[VNET_HDR_LEN..],
                        Field::Destination,
                        LOCALHOST,
                    );
                }
                batch.push((written, pkt));
            }
            // Rule 5: segments due together that continue each other go to the device as one
            // super-packet (a NIC's GRO); each is still captured as the wire carried it.
            let mut k = 0;
            while k < batch.len() {
                let mut end = k + 1;
                let mut merged = None;
                if dir.segment {
                    match Merge::start(bufs.big(), &batch[k].1[VNET_HDR_LEN..]) {
                        Ok(mut m) => {
                            while end < batch.len() && m.push(&batch[end].1[VNET_HDR_LEN..]) {
                                end += 1;
                            }
                            let single = m.segments() == 1;
                            let p = m.finish();
                            if single {
                                bufs.give_back(p);
                            } else {
                                merged = Some(p);
                            }
                        }
                        Err(b) => bufs.give_back(b),
                    }
                }
                let out = merged.as_deref().unwrap_or(&batch[k].1);
                // SAFETY: write(2) of one whole packet behind its header.
                let r = unsafe { libc::write(to, out.as_ptr().cast(), out.len()) };
                if let Some(m) = merged {
                    bufs.give_back(m);
                }
                if r < 0 {
                    // Refused by the kernel: counted, and not in the receiving end's capture.
                    st.write_errors += 1;
                } else if let Some((n, f)) = w.as_mut() {
                    let cap = if i == 0 { f } else { n };
                    for (written, pkt) in &mut batch[k..end] {
                        let hdr = VnetHdr::parse(pkt).unwrap_or(VnetHdr::PLAIN);
                        capture(cap, wall(*written), &hdr, &mut pkt[VNET_HDR_LEN..], &mut st);
                    }
                }
                k = end;
            }
            for (_, pkt) in batch.drain(..) {
                bufs.give_back(pkt);
            }
            *slot = dir.path.next_wakeup();
        }
    }
    if let Some(e) = st.capture_error.take() {
        // Forwarding went on (rule 4); the captures are incomplete, and that is an error.
        anyhow::bail!("writing the line's captures: {e}");
    }
    st.c2s = c2s.path.counters();
    st.s2c = s2c.path.counters();
    if std::env::var_os("TCPDOCTOR_LINE_TIMING").is_some() {
        eprintln!("{}", late.describe());
        let taps = [
            (c2s.from.name.as_str(), c2s.from.tap_error()),
            (s2c.from.name.as_str(), s2c.from.tap_error()),
        ];
        eprintln!("{}", stamps.describe(&taps));
        eprintln!(
            "delay line: stopped lingering {backoffs} time(s) for {} s (a yield kept it off its \
             CPU over {} µs)",
            BACKOFF_NS / 1_000_000_000,
            CONTENDED_NS / 1000
        );
    }
    Ok(st)
}

/// How packets entered their path (rule 7): at the tap's departure stamp, at the line's last
/// event at that device (the stamp was before it), or when read (no stamp); and how long
/// before the read the stamped ones had left, in total.
#[derive(Default)]
struct Stamps {
    stamped: u64,
    clamped: u64,
    unstamped: u64,
    waited_ns: u64,
}

impl Stamps {
    fn count(&mut self, age: Option<u64>, clamped: bool) {
        match age {
            None => self.unstamped += 1,
            Some(_) if clamped => self.clamped += 1,
            Some(ns) => {
                self.stamped += 1;
                self.waited_ns += ns;
            }
        }
    }

    fn describe(&self, tap_errors: &[(&str, Option<&str>)]) -> String {
        let mut s = format!(
            "delay line: {} packets entered the path when they left the sender (read {} µs \
             later on average), {} at the line's previous event at that device, {} when read \
             (no tap stamp)",
            self.stamped,
            self.waited_ns / self.stamped.max(1) / 1000,
            self.clamped,
            self.unstamped
        );
        for (device, e) in tap_errors {
            if let Some(e) = e {
                s.push_str(&format!("; no departure tap on {device}: {e}"));
            }
        }
        s
    }
}

/// How late the line delivered packets (write − due), by microsecond up to 2 ms.
struct Lateness {
    us: Vec<u64>,
    max_ns: u64,
}

impl Default for Lateness {
    fn default() -> Self {
        Lateness {
            us: vec![0; 2001],
            max_ns: 0,
        }
    }
}

impl Lateness {
    fn add(&mut self, ns: u64) {
        let b = ((ns / 1000) as usize).min(self.us.len() - 1);
        self.us[b] += 1;
        self.max_ns = self.max_ns.max(ns);
    }

    fn quantile_us(&self, q: f64) -> u64 {
        let n: u64 = self.us.iter().sum();
        let want = ((n as f64 * q).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.us.iter().enumerate() {
            seen += c;
            if seen >= want {
                return i as u64;
            }
        }
        0
    }

    fn describe(&self) -> String {
        let top = self.us.len() as u64 - 1;
        let q = |p: f64| match self.quantile_us(p) {
            v if v >= top => format!(">= {top}"),
            v => v.to_string(),
        };
        format!(
            "delay line: {} packets delivered late by p50 {} µs, p99 {} µs, max {} µs (write − due)",
            self.us.iter().sum::<u64>(),
            q(0.5),
            q(0.99),
            self.max_ns / 1000
        )
    }
}

/// One packet (behind its header) read from direction `i`'s device at `at`: into the sending
/// end's capture, readdressed (rule 2), counted, and pushed into the path.
#[allow(clippy::too_many_arguments)]
fn take(
    i: usize,
    dir: &mut Dir,
    mut pkt: Vec<u8>,
    at: Timestamp,
    far_addr: [u8; 4],
    w: &mut Option<(Writer, Writer)>,
    wall: &impl Fn(Timestamp) -> Timestamp,
    st: &mut LineStats,
) {
    let hdr = VnetHdr::parse(&pkt).unwrap_or(VnetHdr::PLAIN);
    let ip = &mut pkt[VNET_HDR_LEN..];
    let len = ip.len() as u64;
    if i == 1 {
        // Rule 3: the far capture sees the server's packet as it sent it.
        if let Some((_, f)) = w.as_mut() {
            capture(f, wall(at), &hdr, ip, st);
        }
        let src = far_addr_if_local(ip, far_addr);
        readdress(&hdr, ip, Field::Source, src);
        st.s2c_packets += 1;
        st.s2c_bytes += len;
    } else {
        if let Some((n, _)) = w.as_mut() {
            capture(n, wall(at), &hdr, ip, st);
        }
        st.c2s_packets += 1;
        st.c2s_bytes += len;
    }
    dir.path.push(pkt, at);
}

/// Rule 2, for a packet whose transport checksum may be partial.
fn readdress(hdr: &VnetHdr, ip: &mut [u8], field: Field, to: [u8; 4]) {
    if hdr.needs_csum() {
        set_ipv4_addr_partial(ip, field, to);
    } else {
        set_ipv4_addr(ip, field, to);
    }
}

/// Writes `ip` into a capture with its transport checksum whole (rule 3): a partial one is
/// completed for the record and put back as it was for the device.
fn capture(w: &mut Writer, at: Timestamp, hdr: &VnetHdr, ip: &mut [u8], st: &mut LineStats) {
    let at_sum = usize::from(hdr.csum_start) + usize::from(hdr.csum_offset);
    let partial = hdr.needs_csum() && at_sum + 2 <= ip.len();
    let kept = if partial {
        [ip[at_sum], ip[at_sum + 1]]
    } else {
        [0, 0]
    };
    if partial {
        let _ = complete_checksum(hdr, ip);
    }
    record(w.write_packet(at, ip, ip.len() as u32), st);
    if partial {
        ip[at_sum..at_sum + 2].copy_from_slice(&kept);
    }
}

/// The source address a server's packet leaves the line with: the far address when the
/// server answered from 127.0.0.1, else its own.
fn far_addr_if_local(pkt: &[u8], far_addr: [u8; 4]) -> [u8; 4] {
    match ipv4_addr(pkt, Field::Source) {
        Some(LOCALHOST) => far_addr,
        Some(a) => a,
        None => far_addr,
    }
}

/// Keeps the first capture write error; forwarding never stops for one.
fn record(r: io::Result<()>, st: &mut LineStats) {
    if let Err(e) = r {
        st.capture_error.get_or_insert(e.to_string());
    }
}
