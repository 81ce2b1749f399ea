//! Tiny load generator for `scripts/bench-proxy.sh`: ping-pong latency and bulk throughput,
//! plain blocking std::net with TCP_NODELAY, so what it measures is the path, not the tool.
//!
//!   netbench echo ADDR              echo server (one thread per connection)
//!   netbench sink ADDR              reads to EOF, then answers one byte
//!   netbench pingpong ADDR SIZE N [FILE]   N round trips of SIZE bytes; prints median and
//!                                   p99 in µs, and appends every sample to FILE if given
//!   netbench bulk ADDR BYTES        sends BYTES, waits for the sink's byte; prints GB/s and
//!                                   the CPU seconds (user + system) the sender used
//!   netbench echo-stamped ADDR N FILE   one connection's N one-byte messages echoed, the
//!                                   kernel's timestamps of each byte to FILE
//!   netbench pingpong-stamped ADDR N FILE   N one-byte round trips, the kernel's timestamps
//!                                   of each byte to FILE (see below)
//!
//! The stamped pair measures a path at its two ends' kernels, with nothing else watching:
//! `SO_TIMESTAMPING` software stamps, the send side's taken as the packet enters the device
//! (`skb_tx_timestamp`), the receive side's as the device hands it to the stack. Each line of
//! FILE is `tx|rx K NS`: the K-th byte (from 0) of the connection's direction, wall clock ns.
//! Both ends run on one host, so their clocks are one clock; scripts/wan-delay-stamps.py pairs
//! the two files.
//!
//! Servers print `ready` on stdout once listening.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    match arg(1) {
        "echo" => serve(arg(2), echo),
        "sink" => serve(arg(2), sink),
        "pingpong" => pingpong(arg(2), parse(arg(3)), parse(arg(4)), arg(5)),
        "bulk" => bulk(arg(2), parse(arg(3)) as u64),
        "echo-stamped" => echo_stamped(arg(2), parse(arg(3)), arg(4)),
        "pingpong-stamped" => pingpong_stamped(arg(2), parse(arg(3)), arg(4)),
        _ => {
            eprintln!(
                "usage: netbench echo|sink ADDR | pingpong ADDR SIZE N [FILE] | bulk ADDR BYTES \
                 | echo-stamped ADDR N FILE | pingpong-stamped ADDR N FILE"
            );
            std::process::exit(2);
        }
    }
}

fn parse(s: &str) -> usize {
    s.parse().unwrap_or_else(|_| {
        eprintln!("netbench: `{s}` is not a number");
        std::process::exit(2)
    })
}

fn serve(addr: &str, f: fn(TcpStream) -> std::io::Result<()>) {
    let l = TcpListener::bind(addr).expect("bind");
    println!("ready");
    let _ = std::io::stdout().flush();
    for s in l.incoming().flatten() {
        std::thread::spawn(move || {
            let _ = s.set_nodelay(true);
            let _ = f(s);
        });
    }
}

fn echo(mut s: TcpStream) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        s.write_all(&buf[..n])?;
    }
}

fn sink(mut s: TcpStream) -> std::io::Result<()> {
    let mut buf = vec![0u8; 256 * 1024];
    while s.read(&mut buf)? > 0 {}
    s.write_all(b"k")
}

fn pingpong(addr: &str, size: usize, n: usize, samples: &str) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_nodelay(true).expect("nodelay");
    let msg = vec![b'x'; size];
    let mut back = vec![0u8; size];
    let mut lat = Vec::with_capacity(n);
    for i in 0..n + n / 10 {
        let t = Instant::now();
        s.write_all(&msg).expect("write");
        s.read_exact(&mut back).expect("read");
        if i >= n / 10 {
            // the first 10% warm up caches and the connection
            lat.push(t.elapsed().as_nanos() as f64 / 1e3);
        }
    }
    if !samples.is_empty() {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(samples)
            .expect("samples file");
        let text: String = lat.iter().map(|v| format!("{v:.1}\n")).collect();
        f.write_all(text.as_bytes()).expect("write samples");
    }
    lat.sort_by(f64::total_cmp);
    let q = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];
    println!("{:.1} {:.1}", q(0.5), q(0.99));
}

fn bulk(addr: &str, bytes: u64) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_nodelay(true).expect("nodelay");
    let block = vec![0x5au8; 256 * 1024];
    let t = Instant::now();
    let mut left = bytes;
    while left > 0 {
        let n = left.min(block.len() as u64) as usize;
        s.write_all(&block[..n]).expect("write");
        left -= n as u64;
    }
    s.shutdown(std::net::Shutdown::Write).expect("shutdown");
    let mut k = [0u8; 1];
    s.read_exact(&mut k).expect("sink's answer");
    let gbps = bytes as f64 / t.elapsed().as_secs_f64() / 1e9;
    println!("{gbps:.3} {:.3}", cpu_seconds());
}

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the zeroed struct we own.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// `echo-stamped`: one connection, N bytes one at a time, echoed; every byte's two stamps
/// kept. It saves once the N-th is echoed (a sandbox may stop it when the client is done).
fn echo_stamped(addr: &str, n: usize, file: &str) {
    let l = TcpListener::bind(addr).expect("bind");
    println!("ready");
    let _ = std::io::stdout().flush();
    let (s, _) = l.accept().expect("accept");
    s.set_nodelay(true).expect("nodelay");
    let mut st = Stamped::new(s);
    for k in 0..n as u64 {
        st.recv_byte(k).expect("the client closed early");
        st.send_byte();
        st.collect_tx();
    }
    st.save(file);
}

/// `pingpong-stamped`: N one-byte round trips, every byte's two stamps kept.
fn pingpong_stamped(addr: &str, n: usize, file: &str) {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_nodelay(true).expect("nodelay");
    let mut st = Stamped::new(s);
    for k in 0..n as u64 {
        st.send_byte();
        st.recv_byte(k).expect("the echo closed early");
        st.collect_tx();
    }
    st.save(file);
}

const SO_TIMESTAMPING: libc::c_int = 37;

/// A connection whose bytes carry the kernel's software timestamps.
struct Stamped {
    s: TcpStream,
    lines: Vec<String>,
}

impl Stamped {
    fn new(s: TcpStream) -> Self {
        use std::os::fd::AsRawFd;
        let flags: libc::c_uint = libc::SOF_TIMESTAMPING_RX_SOFTWARE
            | libc::SOF_TIMESTAMPING_TX_SOFTWARE
            | libc::SOF_TIMESTAMPING_SOFTWARE
            | libc::SOF_TIMESTAMPING_OPT_ID
            | libc::SOF_TIMESTAMPING_OPT_TSONLY;
        // SAFETY: setsockopt with a c_uint we own and its size.
        let r = unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                SO_TIMESTAMPING,
                (&flags as *const libc::c_uint).cast(),
                std::mem::size_of::<libc::c_uint>() as libc::socklen_t,
            )
        };
        assert_eq!(r, 0, "SO_TIMESTAMPING: {}", std::io::Error::last_os_error());
        Stamped {
            s,
            lines: Vec::new(),
        }
    }

    fn send_byte(&mut self) {
        self.s.write_all(b"x").expect("write");
    }

    /// Receives byte `k` and keeps its stamp; None at end of stream.
    fn recv_byte(&mut self, k: u64) -> Option<()> {
        let mut b = [0u8; 1];
        let (n, stamp) = self.recvmsg(&mut b, 0);
        if n == 0 {
            return None;
        }
        if let Some(ns) = stamp {
            self.lines.push(format!("rx {k} {ns}"));
        }
        Some(())
    }

    /// Takes the send stamps the kernel has queued (numbered by byte from 0), without waiting:
    /// called after each exchange, so the error queue never fills up and drops stamps.
    fn collect_tx(&mut self) {
        let mut none = [0u8; 0];
        while self
            .recvmsg(&mut none, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT)
            .0
            != usize::MAX
        {}
    }

    /// recvmsg into `buf`; the software stamp and, for the error queue, the byte number.
    /// Returns usize::MAX when nothing could be read without waiting.
    fn recvmsg(&mut self, buf: &mut [u8], flags: libc::c_int) -> (usize, Option<u64>) {
        use std::os::fd::AsRawFd;
        let mut control = [0u64; 64];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: a zeroed msghdr, then pointed at buffers that outlive the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control);
        // SAFETY: recvmsg with the msghdr above.
        let n = unsafe { libc::recvmsg(self.s.as_raw_fd(), &mut msg, flags) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::WouldBlock {
                return (usize::MAX, None);
            }
            panic!("recvmsg: {e}");
        }
        let mut stamp = None;
        let mut id = None;
        // SAFETY: walking the control messages the kernel wrote, with the libc macros.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                let h = &*c;
                if h.cmsg_level == libc::SOL_SOCKET && h.cmsg_type == SO_TIMESTAMPING {
                    let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::timespec>());
                    stamp = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                } else if (h.cmsg_level == libc::SOL_IP && h.cmsg_type == libc::IP_RECVERR)
                    || (h.cmsg_level == libc::SOL_IPV6 && h.cmsg_type == libc::IPV6_RECVERR)
                {
                    let e = std::ptr::read_unaligned(
                        libc::CMSG_DATA(c).cast::<libc::sock_extended_err>(),
                    );
                    if e.ee_origin == libc::SO_EE_ORIGIN_TIMESTAMPING {
                        id = Some(e.ee_data);
                    }
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        if let (Some(ns), Some(k)) = (stamp, id) {
            self.lines.push(format!("tx {k} {ns}"));
        }
        (n as usize, stamp)
    }

    fn save(&self, file: &str) {
        let mut text = self.lines.join("\n");
        text.push('\n');
        std::fs::write(file, text).expect("write the stamps");
    }
}
