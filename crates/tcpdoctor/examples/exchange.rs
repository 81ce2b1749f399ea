//! The request/response workload of the capture tests, as a program to run inside
//! `tcpdoctor sandbox` (see `tests/common/exchange.rs`):
//!
//!   exchange serve ADDR [coalesce]   per-line server (Nagle on), or its coalesced twin
//!   exchange client ADDR N           N exchanges, then prints what it sent and received:
//!                                    `sent_bytes=.. received_bytes=.. segments=..`
//!   exchange sink ADDR [RCVBUF]      reads and discards every connection (for the flood);
//!                                    prints `ready` once listening (SO_RCVBUF set before
//!                                    listen unless 0: the accepted sockets inherit it)
//!   exchange flood ADDR SECONDS SIZE writes SIZE-byte chunks with TCP_NODELAY for SECONDS:
//!                                    one segment per write, a packet-rate load for
//!                                    `scripts/bench-capture.sh`; prints `writes=..`
//!   exchange rtt-serve ADDR          accepts connections; to each it writes the round trip its
//!                                    kernel measured in the handshake: `server_rtt_us=..`
//!   exchange rtt ADDR [N]            connects (N times, one after the other), prints the round
//!                                    trip its kernel measured in each handshake and the
//!                                    server's line: `client_rtt_us=.. server_rtt_us=..`
//!   exchange bulk ADDR BYTES [SNDBUF [CC]]
//!                                    sends BYTES (SO_SNDBUF set before connect unless 0, and
//!                                    the congestion control CC),
//!                                    waits for the sink to close, then prints what its kernel
//!                                    says of the transfer (`tcp_info`): `bytes=.. rtt_us=..
//!                                    total_retrans=.. total_rto=.. busy_us=.. rwnd_limited_us=..
//!                                    sndbuf_limited_us=..`
//!                                    (total_rto is -1 on kernels before 6.7)

#[allow(dead_code)]
#[path = "../tests/common/exchange.rs"]
mod exchange;

use std::io::{self, Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    let result = match arg(1) {
        "serve" => {
            TcpListener::bind(arg(2)).and_then(|l| exchange::serve_forever(l, arg(3) == "coalesce"))
        }
        "client" => {
            let n: usize = arg(3).parse().unwrap_or(0);
            exchange::connect(arg(2))
                .and_then(|c| exchange::client(c, n))
                .map(|(sent, received)| {
                    println!(
                        "sent_bytes={} received_bytes={received} segments={}",
                        sent.bytes, sent.segments
                    );
                })
        }
        "sink" => listen(arg(2), arg(3).parse().ok().filter(|&n: &usize| n > 0)).and_then(sink),
        "flood" => {
            let secs: f64 = arg(3).parse().unwrap_or(0.0);
            let size: usize = arg(4).parse().unwrap_or(1);
            exchange::connect(arg(2)).and_then(|c| flood(c, Duration::from_secs_f64(secs), size))
        }
        "rtt-serve" => TcpListener::bind(arg(2)).and_then(rtt_serve),
        "rtt" => (0..arg(3).parse().unwrap_or(1))
            .try_for_each(|_| exchange::connect(arg(2)).and_then(rtt)),
        "bulk" => {
            let bytes: usize = arg(3).parse().unwrap_or(0);
            let sndbuf = arg(4).parse().ok().filter(|&n: &usize| n > 0);
            bulk(arg(2), bytes, sndbuf, args.get(5).map(String::as_str))
        }
        _ => {
            eprintln!(
                "usage: exchange serve ADDR [coalesce] | client ADDR N | sink ADDR | \
                 flood ADDR SECONDS SIZE | rtt-serve ADDR | rtt ADDR [N] | bulk ADDR BYTES [SNDBUF [CC]]"
            );
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("exchange: {e}");
        std::process::exit(1);
    }
}

fn sink(listener: TcpListener) -> std::io::Result<()> {
    println!("ready");
    std::io::stdout().flush()?;
    for conn in listener.incoming() {
        let mut conn = conn?;
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 16];
            while matches!(conn.read(&mut buf), Ok(n) if n > 0) {}
        });
    }
    Ok(())
}

fn flood(mut conn: std::net::TcpStream, length: Duration, size: usize) -> std::io::Result<()> {
    conn.set_nodelay(true)?;
    let buf = vec![b'x'; size.max(1)];
    let start = Instant::now();
    let mut writes = 0u64;
    while start.elapsed() < length {
        for _ in 0..256 {
            conn.write_all(&buf)?;
        }
        writes += 256;
    }
    println!("writes={writes}");
    Ok(())
}

/// A listener on `addr`, with SO_RCVBUF set before listen when given.
fn listen(addr: &str, rcvbuf: Option<usize>) -> io::Result<TcpListener> {
    let addr: std::net::SocketAddr = addr
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{addr}: {e}")))?;
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    sock.set_reuse_address(true)?;
    if let Some(n) = rcvbuf {
        sock.set_recv_buffer_size(n)?;
    }
    sock.bind(&addr.into())?;
    sock.listen(128)?;
    Ok(sock.into())
}

/// The kernel's `struct tcp_info` of a socket, as bytes (its length is what this kernel fills).
fn tcp_info(fd: std::os::fd::RawFd) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; 512];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: getsockopt(TCP_INFO) writes at most `len` bytes into our buffer.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(len as usize);
    Ok(buf)
}

/// A field of `struct tcp_info` (include/uapi/linux/tcp.h) at `offset`, `size` bytes; None
/// when this kernel's struct is shorter.
fn field(info: &[u8], offset: usize, size: usize) -> Option<u64> {
    let b = info.get(offset..offset + size)?;
    let mut v = [0u8; 8];
    v[..size].copy_from_slice(b);
    Some(u64::from_ne_bytes(v))
}

const TCPI_UNACKED: usize = 24;
const TCPI_RTT: usize = 68;
const TCPI_TOTAL_RETRANS: usize = 100;
const TCPI_BUSY_TIME: usize = 168;
const TCPI_RWND_LIMITED: usize = 176;
const TCPI_SNDBUF_LIMITED: usize = 184;
const TCPI_TOTAL_RTO: usize = 240;

fn rtt_us(s: &std::net::TcpStream) -> io::Result<u64> {
    use std::os::fd::AsRawFd;
    Ok(field(&tcp_info(s.as_raw_fd())?, TCPI_RTT, 4).unwrap_or(0))
}

fn rtt_serve(listener: TcpListener) -> io::Result<()> {
    for conn in listener.incoming() {
        let mut conn = conn?;
        // Right after accept: the only sample is the handshake's (SYN-ACK → ACK).
        let rtt = rtt_us(&conn)?;
        conn.write_all(format!("server_rtt_us={rtt}\n").as_bytes())?;
        let mut rest = Vec::new();
        let _ = conn.read_to_end(&mut rest);
    }
    Ok(())
}

fn rtt(mut conn: std::net::TcpStream) -> io::Result<()> {
    // Right after connect: the only sample is the handshake's (SYN → SYN-ACK).
    let rtt = rtt_us(&conn)?;
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while conn.read(&mut byte)? == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    println!("client_rtt_us={rtt} {}", String::from_utf8_lossy(&line));
    Ok(())
}

fn bulk(addr: &str, bytes: usize, sndbuf: Option<usize>, cc: Option<&str>) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let addr: std::net::SocketAddr = addr
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{addr}: {e}")))?;
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    if let Some(n) = sndbuf {
        sock.set_send_buffer_size(n)?;
    }
    if let Some(cc) = cc {
        sock.set_tcp_congestion(cc.as_bytes())?;
    }
    sock.connect(&addr.into())?;
    let mut conn: std::net::TcpStream = sock.into();
    let chunk = vec![b'x'; 16 * 1024];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len());
        conn.write_all(&chunk[..n])?;
        left -= n;
    }
    conn.shutdown(std::net::Shutdown::Write)?;
    // The kernel's figures once everything (the FIN too) is acknowledged, while the connection
    // is still open: after it closes, its timers' figures are not kept up to date. Bounded.
    let mut info = tcp_info(conn.as_raw_fd())?;
    for _ in 0..30_000 {
        if field(&info, TCPI_UNACKED, 4) == Some(0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
        info = tcp_info(conn.as_raw_fd())?;
    }
    let mut rest = Vec::new();
    conn.read_to_end(&mut rest)?;
    let f = |o, n| field(&info, o, n).map_or(-1, |v| v as i64);
    println!(
        "bytes={bytes} rtt_us={} total_retrans={} total_rto={} busy_us={} rwnd_limited_us={} \
         sndbuf_limited_us={}",
        f(TCPI_RTT, 4),
        f(TCPI_TOTAL_RETRANS, 4),
        f(TCPI_TOTAL_RTO, 2),
        f(TCPI_BUSY_TIME, 8),
        f(TCPI_RWND_LIMITED, 8),
        f(TCPI_SNDBUF_LIMITED, 8)
    );
    Ok(())
}
