//! `struct tcp_info` (include/uapi/linux/tcp.h), read by byte offset from what the kernel
//! returned.
//!
//! The struct grows with kernels: each field is read only when the returned bytes reach its
//! end, so a shorter struct from an older kernel leaves the newer fields at 0 (for example
//! `tcpi_busy_time` and the limit counters came in 4.10, `tcpi_bytes_sent` in 4.19,
//! `tcpi_snd_wnd` in 5.4, `tcpi_total_rto` in 6.7). Nothing is ever read past the returned length. The peer's window
//! and the count of retransmission timeouts are the fields whose 0 means something (a zero
//! window, no timeout): they are `None` when the struct is too short to hold them.

use tcpdoctor_core::inspect::TcpSample;

// Offsets of the fields read, from the uapi header.
const STATE: usize = 0;
const ATO: usize = 12;
const SND_MSS: usize = 16;
const RCV_MSS: usize = 20;
const UNACKED: usize = 24;
const RTT: usize = 68;
const RTTVAR: usize = 72;
const SND_CWND: usize = 80;
const TOTAL_RETRANS: usize = 100;
const PACING_RATE: usize = 104;
const BYTES_ACKED: usize = 120;
const BYTES_RECEIVED: usize = 128;
const SEGS_OUT: usize = 136;
const SEGS_IN: usize = 140;
const NOTSENT_BYTES: usize = 144;
const MIN_RTT: usize = 148;
const DATA_SEGS_IN: usize = 152;
const DATA_SEGS_OUT: usize = 156;
const DELIVERY_RATE: usize = 160;
const BUSY_TIME: usize = 168;
const RWND_LIMITED: usize = 176;
const SNDBUF_LIMITED: usize = 184;
const BYTES_SENT: usize = 200;
const BYTES_RETRANS: usize = 208;
const SND_WND: usize = 228;
/// `tcpi_total_rto`, a `__u16` after `tcpi_rcv_wnd` and `tcpi_rehash` (6.2), since 6.7.
const TOTAL_RTO: usize = 240;

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u32::from_ne_bytes)
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u16::from_ne_bytes)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u64::from_ne_bytes)
}

/// The sample `info` (the kernel's bytes, any length) describes, taken at `at_ns`. Rates are
/// converted from the kernel's bytes per second to bits per second (the project's `_bps`).
pub fn parse(info: &[u8], at_ns: u64) -> TcpSample {
    TcpSample {
        at_ns,
        state: info.get(STATE).copied().unwrap_or(0),
        rtt_us: u32_at(info, RTT),
        rttvar_us: u32_at(info, RTTVAR),
        min_rtt_us: u32_at(info, MIN_RTT),
        ato_us: u32_at(info, ATO),
        snd_mss: u32_at(info, SND_MSS),
        rcv_mss: u32_at(info, RCV_MSS),
        snd_cwnd: u32_at(info, SND_CWND),
        unacked: u32_at(info, UNACKED),
        notsent_bytes: u32_at(info, NOTSENT_BYTES),
        total_retrans: u32_at(info, TOTAL_RETRANS),
        segs_out: u32_at(info, SEGS_OUT),
        segs_in: u32_at(info, SEGS_IN),
        data_segs_out: u32_at(info, DATA_SEGS_OUT),
        data_segs_in: u32_at(info, DATA_SEGS_IN),
        bytes_acked: u64_at(info, BYTES_ACKED),
        bytes_received: u64_at(info, BYTES_RECEIVED),
        bytes_sent: u64_at(info, BYTES_SENT),
        bytes_retrans: u64_at(info, BYTES_RETRANS),
        delivery_rate_bps: u64_at(info, DELIVERY_RATE).saturating_mul(8),
        pacing_rate_bps: u64_at(info, PACING_RATE).saturating_mul(8),
        busy_us: u64_at(info, BUSY_TIME),
        rwnd_limited_us: u64_at(info, RWND_LIMITED),
        sndbuf_limited_us: u64_at(info, SNDBUF_LIMITED),
        snd_wnd_bytes: (info.len() >= SND_WND + 4).then(|| u32_at(info, SND_WND)),
        total_rto: (info.len() >= TOTAL_RTO + 2).then(|| u32::from(u16_at(info, TOTAL_RTO))),
    }
}

/// The kernel's `tcp_info` of a socket we hold (or a duplicate of one): the fallback when
/// socket diagnostics cannot be read in the socket's network namespace.
pub fn getsockopt(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<Vec<u8>> {
    use std::os::fd::AsRawFd;
    let mut buf = vec![0u8; 512];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `buf` and sets `len` to what it wrote.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    buf.truncate(len as usize);
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::{AsFd, AsRawFd};

    use super::{getsockopt, parse};

    #[test]
    fn a_short_struct_leaves_newer_fields_at_zero_and_never_reads_past_its_end() {
        let mut full = vec![0u8; 240];
        full[0] = 1;
        full[24..28].copy_from_slice(&3u32.to_ne_bytes());
        full[144..148].copy_from_slice(&77u32.to_ne_bytes());
        full[168..176].copy_from_slice(&9u64.to_ne_bytes());
        let s = parse(&full, 5);
        assert_eq!(
            (s.at_ns, s.state, s.unacked, s.notsent_bytes),
            (5, 1, 3, 77)
        );
        assert_eq!(s.busy_us, 9);
        // A 4.9-era struct ends before tcpi_busy_time; one cut mid-field keeps it 0.
        let old = parse(&full[..168], 5);
        assert_eq!((old.notsent_bytes, old.busy_us), (77, 0));
        assert_eq!(parse(&full[..146], 5).notsent_bytes, 0, "a field cut short");
        assert_eq!(parse(&[], 0), Default::default());
    }

    /// Review item 6: a kernel before 5.4 has no tcpi_snd_wnd; it is unknown, not a window of 0.
    #[test]
    fn the_peers_window_is_unknown_when_the_struct_is_too_short_to_hold_it() {
        let mut full = vec![0u8; 240];
        full[228..232].copy_from_slice(&65536u32.to_ne_bytes());
        assert_eq!(parse(&full, 0).snd_wnd_bytes, Some(65536));
        assert_eq!(parse(&full[..232], 0).snd_wnd_bytes, Some(65536));
        assert_eq!(parse(&full[..231], 0).snd_wnd_bytes, None, "cut mid-field");
        assert_eq!(
            parse(&full[..216], 0).snd_wnd_bytes,
            None,
            "a 4.19-era struct"
        );
        full[228..232].copy_from_slice(&0u32.to_ne_bytes());
        assert_eq!(
            parse(&full, 0).snd_wnd_bytes,
            Some(0),
            "a zero window is said"
        );
    }

    #[test]
    fn offsets_match_the_kernel_on_a_real_loopback_connection() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (mut s, _) = l.accept().expect("accept");
        c.write_all(&[7u8; 1000]).expect("write");
        let mut got = [0u8; 1000];
        s.read_exact(&mut got).expect("read");
        s.write_all(b"ok").expect("reply");
        let mut two = [0u8; 2];
        c.read_exact(&mut two).expect("read reply");
        let info = getsockopt(c.as_fd()).expect("TCP_INFO");
        let t = parse(&info, 0);
        assert_eq!(t.state, 1, "ESTABLISHED");
        assert_eq!(t.bytes_received, 2);
        // The kernel counts the SYN among the bytes acknowledged.
        assert_eq!(t.bytes_acked, 1001, "the reply acknowledged the request");
        assert!(t.bytes_sent >= 1000 || info.len() < 208, "{t:?}");
        assert!(
            t.data_segs_out >= 1 && t.segs_out >= t.data_segs_out,
            "{t:?}"
        );
        assert!(t.snd_mss > 1000 && t.rtt_us > 0, "{t:?}");
        assert!(
            t.snd_wnd_bytes.is_some_and(|w| w > 0) || info.len() < 232,
            "{t:?}"
        );
        // No timeout on a connection whose every segment was acknowledged at once.
        assert!(t.total_rto.is_none_or(|n| n == 0), "{t:?}");
        assert_eq!(t.total_rto.is_some(), info.len() >= 242, "{t:?}");
    }

    /// A SYN the listener's full accept queue drops is retransmitted after the initial RTO
    /// (1 s): `tcpi_total_rto` counts it (its offset, on kernels that report it).
    #[test]
    fn a_dropped_syn_is_one_retransmission_timeout() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        // SAFETY: listen on our own listener's descriptor, a backlog of 0 (one pending).
        unsafe { libc::listen(l.as_raw_fd(), 0) };
        // Connections never accepted, none waiting for its handshake: the first ones fill the
        // accept queue, the SYNs of the others are dropped and retransmitted.
        let socks: Vec<socket2::Socket> = (0..3)
            .map(|_| {
                let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
                    .expect("socket");
                s.set_nonblocking(true).expect("nonblocking");
                let _ = s.connect(&addr.into());
                s
            })
            .collect();
        let rtos = || -> Vec<Option<u32>> {
            socks
                .iter()
                .map(|s| parse(&getsockopt(s.as_fd()).expect("TCP_INFO"), 0).total_rto)
                .collect()
        };
        if rtos().iter().any(Option::is_none) {
            eprintln!("SKIPPED: this kernel's tcp_info has no tcpi_total_rto (before 6.7)");
            return;
        }
        let start = std::time::Instant::now();
        loop {
            let now = rtos();
            if now.iter().any(|n| n.is_some_and(|n| n >= 1)) {
                // The first connection was accepted into the queue at once: no timeout.
                assert_eq!(now[0], Some(0), "{now:?}");
                break;
            }
            assert!(
                start.elapsed() < std::time::Duration::from_secs(10),
                "no retransmission timeout counted: {now:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}
