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

/// Rule 5 of connection_churn: a server that resets each connection after its answer (as one
/// does after an error reply) is named as the side that closed them, and the fix starts at
/// the server; with 18 of 30 it says how many, not "each". Closes that cross (neither FIN
/// acknowledges the other) are counted apart, and the same churn closed by the client keeps
/// the client's fix.
#[test]
fn churn_closed_by_the_server_is_told_so() {
    fn churn(server_closes: u16, crossing: u16) -> Finding {
        let mut s = Sim::new();
        for i in 0..30u16 {
            let t = u64::from(i) * 10_000;
            s.connect(42000 + i, t, 30, 10);
            s.data(C2S, t + 100, 20);
            s.data(S2C, t + 200, 100);
            let (c, sv) = (s.cseq, s.sseq);
            let o = TcpOptions::default();
            if i < server_closes {
                s.raw(S2C, t + 210, sv, c, TcpFlags::RST | ACK, 0, o);
            } else if i < server_closes + crossing {
                // Both FINs acknowledge only the other's data: each left before the other
                // side's FIN arrived.
                s.raw(S2C, t + 210, sv, c, TcpFlags::FIN | ACK, 0, o);
                s.raw(C2S, t + 211, c, sv, TcpFlags::FIN | ACK, 0, o);
                s.raw(C2S, t + 220, c + 1, sv + 1, ACK, 0, o);
                s.raw(S2C, t + 221, sv + 1, c + 1, ACK, 0, o);
            } else {
                s.close(t + 300);
            }
        }
        let f = s.findings();
        get(&f, FindingKind::ConnectionChurn).clone()
    }
    let all = churn(30, 0);
    assert_eq!(all.evidence.counts["closed_by_server"], 30);
    assert_eq!(all.evidence.counts["closed_by_client"], 0);
    assert!(
        all.verdict.contains("each closed first by the server"),
        "{}",
        all.verdict
    );
    assert!(
        all.fix.starts_with("Find out why the server"),
        "{}",
        all.fix
    );

    let most = churn(18, 4);
    assert_eq!(most.evidence.counts["closed_by_server"], 18);
    assert_eq!(most.evidence.counts["closed_together"], 4);
    assert_eq!(most.evidence.counts["closed_by_client"], 8);
    assert!(
        most.verdict
            .contains("18 of them closed first by the server"),
        "{}",
        most.verdict
    );
    assert!(!most.verdict.contains("each closed"), "{}", most.verdict);

    // 14 of 30 closed by the server: not most; the client's wording.
    let some = churn(14, 2);
    assert_eq!(some.evidence.counts["closed_by_server"], 14);
    assert_eq!(some.evidence.counts["closed_by_client"], 14);
    assert!(some.fix.starts_with("Reuse connections"), "{}", some.fix);
    assert!(
        !some.verdict.contains("closed first by the server"),
        "{}",
        some.verdict
    );
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

mod fragments;
mod handshake;
mod hop_blame;
mod nagle;
mod rtt;
mod unbatched;
mod unbatched_framing;
mod window;

/// zeek reassembly.pcap's shape: a burst of segments lost together, each retransmitted after
/// its own timeout. The stalls overlap, so the time lost is the time they span (≈ 2.3 s), not
/// the sum of the waits (≈ 4.6 s), and never more than the flow lasted.
#[test]
fn overlapping_timeout_stalls_cost_the_time_they_span() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    s.data(C2S, 1_000, 10);
    s.data(S2C, 1_100, 1000);
    s.data(S2C, 1_200, 1000);
    s.resend(S2C, 2_201_100, 2000, 1000);
    s.resend(S2C, 2_301_200, 1000, 1000);
    s.ack(C2S, 2_301_300);
    let f = s.findings();
    let r = get(&f, FindingKind::RetransmissionStall);
    assert_eq!(r.evidence.counts["stalls"], 2);
    assert!((r.time_lost_ms - 2300.1).abs() < 1.0, "{}", r.time_lost_ms);
}

/// The SYN that opens the flows of the slot tests.
fn slot_test_syn() -> TcpSegment {
    TcpSegment {
        src: ep(40000),
        dst: ep(7000),
        seq: 1,
        ack: 0,
        flags: TcpFlags(TcpFlags::SYN),
        window: 1000,
        payload_len: 0,
        options: TcpOptions::default(),
    }
}

/// A slot freed by an ended flow and handed to the next one never gives that flow the state
/// of the earlier one, even if a detector forgot to take it out.
#[test]
fn a_reused_slot_starts_empty() {
    use super::{FlowView, Slots};
    use crate::flow::Flow;
    let syn = slot_test_syn();
    let pkt = PacketRef {
        frame: 1,
        ts: Timestamp(0),
    };
    let (f1, f2) = (Flow::new(1, &syn, pkt), Flow::new(2, &syn, pkt));
    let view = |flow| FlowView::in_slot(flow, 3);
    let mut slots: Slots<u32> = Slots::default();
    assert_eq!(slots.get(&view(&f1)), None);
    *slots.get_or_default(&view(&f1)) = 7;
    assert_eq!(slots.get(&view(&f1)).copied(), Some(7));
    assert_eq!(slots.get(&view(&f2)), None, "flow 2 in flow 1's slot");
    assert_eq!(*slots.get_or_default(&view(&f2)), 0);
    assert_eq!(slots.remove(&view(&f1)), None);
    assert_eq!(slots.remove(&view(&f2)), Some(0));
    assert_eq!(slots.get(&view(&f2)), None);
}

/// What the detectors keep per open flow stays small: a server's capture holds hundreds of
/// thousands of open flows (issue 29). A slot is one element of a [`Slots`] vector, which
/// every open flow has in each detector that keeps one.
#[test]
fn per_flow_detector_state_stays_small() {
    let limits = [
        ("window_limited::RoundTrip", 64),
        ("window_limited::Transfer", 88),
        ("window_limited slot", 40),
        ("rtt_bound slot", 72),
        ("rtt_bound client", 64),
        ("unbatched_messages slot", 32),
        ("unbatched_messages::Kept", 40),
    ];
    let sizes: Vec<(&str, usize)> = [
        super::window_limited::per_flow_sizes(),
        super::rtt_bound::per_flow_sizes(),
        super::unbatched_messages::per_flow_sizes(),
    ]
    .concat();
    assert_eq!(sizes.len(), limits.len());
    for ((name, size), (limit_name, most)) in sizes.into_iter().zip(limits) {
        eprintln!("size_of {name} = {size}");
        assert_eq!(name, limit_name);
        assert!(size <= most, "{name} is {size} bytes, more than {most}");
    }
}

/// [`Slots`] grows by an eighth at a time as flows take new slots, so at most about an eighth
/// of its room is unused (doubling leaves up to half), and still geometrically (few moves).
#[test]
fn slots_grow_by_an_eighth() {
    use super::{FlowView, Slots};
    use crate::flow::Flow;
    let syn = slot_test_syn();
    let flow = Flow::new(
        1,
        &syn,
        PacketRef {
            frame: 1,
            ts: Timestamp(0),
        },
    );
    let mut slots: Slots<u64> = Slots::default();
    let mut grew = 0;
    for slot in 0..100_000 {
        let before = slots.slots.capacity();
        let view = FlowView::in_slot(&flow, slot);
        *slots.get_or_default(&view) = slot as u64;
        grew += usize::from(slots.slots.capacity() != before);
        assert!(
            slots.slots.capacity() <= (slot + 1) * 9 / 8 + 8,
            "slot {slot}: {before}"
        );
    }
    assert!(grew < 120, "grew {grew} times");
}
