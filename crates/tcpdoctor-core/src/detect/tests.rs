//! Detectors on simulated time: timelines built segment by segment, as the capture point
//! would see them, run through the whole analyzer.

use std::net::{IpAddr, Ipv4Addr};

use crate::analysis::Analyzer;
use crate::flow::{Direction, PacketRef};
use crate::report::{Finding, FindingKind};
use crate::time::Timestamp;
use crate::wire::{Endpoint, TcpFlags, TcpOptions, TcpSegment};

const C2S: Direction = Direction::ClientToServer;
const S2C: Direction = Direction::ServerToClient;
const ACK: u8 = TcpFlags::ACK;
const PSH: u8 = TcpFlags::PSH;

/// One simulated connection seen from one capture point. Times are in microseconds.
struct Sim {
    an: Analyzer,
    frame: u64,
    client: Endpoint,
    server: Endpoint,
    cseq: u32,
    sseq: u32,
    window: [u16; 2],
}

impl Sim {
    fn new() -> Sim {
        Sim {
            an: Analyzer::default(),
            frame: 0,
            client: ep(40000),
            server: ep(7000),
            cseq: 1000,
            sseq: 90_000,
            window: [1000, 1000],
        }
    }

    /// Opens a new connection from a new client port: SYN at `t`, SYN-ACK after
    /// `to_server` µs, ACK `to_client` µs later (the round trips towards each side).
    fn connect(&mut self, port: u16, t: u64, to_server: u64, to_client: u64) {
        self.client = ep(port);
        self.cseq = 1000 + u32::from(port);
        self.sseq = 90_000;
        let mut opts = TcpOptions {
            mss: Some(1460),
            window_scale: Some(7),
            ..TcpOptions::default()
        };
        self.raw(C2S, t, self.cseq, 0, TcpFlags::SYN, 0, opts);
        opts.mss = Some(1460);
        self.raw(
            S2C,
            t + to_server,
            self.sseq,
            self.cseq + 1,
            TcpFlags::SYN | ACK,
            0,
            opts,
        );
        self.cseq += 1;
        self.sseq += 1;
        self.raw(
            C2S,
            t + to_server + to_client,
            self.cseq,
            self.sseq,
            ACK,
            0,
            TcpOptions::default(),
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn raw(
        &mut self,
        dir: Direction,
        t: u64,
        seq: u32,
        ack: u32,
        flags: u8,
        len: u32,
        o: TcpOptions,
    ) {
        let (src, dst) = match dir {
            C2S => (self.client, self.server),
            S2C => (self.server, self.client),
        };
        self.frame += 1;
        let seg = TcpSegment {
            src,
            dst,
            seq,
            ack,
            flags: TcpFlags(flags),
            window: self.window[dir.index()],
            payload_len: len,
            options: o,
        };
        self.an.on_segment(
            PacketRef {
                frame: self.frame,
                ts: Timestamp(t * 1000),
            },
            &seg,
        );
    }

    /// Data from `dir`, acknowledging everything the other side sent.
    fn data(&mut self, dir: Direction, t: u64, len: u32) {
        let (seq, ack) = match dir {
            C2S => (self.cseq, self.sseq),
            S2C => (self.sseq, self.cseq),
        };
        self.raw(dir, t, seq, ack, ACK | PSH, len, TcpOptions::default());
        match dir {
            C2S => self.cseq += len,
            S2C => self.sseq += len,
        }
    }

    /// Resends `len` bytes that `dir` sent starting `back` bytes ago.
    fn resend(&mut self, dir: Direction, t: u64, back: u32, len: u32) {
        let (seq, ack) = match dir {
            C2S => (self.cseq - back, self.sseq),
            S2C => (self.sseq - back, self.cseq),
        };
        self.raw(dir, t, seq, ack, ACK | PSH, len, TcpOptions::default());
    }

    /// A pure ACK from `dir` of everything the other side sent.
    fn ack(&mut self, dir: Direction, t: u64) {
        let (seq, ack) = match dir {
            C2S => (self.cseq, self.sseq),
            S2C => (self.sseq, self.cseq),
        };
        self.raw(dir, t, seq, ack, ACK, 0, TcpOptions::default());
    }

    fn close(&mut self, t: u64) {
        let (c, s) = (self.cseq, self.sseq);
        self.raw(C2S, t, c, s, TcpFlags::FIN | ACK, 0, TcpOptions::default());
        self.raw(
            S2C,
            t + 10,
            s,
            c + 1,
            TcpFlags::FIN | ACK,
            0,
            TcpOptions::default(),
        );
        self.raw(C2S, t + 20, c + 1, s + 1, ACK, 0, TcpOptions::default());
    }

    fn findings(self) -> Vec<Finding> {
        self.an.finish("sim.pcap", "pcap").1
    }
}

fn ep(port: u16) -> Endpoint {
    Endpoint {
        ip: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
        port,
    }
}

fn kinds(f: &[Finding]) -> Vec<(FindingKind, Direction)> {
    let mut v: Vec<_> = f.iter().map(|f| (f.kind, f.direction)).collect();
    v.sort_by_key(|(k, d)| (*k, d.index()));
    v
}

fn get(f: &[Finding], kind: FindingKind) -> &Finding {
    f.iter()
        .find(|x| x.kind == kind)
        .unwrap_or_else(|| panic!("no {kind} in {:?}", kinds(f)))
}

/// Per-line server with Nagle on, captured on loopback: the first line leaves, the client
/// delays its ACK 40 ms, the rest follows the ACK at once.
#[test]
fn perline_server_stalls_on_delayed_ack() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    for _ in 0..20 {
        s.data(C2S, t, 10);
        s.data(S2C, t + 60, 12);
        s.ack(C2S, t + 40_060);
        s.data(S2C, t + 40_090, 200);
        t += 41_000;
    }
    s.close(t);
    let f = s.findings();
    assert_eq!(
        kinds(&f),
        vec![
            (FindingKind::NagleDelayedAck, S2C),
            (FindingKind::FragmentedWrites, S2C)
        ]
    );
    let n = get(&f, FindingKind::NagleDelayedAck);
    assert_eq!(n.evidence.counts["stalled_turns"], 20);
    assert_eq!(n.evidence.counts["timer_40ms"], 20);
    assert!((n.evidence.values["median_stall_ms"] - 40.03).abs() < 1.0);
    assert_eq!(n.evidence.frames.len(), 3);
    assert!((n.time_lost_ms - 20.0 * 40.03).abs() < 20.0);
    let fw = get(&f, FindingKind::FragmentedWrites);
    assert_eq!(fw.evidence.counts["held_by_nagle"], 20);
}

/// A server that thinks 40 ms and answers in one segment: its own delayed ACK of the request
/// comes first, but nothing in the response was held. Not a stall.
#[test]
fn slow_server_is_not_a_nagle_stall() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    for _ in 0..20 {
        s.data(C2S, t, 10);
        s.ack(S2C, t + 40_000);
        s.data(S2C, t + 40_050, 212);
        t += 41_000;
    }
    s.close(t);
    assert_eq!(kinds(&s.findings()), vec![]);
}

/// A response whose second half comes 40 ms later with no ACK in between: the server was busy,
/// and the client's ACK came afterwards.
#[test]
fn pause_without_releasing_ack_is_not_a_stall() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    for _ in 0..20 {
        s.data(C2S, t, 10);
        s.data(S2C, t + 60, 12);
        s.data(S2C, t + 40_060, 200);
        s.ack(C2S, t + 40_100);
        t += 41_000;
    }
    s.close(t);
    let f = s.findings();
    assert!(
        !f.iter().any(|f| f.kind == FindingKind::NagleDelayedAck),
        "{:?}",
        kinds(&f)
    );
}

/// Write-write-read client: header, then the body held until the server's delayed ACK.
#[test]
fn write_write_read_client_stalls_requests() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    for _ in 0..10 {
        s.data(C2S, t, 8);
        s.ack(S2C, t + 40_000);
        s.data(C2S, t + 40_030, 100);
        s.data(S2C, t + 40_100, 50);
        t += 41_000;
    }
    s.close(t);
    let f = s.findings();
    assert_eq!(
        kinds(&f),
        vec![
            (FindingKind::NagleDelayedAck, C2S),
            (FindingKind::FragmentedWrites, C2S)
        ]
    );
}

/// Over a 30 ms path, captured at the client: the client's delayed ACK leaves 40 ms after the
/// first line arrived and the rest arrives one RTT after that. Each exchange takes ~100 ms.
#[test]
fn stall_over_a_wan_path_seen_from_the_client() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30_000, 20);
    let mut t = 100_000;
    for _ in 0..20 {
        s.data(C2S, t, 10);
        s.data(S2C, t + 30_100, 12);
        s.ack(C2S, t + 70_100);
        s.data(S2C, t + 100_150, 200);
        t += 101_000;
    }
    s.close(t);
    let f = s.findings();
    let n = get(&f, FindingKind::NagleDelayedAck);
    assert_eq!(n.direction, S2C);
    assert_eq!(n.evidence.counts["timer_40ms"], 20);
    assert!((n.evidence.values["median_stall_ms"] - 70.0).abs() < 3.0);
    assert!(!f.iter().any(|f| f.kind == FindingKind::RttBound));
}

/// Sequential commands over a 30 ms path: each exchange is one round trip.
#[test]
fn sequential_commands_over_wan_are_rtt_bound() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30_000, 20);
    let mut t = 100_000;
    for _ in 0..40 {
        s.data(C2S, t, 20);
        s.data(S2C, t + 30_200, 120);
        t += 30_300;
    }
    s.close(t);
    let f = s.findings();
    assert_eq!(kinds(&f), vec![(FindingKind::RttBound, C2S)]);
    let r = get(&f, FindingKind::RttBound);
    assert_eq!(r.evidence.counts["exchanges"], 40);
    assert!((r.evidence.values["rtt_ms"] - 30.0).abs() < 1.0);
    assert!(r.evidence.values["round_trip_share"] > 0.9);
}

/// The same commands pipelined: one turn each way.
#[test]
fn pipelined_commands_are_not_rtt_bound() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30_000, 20);
    s.data(C2S, 100_000, 800);
    s.data(S2C, 130_200, 1460);
    s.data(S2C, 130_210, 1460);
    s.data(S2C, 130_220, 1880);
    s.close(140_000);
    assert_eq!(kinds(&s.findings()), vec![]);
}

/// The same commands on loopback: round trips cost nothing worth naming.
#[test]
fn sequential_commands_on_loopback_are_fine() {
    let mut s = Sim::new();
    s.connect(40000, 0, 20, 10);
    let mut t = 1_000;
    for _ in 0..2000 {
        s.data(C2S, t, 20);
        s.data(S2C, t + 30, 120);
        t += 45;
    }
    s.close(t);
    assert_eq!(kinds(&s.findings()), vec![]);
}

#[test]
fn slow_reader_zero_window() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    s.data(C2S, 1_000, 10);
    let mut t = 2_000;
    for _ in 0..10 {
        s.data(S2C, t, 1460);
        s.window[C2S.index()] = 0;
        s.ack(C2S, t + 20);
        s.window[C2S.index()] = 1000;
        s.ack(C2S, t + 80_020);
        t += 81_000;
    }
    s.close(t);
    let f = s.findings();
    assert_eq!(kinds(&f), vec![(FindingKind::ZeroWindow, S2C)]);
    let z = get(&f, FindingKind::ZeroWindow);
    assert_eq!(z.evidence.counts["episodes"], 10);
    assert!((z.time_lost_ms - 800.0).abs() < 1.0);
}

#[test]
fn brief_zero_windows_in_bulk_are_normal() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    s.data(C2S, 1_000, 10);
    let mut t = 2_000;
    for _ in 0..200 {
        s.data(S2C, t, 1460);
        s.window[C2S.index()] = 0;
        s.ack(C2S, t + 20);
        s.window[C2S.index()] = 1000;
        s.ack(C2S, t + 300);
        t += 400;
    }
    s.close(t);
    assert_eq!(kinds(&s.findings()), vec![]);
}

#[test]
fn timeout_retransmission_is_a_stall_and_a_quick_probe_is_not() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    s.data(C2S, 1_000, 10);
    s.data(S2C, 1_100, 1000);
    s.data(S2C, 1_110, 300);
    s.resend(S2C, 21_110, 300, 300);
    s.ack(C2S, 21_200);
    assert_eq!(
        kinds(&s.findings()),
        vec![],
        "a 20 ms tail-loss probe is not a stall"
    );

    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    s.data(C2S, 1_000, 10);
    s.data(S2C, 1_100, 1000);
    s.data(S2C, 1_110, 300);
    s.resend(S2C, 215_110, 300, 300);
    s.resend(S2C, 630_110, 300, 300);
    s.ack(C2S, 630_200);
    let f = s.findings();
    assert_eq!(kinds(&f), vec![(FindingKind::RetransmissionStall, S2C)]);
    let r = get(&f, FindingKind::RetransmissionStall);
    assert_eq!(r.evidence.counts["stalls"], 1, "backoff counts once");
    assert!((r.time_lost_ms - 629.0).abs() < 1.0);
}

#[test]
fn connection_per_request_is_churn_and_reuse_is_not() {
    let mut s = Sim::new();
    for i in 0..40u16 {
        let t = u64::from(i) * 10_000;
        s.connect(41000 + i, t, 30, 10);
        s.data(C2S, t + 100, 20);
        s.data(S2C, t + 200, 100);
        s.close(t + 300);
    }
    let f = s.findings();
    assert_eq!(kinds(&f), vec![(FindingKind::ConnectionChurn, C2S)]);
    assert_eq!(get(&f, FindingKind::ConnectionChurn).flows_affected, 40);

    let mut s = Sim::new();
    s.connect(41000, 0, 30, 10);
    for i in 0..40u64 {
        s.data(C2S, 100 + i * 10_000, 20);
        s.data(S2C, 200 + i * 10_000, 100);
    }
    s.close(500_000);
    assert_eq!(kinds(&s.findings()), vec![]);
}

/// Quick-ack mode at connection start: each line is ACKed at once, so each leaves alone.
#[test]
fn many_tiny_segments_per_response_are_fragmented_writes() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    for _ in 0..5 {
        s.data(C2S, t, 10);
        for k in 0..8 {
            s.data(S2C, t + 50 + k * 10, 14);
        }
        t += 1_000;
    }
    s.close(t);
    let f = s.findings();
    assert_eq!(kinds(&f), vec![(FindingKind::FragmentedWrites, S2C)]);
    let fw = get(&f, FindingKind::FragmentedWrites);
    assert_eq!(fw.evidence.counts["fragmented_turns"], 5);
    assert_eq!(fw.evidence.histogram[0].value, "14");
    assert_eq!(fw.evidence.histogram[0].count, 40);
}

#[test]
fn bulk_transfer_is_not_fragmented() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    for _ in 0..5 {
        s.data(C2S, t, 10);
        for k in 0..20 {
            s.data(S2C, t + 50 + k * 10, 1460);
        }
        t += 1_000;
    }
    s.close(t);
    assert_eq!(kinds(&s.findings()), vec![]);
}

impl Sim {
    /// Data from `dir` whose ACK field covers only the other side's bytes up to `ack` (a peer
    /// that has not yet received everything the capture point saw).
    fn data_acking(&mut self, dir: Direction, t: u64, len: u32, ack: u32) {
        let seq = match dir {
            C2S => self.cseq,
            S2C => self.sseq,
        };
        self.raw(dir, t, seq, ack, ACK | PSH, len, TcpOptions::default());
        match dir {
            C2S => self.cseq += len,
            S2C => self.sseq += len,
        }
    }

    /// The connection data, ACKs and closes go to (several may be open at once).
    fn conn(&self) -> (Endpoint, u32, u32) {
        (self.client, self.cseq, self.sseq)
    }

    fn set_conn(&mut self, c: (Endpoint, u32, u32)) {
        (self.client, self.cseq, self.sseq) = c;
    }
}

fn values(f: &Finding) -> (f64, f64) {
    (f.evidence.values["wall_ms"], f.time_lost_ms)
}

/// nDPI `ultrasurf.pcap` (flow 10.132.0.23:38120 → 65.49.68.25:50053), captured at the
/// client over a 211 ms path: the client keeps about ten requests in flight, so each response
/// arrives ~10 ms after the latest request (it answers one sent a round trip earlier). The
/// turns alternate, yet no exchange after the first waited a round trip: nothing here is
/// round-trip bound, and the old rule claimed a saving larger than the time measured.
#[test]
fn pipelining_client_over_wan_is_not_rtt_bound() {
    let mut s = Sim::new();
    s.connect(40000, 0, 211_000, 50);
    let start = 300_000;
    let mut acked_at: Vec<(u64, u32)> = Vec::new();
    let mut events: Vec<(u64, Direction)> = Vec::new();
    for k in 0..60u64 {
        events.push((start + k * 20_000, C2S));
        events.push((start + k * 20_000 + 211_000, S2C));
    }
    events.sort_by_key(|&(t, dir)| (t, dir.index()));
    for (t, dir) in events {
        match dir {
            C2S => {
                s.data(C2S, t, 40);
                acked_at.push((t, s.cseq));
            }
            S2C => {
                // The server has received the requests sent up to one round trip ago.
                let ack = acked_at
                    .iter()
                    .filter(|(sent, _)| sent + 211_000 <= t)
                    .map(|&(_, a)| a)
                    .max()
                    .unwrap_or(s.cseq);
                s.data_acking(S2C, t, 300, ack);
            }
        }
    }
    s.close(start + 60 * 20_000 + 300_000);
    let f = s.findings();
    for x in f.iter().filter(|x| x.kind == FindingKind::RttBound) {
        let (wall, lost) = values(x);
        assert!(lost <= wall, "saves {lost} ms of {wall} ms: {}", x.verdict);
    }
    assert!(
        !f.iter().any(|x| x.kind == FindingKind::RttBound),
        "{:?}",
        kinds(&f)
    );
}

/// Sequential commands seen at the server's end of a 30 ms path: each exchange looks short
/// (the server answers in 0.2 ms), but the next request arrives one round trip after the
/// response left. The client pays the round trip in the silence, and the flow is round-trip
/// bound.
#[test]
fn sequential_commands_seen_at_the_server_are_rtt_bound() {
    let mut s = Sim::new();
    s.connect(40000, 0, 20, 30_000);
    let mut t = 100_000;
    for _ in 0..40 {
        s.data(C2S, t, 20);
        s.data(S2C, t + 200, 120);
        t += 30_300;
    }
    s.close(t);
    let f = s.findings();
    assert_eq!(kinds(&f), vec![(FindingKind::RttBound, C2S)]);
    let r = get(&f, FindingKind::RttBound);
    assert_eq!(r.evidence.counts["exchanges"], 40);
    assert!((r.evidence.values["rtt_ms"] - 30.0).abs() < 1.0);
    let (wall, lost) = values(r);
    assert!(lost <= wall, "saves {lost} ms of {wall} ms");
    assert!((lost - 39.0 * 30.0).abs() < 40.0, "saves {lost} ms");
    assert!(r.fix.contains("pipeline"), "{}", r.fix);
}

/// 30 sequential exchanges over a 30 ms path (at the client), then 30 requests sent every
/// 2.1 ms, each answered one round trip later: after the first of those, each response
/// arrives 0.8 ms after the latest request (it answers one sent 30 ms before). Only the
/// exchanges that spanned a round trip count (the 30, the first pipelined one and the last,
/// whose answers did take one), and the saving counts only their round trips.
#[test]
fn only_sequential_exchanges_count_and_the_saving_never_exceeds_the_time_measured() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30_000, 20);
    let mut t = 100_000;
    for _ in 0..30 {
        s.data(C2S, t, 20);
        s.data(S2C, t + 30_200, 120);
        t += 30_300;
    }
    let mut events: Vec<(u64, Direction)> = Vec::new();
    for k in 0..30u64 {
        events.push((t + k * 2_100, C2S));
        events.push((t + k * 2_100 + 30_200, S2C));
    }
    events.sort_by_key(|&(t, dir)| (t, dir.index()));
    let mut sent: Vec<(u64, u32)> = Vec::new();
    for (at, dir) in events {
        if dir == C2S {
            s.data(C2S, at, 20);
            sent.push((at, s.cseq));
        } else {
            let ack = sent
                .iter()
                .filter(|(x, _)| x + 30_000 <= at)
                .map(|&(_, a)| a)
                .max()
                .unwrap_or(s.cseq);
            s.data_acking(S2C, at, 120, ack);
        }
    }
    s.close(t + 200_000);
    let f = s.findings();
    let r = get(&f, FindingKind::RttBound);
    assert_eq!(r.evidence.counts["exchanges"], 32);
    assert_eq!(r.evidence.counts["overlapped_exchanges"], 14);
    let (wall, lost) = values(r);
    assert!(lost <= wall, "saves {lost} ms of {wall} ms");
    assert!((lost - 31.0 * 30.0).abs() < 30.0, "saves {lost} ms");
}

/// Six keep-alive connections from one browser to one server over a 30 ms path, used at the
/// same time, each strictly sequential (HTTP/1.1 without pipelining; the shape of nDPI
/// `tcp_ports.pcapng`'s parallel connections). Pipelining is not what a browser can do: the
/// fix is multiplexing or fewer requests, and the saving is bounded by the elapsed time the
/// connections covered, not their sum.
#[test]
fn concurrent_connections_from_one_client_are_advised_to_multiplex() {
    let mut s = Sim::new();
    let mut conns = Vec::new();
    for k in 0..6u16 {
        s.connect(41000 + k, u64::from(k) * 1_000, 30_000, 20);
        conns.push(s.conn());
    }
    let start = 100_000;
    let mut events: Vec<(u64, usize, Direction)> = Vec::new();
    for (k, _) in conns.iter().enumerate() {
        for i in 0..20u64 {
            let t = start + k as u64 * 4_000 + i * 30_300;
            events.push((t, k, C2S));
            events.push((t + 30_200, k, S2C));
        }
    }
    events.sort_by_key(|&(t, k, dir)| (t, k, dir.index()));
    for (t, k, dir) in events {
        s.set_conn(conns[k]);
        s.data(dir, t, if dir == C2S { 30 } else { 400 });
        conns[k] = s.conn();
    }
    let end = start + 20 * 30_300 + 30_000;
    for (k, c) in conns.clone().into_iter().enumerate() {
        s.set_conn(c);
        s.close(end + k as u64 * 100);
    }
    let f = s.findings();
    let r = get(&f, FindingKind::RttBound);
    assert_eq!(r.flows_affected, 6);
    assert_eq!(r.evidence.counts["concurrent_flows"], 6);
    assert!(r.fix.contains("multiplex"), "{}", r.fix);
    assert!(!r.fix.contains("pipeline"), "{}", r.fix);
    let elapsed = r.evidence.values["elapsed_ms"];
    assert!(elapsed < 700.0, "elapsed {elapsed} ms");
    assert!(
        r.time_lost_ms <= elapsed,
        "saves {} of {elapsed} ms",
        r.time_lost_ms
    );
}

/// The same client using its connections one after another is told to pipeline or batch.
#[test]
fn connections_used_one_after_another_are_advised_to_pipeline() {
    let mut s = Sim::new();
    let mut t = 0;
    for k in 0..3u16 {
        s.connect(41000 + k, t, 30_000, 20);
        t += 40_000;
        for _ in 0..20 {
            s.data(C2S, t, 30);
            s.data(S2C, t + 30_200, 400);
            t += 30_300;
        }
        s.close(t);
        t += 1_000;
    }
    let f = s.findings();
    let r = get(&f, FindingKind::RttBound);
    assert_eq!(r.flows_affected, 3);
    assert_eq!(r.evidence.counts["concurrent_flows"], 0);
    assert!(r.fix.contains("pipeline"), "{}", r.fix);
}

/// One line per write with TCP_NODELAY and nothing held: many packets, no time lost. That is
/// information, not a warning, and the text says why it still matters.
#[test]
fn fragmented_writes_that_cost_no_time_are_info() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    for _ in 0..20 {
        s.data(C2S, t, 10);
        for k in 0..8 {
            s.data(S2C, t + 50 + k * 10, 14);
        }
        t += 1_000;
    }
    s.close(t);
    let f = s.findings();
    let fw = get(&f, FindingKind::FragmentedWrites);
    assert_eq!(fw.severity, crate::report::Severity::Info);
    assert_eq!(fw.time_lost_ms, 0.0);
    assert!(fw.verdict.contains("Nagle"), "{}", fw.verdict);
    assert!(fw.verdict.contains("syscall"), "{}", fw.verdict);
}

/// When Nagle held pieces until the peer's delayed ACK, the pattern cost time: a warning,
/// with that time.
#[test]
fn fragmented_writes_held_by_nagle_are_a_warning_with_the_time_held() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    for _ in 0..20 {
        s.data(C2S, t, 10);
        s.data(S2C, t + 60, 12);
        s.ack(C2S, t + 40_060);
        s.data(S2C, t + 40_090, 200);
        t += 41_000;
    }
    s.close(t);
    let f = s.findings();
    let fw = get(&f, FindingKind::FragmentedWrites);
    assert_eq!(fw.severity, crate::report::Severity::Warning);
    assert!(
        (fw.time_lost_ms - 20.0 * 40.03).abs() < 20.0,
        "{}",
        fw.time_lost_ms
    );
}

/// TLS on port 443, one record per write: common, and no time lost. Info, and the fix is to
/// buffer the records of a flight.
#[test]
fn tls_records_one_per_write_are_info_and_named_as_such() {
    let mut s = Sim::new();
    s.server = ep(443);
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    for _ in 0..20 {
        s.data(C2S, t, 300);
        for (k, len) in [90u32, 120, 60, 200].into_iter().enumerate() {
            s.data(S2C, t + 50 + k as u64 * 10, len);
        }
        t += 1_000;
    }
    s.close(t);
    let f = s.findings();
    let fw = get(&f, FindingKind::FragmentedWrites);
    assert_eq!(fw.severity, crate::report::Severity::Info);
    assert!(fw.verdict.contains("TLS"), "{}", fw.verdict);
    assert!(fw.fix.contains("TLS record"), "{}", fw.fix);
}

/// A response of 36 full segments and two 1000-byte pieces, the second held by Nagle until a
/// delayed ACK: its 56,560 bytes need 38 segments and took 38, so the writes cost no packet a
/// whole write would not. Not fragmented (the hold itself is nagle_delayed_ack's).
#[test]
fn a_turn_without_extra_segments_is_never_fragmented() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    for _ in 0..5 {
        s.data(C2S, t, 10);
        let mut u = t + 50;
        for k in 0..18 {
            s.data(S2C, u, 1460);
            if k % 2 == 1 {
                s.ack(C2S, u + 5);
            }
            u += 10;
        }
        s.data(S2C, u, 1000);
        s.ack(C2S, u + 40_000);
        s.data(S2C, u + 40_030, 1000);
        u += 40_040;
        for k in 0..18 {
            s.data(S2C, u, 1460);
            if k % 2 == 1 {
                s.ack(C2S, u + 5);
            }
            u += 10;
        }
        s.ack(C2S, u + 5);
        t = u + 1_000;
    }
    s.close(t);
    let f = s.findings();
    assert!(
        !f.iter().any(|x| x.kind == FindingKind::FragmentedWrites),
        "{:?}",
        f.iter()
            .filter(|x| x.kind == FindingKind::FragmentedWrites)
            .map(|x| &x.evidence.facts)
            .collect::<Vec<_>>()
    );
}

/// zeek `smb/smb311.pcap` has no handshake: the RTT comes from data → ACK samples, and its
/// first exchanges are slower (83, 68 ms) than the 25 ms round trip the flow settles on. The
/// estimate only shrinks, so an exchange judged early must not be credited more than one
/// final round trip: waiting stays ≤ sequential exchanges × RTT.
#[test]
fn early_rtt_estimates_never_inflate_the_waiting() {
    let mut s = Sim::new();
    let mut t = 1_000;
    for lat in [83_000u64, 68_000, 60_000, 50_000, 40_000, 30_000]
        .into_iter()
        .chain([25_000; 20])
    {
        s.data(C2S, t, 100);
        s.data(S2C, t + lat, 300);
        t += lat + 6_000;
    }
    s.close(t);
    let f = s.findings();
    let r = get(&f, FindingKind::RttBound);
    let n = r.evidence.counts["exchanges"] as f64;
    let v = &r.evidence.values;
    assert!(
        v["waiting_ms"] <= n * v["rtt_ms"] + 0.01,
        "waiting {} ms for {n} exchanges of {} ms",
        v["waiting_ms"],
        v["rtt_ms"]
    );
    assert!(r.time_lost_ms <= v["waiting_ms"]);
}

/// suricata-verify `tls/tls-bypass-missing-event/tor_bl.pcap` (a Tor circuit, 21.6 ms path,
/// captured at the client) alternates turns with exchanges of 17–20 ms: shorter than any
/// round trip the flow ever showed, so each response answered an earlier request. Here the
/// client keeps two requests in flight over a 30 ms path and each exchange takes 27 ms: none
/// is sequential, however close to the RTT.
#[test]
fn exchanges_just_under_the_rtt_are_overlapped() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30_000, 20);
    let mut sent: Vec<(u64, u32)> = Vec::new();
    let mut t = 100_000;
    for _ in 0..40 {
        s.data(C2S, t, 20);
        sent.push((t, s.cseq));
        let at = t + 27_000;
        let ack = sent
            .iter()
            .filter(|(x, _)| x + 30_000 <= at)
            .map(|&(_, a)| a)
            .max()
            .unwrap_or(1001 + 40000);
        s.data_acking(S2C, at, 120, ack);
        t = at + 100;
    }
    s.close(t + 60_000);
    let f = s.findings();
    assert!(
        !f.iter().any(|x| x.kind == FindingKind::RttBound),
        "{:?}",
        f.iter().map(|x| &x.verdict).collect::<Vec<_>>()
    );
}

/// nDPI `line.pcap` (147.92.242.232:443): the client writes a request as two TLS records, and
/// Nagle holds the second until the server's delayed ACK (frames 86–88). A warning, with the
/// time held, and still named as TLS records with the flight-buffering fix.
#[test]
fn tls_records_held_by_nagle_are_a_warning_named_as_tls() {
    let mut s = Sim::new();
    s.server = ep(443);
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    for _ in 0..5 {
        s.data(C2S, t, 295);
        s.ack(S2C, t + 40_000);
        s.data(C2S, t + 40_050, 541);
        s.data(S2C, t + 40_500, 600);
        t += 41_000;
    }
    s.close(t);
    let f = s.findings();
    let fw = get(&f, FindingKind::FragmentedWrites);
    assert_eq!(fw.direction, C2S);
    assert_eq!(fw.severity, crate::report::Severity::Warning);
    assert!(fw.time_lost_ms > 5.0 * 40.0, "{}", fw.time_lost_ms);
    assert!(fw.verdict.contains("TLS"), "{}", fw.verdict);
    assert!(fw.fix.contains("TLS record"), "{}", fw.fix);
}

mod nagle;
mod window;
