//! The whole `analyze --format json` pipeline (see `pipeline/mod.rs`) on captures that are
//! always valid pcap: the fuzzer's bytes (through `arbitrary`) pick a few TCP connections
//! between a few hosts and a sequence of events on them — handshakes, data, pure ACKs, window
//! updates (zero windows too), retransmissions, segments out of order, keepalives, FIN, RST,
//! and arbitrary header values — with gaps between packets from nanoseconds to minutes, and
//! timestamps that may step back. Each packet is written over Ethernet (optionally VLAN-tagged)
//! or raw IP, IPv4 or IPv6, with TCP options (MSS, window scale, SACK-permitted and SACK
//! blocks, timestamps), whole or cut to a snap length. So every input reaches flows, turns and
//! the detectors instead of dying in the reader. Some inputs also say the client was the
//! scripted driver, with the message ends it would have recorded, so the driver-only rules run.
//!
//! ```text
//! fuzz/seed-corpus.sh   # (this target starts from nothing; the seeds are for analyze_pipeline)
//! cd fuzz && cargo +nightly fuzz run analyze_structured -- -jobs=1 -max_total_time=900 -rss_limit_mb=2048 -timeout=10 -max_len=16384 -len_control=20
//! ```

#![no_main]

mod pipeline;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use pipeline::{client_from, Driver};
use tcpdoctor_core::flow::Direction;
use tcpdoctor_core::message_ends::{ConnectionEnds, MessageEnds};
use tcpdoctor_core::wire::write::{PcapWriter, LINKTYPE_ETHERNET, LINKTYPE_RAW};
use tcpdoctor_core::wire::Endpoint;
use tcpdoctor_core::Timestamp;

#[derive(Arbitrary, Debug)]
struct Input {
    link: Link,
    /// Bytes kept per packet: whole packets, or `tcpdump -s 96`.
    snap: bool,
    conns: Vec<ConnSpec>,
    events: Vec<Event>,
    /// The scripted driver's flags, when it was the client.
    driver: Option<[u8; 4]>,
    /// Whether the driver recorded its message ends (each data event one message, or merged).
    message_ends: Option<u8>,
    /// Which frames the far end of the path misses, and its delay.
    drop: u8,
    /// The first timestamp, in seconds.
    start: u32,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Link {
    Ethernet,
    Vlan(u16),
    Raw,
}

#[derive(Arbitrary, Debug)]
struct ConnSpec {
    v6: bool,
    client: u8,
    server: u8,
    client_port: u16,
    server_port: u16,
    isn: [u32; 2],
    mss: u16,
    wscale: Option<u8>,
    sack: bool,
    timestamps: bool,
    window: [u16; 2],
}

#[derive(Arbitrary, Debug)]
struct Event {
    conn: u8,
    /// The sender: the server when true.
    server: bool,
    what: What,
    /// Time since the previous packet: `gap` × 4^`scale` nanoseconds (scale ≤ 15: up to minutes).
    gap: u16,
    scale: u8,
    /// The gap goes backwards (a clock step, a merged file).
    back: bool,
}

#[derive(Arbitrary, Debug)]
enum What {
    Syn,
    SynAck,
    Ack {
        behind: u16,
        sack: Option<(u16, u16)>,
    },
    Data {
        len: u16,
        push: bool,
    },
    /// A burst of full-sized segments.
    Burst {
        segments: u8,
    },
    Retransmit {
        back: u16,
        len: u16,
    },
    Ahead {
        skip: u16,
        len: u16,
    },
    Window {
        window: u16,
    },
    Keepalive {
        one_byte: bool,
    },
    Fin,
    Rst,
    /// Request/response turns: the client writes `request` bytes, the server answers
    /// `response` bytes `serve` gaps later, the client acknowledges, thinks `think` gaps, and
    /// again (`repeat` more times), each write cut at the MSS.
    Exchange {
        request: u16,
        response: u16,
        serve: u8,
        think: u8,
        repeat: u8,
        ack_first: bool,
    },
    Wild {
        seq: i32,
        ack: i32,
        flags: u8,
        len: u16,
        window: u16,
    },
}

struct Conn {
    v6: bool,
    hosts: [u8; 2],
    ports: [u16; 2],
    isn: [u32; 2],
    /// The next sequence number each side sends.
    next: [u32; 2],
    mss: u16,
    wscale: Option<u8>,
    sack: bool,
    timestamps: bool,
    window: [u16; 2],
    tsval: [u32; 2],
    /// Message lengths each side wrote (for the driver's message ends).
    messages: [Vec<usize>; 2],
}

const SYN: u8 = 0x02;
const FIN: u8 = 0x01;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;

fn addr(v6: bool, host: u8) -> IpAddr {
    match v6 {
        false => IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1 + host % 4)),
        true => IpAddr::V6(Ipv6Addr::new(
            0xfd00,
            0,
            0,
            0,
            0,
            0,
            0,
            1 + u16::from(host % 4),
        )),
    }
}

impl Conn {
    fn new(s: &ConnSpec) -> Conn {
        Conn {
            v6: s.v6,
            hosts: [s.client, s.server],
            ports: [s.client_port, s.server_port],
            isn: s.isn,
            next: s.isn,
            mss: s.mss,
            wscale: s.wscale,
            sack: s.sack,
            timestamps: s.timestamps,
            window: s.window,
            tsval: [s.isn[0] ^ 0x5555, s.isn[1] ^ 0xaaaa],
            messages: [Vec::new(), Vec::new()],
        }
    }

    fn endpoint(&self, side: usize) -> Endpoint {
        Endpoint {
            ip: addr(self.v6, self.hosts[side]),
            port: self.ports[side],
        }
    }
}

/// One segment to write: sender side, seq, ack, flags, window, payload length, options.
#[derive(Clone, Copy)]
struct Seg {
    side: usize,
    seq: u32,
    ack: u32,
    flags: u8,
    window: u16,
    len: usize,
    syn_options: bool,
    sack: Option<(u32, u32)>,
}

struct Writer {
    out: PcapWriter<Vec<u8>>,
    link: Link,
    /// Nanoseconds since the epoch (never below zero).
    now: u64,
    packets: usize,
}

impl Writer {
    fn packet(&mut self, c: &Conn, s: &Seg) {
        // A fuzz input is a small capture: past this, the run measures the machine's speed.
        if self.packets >= MAX_FRAMES {
            return;
        }
        self.packets += 1;
        let side = s.side;
        let mut opts = Vec::new();
        if s.syn_options {
            opts.extend([2, 4]);
            opts.extend(c.mss.to_be_bytes());
            if let Some(ws) = c.wscale {
                opts.extend([1, 3, 3, ws]);
            }
            if c.sack {
                opts.extend([1, 1, 4, 2]);
            }
        }
        if c.timestamps {
            let tsval = c.tsval[side].wrapping_add((self.now / 1_000_000) as u32);
            let tsecr = match s.flags & ACK {
                0 => 0,
                _ => c.tsval[1 - side].wrapping_add((self.now / 1_000_000) as u32),
            };
            opts.extend([1, 1, 8, 10]);
            opts.extend(tsval.to_be_bytes());
            opts.extend(tsecr.to_be_bytes());
        }
        if let Some((a, b)) = s.sack {
            opts.extend([1, 1, 5, 10]);
            opts.extend(a.to_be_bytes());
            opts.extend(b.to_be_bytes());
        }
        while opts.len() % 4 != 0 {
            opts.push(0);
        }
        let tcp_len = 20 + opts.len();
        let mut tcp = Vec::with_capacity(tcp_len);
        tcp.extend(c.ports[side].to_be_bytes());
        tcp.extend(c.ports[1 - side].to_be_bytes());
        tcp.extend(s.seq.to_be_bytes());
        tcp.extend(s.ack.to_be_bytes());
        tcp.push(((tcp_len / 4) as u8) << 4);
        tcp.push(s.flags);
        tcp.extend(s.window.to_be_bytes());
        tcp.extend([0, 0, 0, 0]);
        tcp.extend(&opts);
        let (src, dst) = (addr(c.v6, c.hosts[side]), addr(c.v6, c.hosts[1 - side]));
        let mut ip = Vec::with_capacity(40 + tcp_len);
        let ethertype: u16 = match (src, dst) {
            (IpAddr::V4(s4), IpAddr::V4(d4)) => {
                let total = (20 + tcp_len + s.len).min(65535) as u16;
                ip.extend([0x45, 0]);
                ip.extend(total.to_be_bytes());
                ip.extend([0, 0, 0x40, 0, 64, 6, 0, 0]);
                ip.extend(s4.octets());
                ip.extend(d4.octets());
                let sum = checksum(&ip);
                ip[10..12].copy_from_slice(&sum.to_be_bytes());
                0x0800
            }
            (IpAddr::V6(s6), IpAddr::V6(d6)) => {
                let payload = (tcp_len + s.len).min(65535) as u16;
                ip.extend([0x60, 0, 0, 0]);
                ip.extend(payload.to_be_bytes());
                ip.extend([6, 64]);
                ip.extend(s6.octets());
                ip.extend(d6.octets());
                0x86dd
            }
            _ => unreachable!("both ends of a connection share its family"),
        };
        let mut frame = Vec::with_capacity(18 + ip.len() + tcp_len + s.len.min(256));
        match self.link {
            Link::Raw => {}
            Link::Ethernet | Link::Vlan(_) => {
                frame.extend([2, 0, 0, 0, 0, 1 + side as u8, 2, 0, 0, 0, 0, 2 - side as u8]);
                if let Link::Vlan(tci) = self.link {
                    frame.extend(0x8100u16.to_be_bytes());
                    frame.extend((tci & 0x0fff).to_be_bytes());
                }
                frame.extend(ethertype.to_be_bytes());
            }
        }
        frame.extend(&ip);
        frame.extend(&tcp);
        let orig = frame.len() + s.len;
        // The payload itself is never read: keep up to 256 bytes of it (the snap length cuts
        // further), the lengths say the rest.
        frame.resize(frame.len() + s.len.min(256), 0x61);
        let _ = self.out.write_packet(
            Timestamp::from_nanos(self.now),
            &frame,
            u32::try_from(orig).unwrap_or(u32::MAX),
        );
    }
}

fn checksum(b: &[u8]) -> u16 {
    let mut sum: u32 = b
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Frames written per input at most (an input of 61 bytes could ask for 216,000, which takes
/// over 10 s under the sanitizer, linearly: a big capture, not a bug).
const MAX_FRAMES: usize = 8_000;

/// The largest payload one IPv4 or IPv6 packet can state.
const MAX_LEN: usize = 65535 - 60 - 60;

fn build(input: &Input) -> (Vec<u8>, Vec<Conn>) {
    let mut conns: Vec<Conn> = input.conns.iter().take(8).map(Conn::new).collect();
    let link = match input.link {
        Link::Raw => LINKTYPE_RAW,
        _ => LINKTYPE_ETHERNET,
    };
    let snap = if input.snap { 96 } else { 262_144 };
    let out = PcapWriter::with_link_type(Vec::new(), snap, link).expect("writing to memory");
    let mut w = Writer {
        out,
        link: input.link,
        now: u64::from(input.start) * 1_000_000_000,
        packets: 0,
    };
    if conns.is_empty() {
        return (w.out.into_inner(), conns);
    }
    let n = conns.len();
    for e in input.events.iter().take(400) {
        let gap = u64::from(e.gap) << (2 * u32::from(e.scale % 16));
        w.now = match e.back {
            false => w.now.saturating_add(gap),
            true => w.now.saturating_sub(gap),
        };
        let c = &mut conns[usize::from(e.conn) % n];
        let side = usize::from(e.server);
        let other = 1 - side;
        let ack = c.next[other];
        let window = c.window[side];
        let mut seg = Seg {
            side,
            seq: c.next[side],
            ack,
            flags: ACK,
            window,
            len: 0,
            syn_options: false,
            sack: None,
        };
        match e.what {
            What::Syn => {
                seg.seq = c.isn[0];
                seg.side = 0;
                seg.ack = 0;
                seg.flags = SYN;
                seg.window = c.window[0];
                seg.syn_options = true;
                c.next[0] = c.isn[0].wrapping_add(1);
            }
            What::SynAck => {
                seg.seq = c.isn[1];
                seg.side = 1;
                seg.ack = c.isn[0].wrapping_add(1);
                seg.flags = SYN | ACK;
                seg.window = c.window[1];
                seg.syn_options = true;
                c.next[1] = c.isn[1].wrapping_add(1);
            }
            What::Ack { behind, sack } => {
                seg.ack = ack.wrapping_sub(u32::from(behind));
                if c.sack {
                    seg.sack = sack.map(|(a, b)| {
                        let left = ack.wrapping_add(u32::from(a));
                        (left, left.wrapping_add(u32::from(b)))
                    });
                }
            }
            What::Data { len, push } => {
                seg.len = usize::from(len).min(MAX_LEN);
                seg.flags = ACK | if push { PSH } else { 0 };
                c.next[side] = c.next[side].wrapping_add(seg.len as u32);
                c.messages[side].push(seg.len);
            }
            What::Burst { segments } => {
                let mss = usize::from(c.mss.max(1)).min(MAX_LEN);
                for k in 0..segments % 32 {
                    let s = Seg {
                        seq: c.next[side],
                        len: mss,
                        flags: if k + 1 == segments % 32 {
                            ACK | PSH
                        } else {
                            ACK
                        },
                        ..seg
                    };
                    w.packet(c, &s);
                    c.next[side] = c.next[side].wrapping_add(mss as u32);
                    w.now = w.now.saturating_add(u64::from(e.gap));
                }
                c.messages[side].push(mss * usize::from(segments % 32));
                continue;
            }
            What::Exchange {
                request,
                response,
                serve,
                think,
                repeat,
                ack_first,
            } => {
                let unit = gap.max(1);
                for _ in 0..=repeat % 64 {
                    write(&mut w, c, seg, 0, usize::from(request));
                    w.now = w.now.saturating_add(unit * u64::from(serve));
                    if ack_first {
                        let a = Seg {
                            side: 1,
                            seq: c.next[1],
                            ack: c.next[0],
                            window: c.window[1],
                            ..seg
                        };
                        w.packet(c, &a);
                        w.now = w.now.saturating_add(unit);
                    }
                    write(&mut w, c, seg, 1, usize::from(response));
                    w.now = w.now.saturating_add(unit / 4);
                    let a = Seg {
                        side: 0,
                        seq: c.next[0],
                        ack: c.next[1],
                        window: c.window[0],
                        ..seg
                    };
                    w.packet(c, &a);
                    w.now = w.now.saturating_add(unit * u64::from(think));
                }
                continue;
            }
            What::Retransmit { back, len } => {
                let sent = c.next[side].wrapping_sub(c.isn[side]).wrapping_sub(1);
                seg.seq = c.next[side].wrapping_sub(u32::from(back).min(sent));
                seg.len = usize::from(len).min(MAX_LEN);
                seg.flags = ACK | PSH;
            }
            What::Ahead { skip, len } => {
                seg.seq = c.next[side].wrapping_add(u32::from(skip));
                seg.len = usize::from(len).min(MAX_LEN);
            }
            What::Window { window } => {
                c.window[side] = window;
                seg.window = window;
            }
            What::Keepalive { one_byte } => {
                seg.seq = c.next[side].wrapping_sub(1);
                seg.len = usize::from(one_byte);
            }
            What::Fin => {
                seg.flags = FIN | ACK;
                c.next[side] = c.next[side].wrapping_add(1);
            }
            What::Rst => seg.flags = RST | ACK,
            What::Wild {
                seq,
                ack,
                flags,
                len,
                window,
            } => {
                seg.seq = c.next[side].wrapping_add(seq as u32);
                seg.ack = ack_or(ack, c.next[other]);
                seg.flags = flags;
                seg.len = usize::from(len).min(MAX_LEN);
                seg.window = window;
                seg.syn_options = flags & SYN != 0;
            }
        }
        w.packet(c, &seg);
    }
    (w.out.into_inner(), conns)
}

/// One write of `len` bytes from `side`, cut at the MSS, PSH on its last segment.
fn write(w: &mut Writer, c: &mut Conn, like: Seg, side: usize, len: usize) {
    let mss = usize::from(c.mss.max(1)).min(MAX_LEN);
    let mut left = len.min(MAX_LEN * 4);
    c.messages[side].push(left);
    while left > 0 {
        let n = left.min(mss);
        left -= n;
        let s = Seg {
            side,
            seq: c.next[side],
            ack: c.next[1 - side],
            flags: if left == 0 { ACK | PSH } else { ACK },
            window: c.window[side],
            len: n,
            ..like
        };
        w.packet(c, &s);
        c.next[side] = c.next[side].wrapping_add(n as u32);
        w.now = w.now.saturating_add(1_000);
    }
}

fn ack_or(delta: i32, next: u32) -> u32 {
    next.wrapping_add(delta as u32)
}

/// The ends the driver would have recorded: each data event one message, or (`merge` bits
/// set) merged with the next.
fn message_ends(conns: &[Conn], merge: u8) -> MessageEnds {
    let recorded = conns.iter().map(|c| {
        let mut ends = ConnectionEnds::new(c.endpoint(0), c.endpoint(1));
        for (side, dir) in [Direction::ClientToServer, Direction::ServerToClient]
            .into_iter()
            .enumerate()
        {
            let mut pending = 0;
            for (i, len) in c.messages[side].iter().enumerate() {
                pending += len;
                if merge >> (i % 8) & 1 == 0 {
                    ends.message(dir, pending);
                    pending = 0;
                }
            }
            ends.message(dir, pending);
        }
        ends
    });
    MessageEnds::new(recorded.collect())
}

fuzz_target!(|input: Input| {
    let (pcap, conns) = build(&input);
    let driver = match input.driver {
        None => Driver::default(),
        Some(flags) => Driver {
            client: Some(client_from(flags)),
            ends: input
                .message_ends
                .map(|merge| Arc::new(message_ends(&conns, merge))),
        },
    };
    pipeline::run(&pcap, driver, input.drop);
});
