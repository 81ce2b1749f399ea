//! Writes a capture of N TCP connections that are all open at once, the traffic a busy server
//! (a load balancer, an API server) sees: each connection is a handshake, one small request,
//! one response and a close, and every connection has opened and exchanged before the first
//! one closes.
//!
//!     cargo run --release -p tcpdoctor-core --example concurrent_conns -- OUT.pcap N
//!
//! Connection i (0-based) runs from client 10.x.y.z (10.0.0.0 + i + 1: one address per
//! connection, so a per-client table sees N clients; port 1024 + i % 64000) to the server
//! 172.16.0.1:9000 (a port without a Wireshark dissector: tshark reads the payload as data).
//! Its packets, at the capture point next to the server (about 1 ms round trip to the client):
//!   open at t0 = i × 10 µs: SYN (t0), SYN-ACK (+20 µs), ACK (+1 ms), 64-byte request
//!   (+1.01 ms), ACK-bearing 200-byte response (+1.05 ms);
//!   close at t1 = N × 10 µs + 5 ms + i × 10 µs: FIN from the client (t1), FIN-ACK from the
//!   server (+20 µs), last ACK (+1 ms).
//! So 8 packets a connection, written in timestamp order, Ethernet link type, correct IPv4 and
//! TCP checksums, microsecond pcap. Prints `packets=` and `flows=` lines on stdout.

use std::fs::File;
use std::io::{BufWriter, Write};

const SERVER: [u8; 4] = [172, 16, 0, 1];
const SERVER_PORT: u16 = 9000;
const SPACING_US: u64 = 10;
const REQUEST: usize = 64;
const RESPONSE: usize = 200;

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;
const PSH: u8 = 0x08;
const FIN: u8 = 0x01;

#[derive(Clone, Copy)]
enum Step {
    Syn,
    SynAck,
    Ack,
    Request,
    Response,
    Fin,
    FinAck,
    LastAck,
}

/// The packets of one phase of a connection: (offset from its start in µs, step).
const OPEN: [(u64, Step); 5] = [
    (0, Step::Syn),
    (20, Step::SynAck),
    (1000, Step::Ack),
    (1010, Step::Request),
    (1050, Step::Response),
];
const CLOSE: [(u64, Step); 3] = [(0, Step::Fin), (20, Step::FinAck), (1000, Step::LastAck)];

fn client(i: u64) -> ([u8; 4], u16) {
    let a = (0x0a00_0000u32 + (i as u32 + 1)).to_be_bytes();
    (a, 1024 + (i % 64_000) as u16)
}

fn sum16(data: &[u8], mut acc: u32) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [b] = chunks.remainder() {
        acc += u32::from(*b) << 8;
    }
    acc
}

fn fold(mut acc: u32) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// One Ethernet frame of connection `i` at `step`.
fn frame(i: u64, step: Step, buf: &mut Vec<u8>) {
    let (caddr, cport) = client(i);
    let cisn = (i as u32).wrapping_mul(2_654_435_761);
    let sisn = cisn ^ 0x5a5a_5a5a;
    let c = |d: u32| cisn.wrapping_add(d);
    let s = |d: u32| sisn.wrapping_add(d);
    // (to server, flags, seq, ack, payload length, MSS option)
    let (up, flags, seq, ack, len, mss) = match step {
        Step::Syn => (true, SYN, cisn, 0, 0, true),
        Step::SynAck => (false, SYN | ACK, sisn, c(1), 0, true),
        Step::Ack => (true, ACK, c(1), s(1), 0, false),
        Step::Request => (true, PSH | ACK, c(1), s(1), REQUEST, false),
        Step::Response => (
            false,
            PSH | ACK,
            s(1),
            c(1 + REQUEST as u32),
            RESPONSE,
            false,
        ),
        Step::Fin => (
            true,
            FIN | ACK,
            c(1 + REQUEST as u32),
            s(1 + RESPONSE as u32),
            0,
            false,
        ),
        Step::FinAck => (
            false,
            FIN | ACK,
            s(1 + RESPONSE as u32),
            c(2 + REQUEST as u32),
            0,
            false,
        ),
        Step::LastAck => (
            true,
            ACK,
            c(2 + REQUEST as u32),
            s(2 + RESPONSE as u32),
            0,
            false,
        ),
    };
    let (src, sport, dst, dport) = if up {
        (caddr, cport, SERVER, SERVER_PORT)
    } else {
        (SERVER, SERVER_PORT, caddr, cport)
    };
    let tcp_len = if mss { 24 } else { 20 } + len;
    buf.clear();
    buf.extend_from_slice(&[0x02, 0, 0, 0, 0, if up { 2 } else { 1 }]);
    buf.extend_from_slice(&[0x02, 0, 0, 0, 0, if up { 1 } else { 2 }]);
    buf.extend_from_slice(&[0x08, 0x00]);
    let ip = buf.len();
    let total = (20 + tcp_len) as u16;
    buf.extend_from_slice(&[0x45, 0]);
    buf.extend_from_slice(&total.to_be_bytes());
    buf.extend_from_slice(&[0, 0, 0x40, 0, 64, 6, 0, 0]);
    buf.extend_from_slice(&src);
    buf.extend_from_slice(&dst);
    let ipsum = fold(sum16(&buf[ip..ip + 20], 0));
    buf[ip + 10..ip + 12].copy_from_slice(&ipsum.to_be_bytes());
    let tcp = buf.len();
    buf.extend_from_slice(&sport.to_be_bytes());
    buf.extend_from_slice(&dport.to_be_bytes());
    buf.extend_from_slice(&seq.to_be_bytes());
    buf.extend_from_slice(&ack.to_be_bytes());
    buf.push(if mss { 6 << 4 } else { 5 << 4 });
    buf.push(flags);
    buf.extend_from_slice(&64_240u16.to_be_bytes());
    buf.extend_from_slice(&[0, 0, 0, 0]);
    if mss {
        buf.extend_from_slice(&[2, 4, 0x05, 0xb4]);
    }
    buf.extend((0..len).map(|k| b'a' + (k % 26) as u8));
    let mut acc = sum16(&src, 0);
    acc = sum16(&dst, acc);
    acc += 6 + tcp_len as u32;
    let tcpsum = fold(sum16(&buf[tcp..], acc));
    buf[tcp + 16..tcp + 18].copy_from_slice(&tcpsum.to_be_bytes());
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(out), Some(n)) = (args.get(1), args.get(2).and_then(|n| n.parse::<u64>().ok()))
    else {
        eprintln!("usage: concurrent_conns OUT.pcap N");
        std::process::exit(2);
    };
    if n == 0 || n > 10_000_000 {
        eprintln!("concurrent_conns: N must be 1..=10000000");
        std::process::exit(2);
    }
    // Every packet as (timestamp µs, connection, step); sorted, then written.
    let start_us: u64 = 1_700_000_000 * 1_000_000;
    let close_at = n * SPACING_US + 5_000;
    let mut events: Vec<(u64, u32, u8)> = Vec::with_capacity(n as usize * 8);
    for i in 0..n {
        let t0 = i * SPACING_US;
        for (k, &(off, _)) in OPEN.iter().enumerate() {
            events.push((t0 + off, i as u32, k as u8));
        }
        for (k, &(off, _)) in CLOSE.iter().enumerate() {
            events.push((close_at + t0 + off, i as u32, (OPEN.len() + k) as u8));
        }
    }
    events.sort_unstable();
    let mut w = BufWriter::with_capacity(1 << 20, File::create(out)?);
    w.write_all(&0xa1b2_c3d4u32.to_le_bytes())?;
    w.write_all(&2u16.to_le_bytes())?;
    w.write_all(&4u16.to_le_bytes())?;
    w.write_all(&[0; 8])?;
    w.write_all(&65_535u32.to_le_bytes())?;
    w.write_all(&1u32.to_le_bytes())?;
    let mut buf = Vec::with_capacity(512);
    for &(t, i, k) in &events {
        let step = if (k as usize) < OPEN.len() {
            OPEN[k as usize].1
        } else {
            CLOSE[k as usize - OPEN.len()].1
        };
        frame(u64::from(i), step, &mut buf);
        let ts = start_us + t;
        w.write_all(&((ts / 1_000_000) as u32).to_le_bytes())?;
        w.write_all(&((ts % 1_000_000) as u32).to_le_bytes())?;
        w.write_all(&(buf.len() as u32).to_le_bytes())?;
        w.write_all(&(buf.len() as u32).to_le_bytes())?;
        w.write_all(&buf)?;
    }
    w.flush()?;
    println!("packets={}", events.len());
    println!("flows={n}");
    Ok(())
}
