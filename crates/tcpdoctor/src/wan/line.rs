//! The delay line: one thread moving IP packets between the near and the far TUN device,
//! each direction through its own impairment pipeline (the core's pure state machines), and
//! writing the capture each end would take.
//!
//! Rules:
//! 1. A packet read from one device is pushed into its direction's path (the core's
//!    [`OneWayPath`]: MTU, loss, bottleneck, delay) with the time it was read; what the path
//!    gives back when it is due is written to the other device at once. The thread
//!    sleeps in `ppoll` until a device is readable or shortly before the next packet is due
//!    (nanosecond timeout, timer slack 1 ns), then polls without sleeping until it is due: the
//!    delay it adds is the pipeline's plus microseconds, at the cost of a short spin per
//!    due packet.
//! 2. Addresses: the far namespace's server may listen on 127.0.0.1. Packets to the far
//!    address are rewritten to 127.0.0.1 as they enter far (the device accepts them:
//!    `route_localnet`), and the replies' source 127.0.0.1 back to the far address as they
//!    leave ([`tcpdoctor_core::wire::readdress`], checksums updated).
//! 3. The near capture holds each packet as the client's end saw it (client → server when it
//!    was read from near, server → client when it was written to near); the far capture as
//!    the server's end saw it. Raw IP, pcapng, nanosecond timestamps of the host clock.
//! 4. Nothing is dropped here that the pipeline did not drop: a write the kernel refuses is
//!    counted and reported, and when the line is stopped it first delivers what is still in
//!    flight (at most [`DRAIN_NS`]).

use std::io;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::Context;
use tcpdoctor_core::impair::{OneWayPath, PathCounters};
use tcpdoctor_core::time::Timestamp;
use tcpdoctor_core::wire::readdress::{ipv4_addr, set_ipv4_addr, Field};
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
        if self.write_errors > 0 {
            s.push_str(&format!(
                "; {} writes refused by the kernel",
                self.write_errors
            ));
        }
        s
    }
}

pub struct Line {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<anyhow::Result<LineStats>>>,
}

struct Dir {
    from: Tun,
    path: OneWayPath,
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
                // SAFETY: prctl(PR_SET_TIMERSLACK) on this thread only.
                unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1) };
                let mut c2s = Dir {
                    from: near,
                    path: c2s,
                };
                let mut s2c = Dir {
                    from: far,
                    path: s2c,
                };
                let mut w = writers;
                let r = run(&mut c2s, &mut s2c, far_addr.octets(), &mut w, &flag);
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
/// How long the line keeps delivering what is in flight after it is told to stop.
const DRAIN_NS: u64 = 2_000_000_000;
/// The longest the thread sleeps without looking at the stop flag.
const STOP_CHECK_NS: u64 = 20_000_000;

fn run(
    c2s: &mut Dir,
    s2c: &mut Dir,
    far_addr: [u8; 4],
    w: &mut Option<(Writer, Writer)>,
    stop: &AtomicBool,
) -> anyhow::Result<LineStats> {
    let mut st = LineStats::default();
    let mut buf = vec![0u8; 65536];
    // Wall clock of the captures = monotonic + this offset, fixed at the start.
    let offset = wall_ns().wrapping_sub(clock(libc::CLOCK_MONOTONIC));
    let wall = |t: Timestamp| Timestamp(t.0.wrapping_add(offset));
    let mut due: [Option<Timestamp>; 2] = [None, None];
    let mut drain_until: Option<Timestamp> = None;
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
        let wait_ns = wait_ns.saturating_sub(SPIN_NS);
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
            tv_sec: (wait_ns / 1_000_000_000) as libc::time_t,
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
        // Read everything that arrived, stamping it with the time it was read.
        for (i, dir) in [&mut *c2s, &mut *s2c].into_iter().enumerate() {
            if fds[i].revents == 0 {
                continue;
            }
            loop {
                // SAFETY: read(2) into our buffer.
                let got = unsafe { libc::read(dir.from.raw(), buf.as_mut_ptr().cast(), buf.len()) };
                if got < 0 {
                    let e = io::Error::last_os_error();
                    match e.kind() {
                        io::ErrorKind::WouldBlock => break,
                        io::ErrorKind::Interrupted => continue,
                        _ => return Err(e).context("reading a packet from a TUN device"),
                    }
                }
                if got == 0 {
                    break;
                }
                let at = now();
                let mut pkt = buf[..got as usize].to_vec();
                if i == 1 {
                    // Rule 3: the far capture sees the server's packet as it sent it.
                    if let Some((_, f)) = w.as_mut() {
                        record(f.write_packet(wall(at), &pkt, pkt.len() as u32), &mut st);
                    }
                    let src = far_addr_if_local(&pkt, far_addr);
                    set_ipv4_addr(&mut pkt, Field::Source, src);
                    st.s2c_packets += 1;
                    st.s2c_bytes += pkt.len() as u64;
                } else {
                    if let Some((n, _)) = w.as_mut() {
                        record(n.write_packet(wall(at), &pkt, pkt.len() as u32), &mut st);
                    }
                    st.c2s_packets += 1;
                    st.c2s_bytes += pkt.len() as u64;
                }
                dir.path.push(pkt, at);
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
            while let Some((_, mut pkt)) = dir.path.pop_due(t) {
                if i == 0 && ipv4_addr(&pkt, Field::Destination) == Some(far_addr) {
                    set_ipv4_addr(&mut pkt, Field::Destination, LOCALHOST);
                }
                // SAFETY: write(2) of one whole packet.
                let r = unsafe { libc::write(to, pkt.as_ptr().cast(), pkt.len()) };
                if r < 0 {
                    // Refused by the kernel: counted, and not in the receiving end's capture.
                    st.write_errors += 1;
                    continue;
                }
                let at = wall(now());
                if let Some((n, f)) = w.as_mut() {
                    let end = if i == 0 { f } else { n };
                    record(end.write_packet(at, &pkt, pkt.len() as u32), &mut st);
                }
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
    Ok(st)
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
