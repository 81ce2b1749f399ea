//! Connection starts on simulated time: SYNs that went unanswered, SYN-ACKs that did not reach
//! the client, new connections on a reused port pair, refused connects sent again, and
//! connection attempts that never became connections. The shapes copy public captures that may
//! not be committed (nDPI is LGPL, suricata-verify GPL); each test names the file it imitates.

use super::*;

const SYN: u8 = TcpFlags::SYN;
const FIN: u8 = TcpFlags::FIN;

/// Times in µs.
const MS: u64 = 1_000;

fn opts() -> TcpOptions {
    TcpOptions {
        mss: Some(1460),
        window_scale: Some(7),
        ..TcpOptions::default()
    }
}

impl Sim {
    /// A client SYN with ISN `isn` from `port` at `t` (sets the client's stream to follow it).
    fn syn(&mut self, port: u16, t: u64, isn: u32) {
        self.client = ep(port);
        self.cseq = isn.wrapping_add(1);
        self.raw(C2S, t, isn, 0, SYN, 0, opts());
    }

    /// The server's SYN-ACK to the current client SYN.
    fn syn_ack(&mut self, t: u64) {
        self.sseq = 90_001;
        self.raw(S2C, t, 90_000, self.cseq, SYN | ACK, 0, opts());
    }

    fn summary_flows(self) -> (u64, Vec<Finding>) {
        let (summary, findings) = self.an.finish("sim.pcap", "pcap");
        (summary.flows, findings)
    }
}

fn stall(f: &[Finding], dir: Direction) -> &Finding {
    f.iter()
        .find(|x| x.kind == FindingKind::RetransmissionStall && x.direction == dir)
        .unwrap_or_else(|| panic!("no retransmission_stall {dir:?} in {:?}", kinds(f)))
}

/// A lost SYN (`testdata/captures/wan_syn_retry.pcap`): no answer for 1 s, the retry is
/// answered at once. A SYN timeout stall of the client's connection start.
#[test]
fn unanswered_syn_sent_again_is_a_syn_stall() {
    let mut s = Sim::new();
    s.syn(40000, 0, 5_000);
    s.syn(40000, 1_014 * MS, 5_000);
    s.syn_ack(1_019 * MS);
    s.ack(C2S, 1_024 * MS);
    s.data(C2S, 1_025 * MS, 20);
    s.data(S2C, 1_035 * MS, 100);
    s.close(1_040 * MS);
    let f = s.findings();
    assert_eq!(kinds(&f), vec![(FindingKind::RetransmissionStall, C2S)]);
    let r = stall(&f, C2S);
    assert_eq!(r.evidence.counts["syn_stalls"], 1);
    assert_eq!(r.evidence.counts["syn_ack_stalls"], 0);
    assert_eq!(r.evidence.frames, vec![1, 2]);
}

/// suricata-verify `tests/bug-5881-01/input.pcap` (captured between client and server): the
/// SYN-ACK passes 42 ms after the SYN, yet the client sends its SYN again at 998 ms, takes the
/// second SYN-ACK and goes on. The server answered: this is not a lost SYN (and not the
/// server's accept queue) but a SYN-ACK that never reached the client.
#[test]
fn answered_syn_sent_again_is_a_lost_syn_ack_not_a_lost_syn() {
    let mut s = Sim::new();
    s.syn(64731, 0, 3_517_001_030);
    s.syn_ack(42 * MS);
    s.syn(64731, 998 * MS, 3_517_001_030);
    s.syn_ack(1_038 * MS);
    s.ack(C2S, 1_043 * MS);
    s.data(C2S, 1_044 * MS, 517);
    s.data(S2C, 1_088 * MS, 1440);
    s.close(1_400 * MS);
    let f = s.findings();
    assert_eq!(
        kinds(&f),
        vec![(FindingKind::RetransmissionStall, S2C)],
        "no SYN stall client→server"
    );
    let r = stall(&f, S2C);
    assert_eq!(r.evidence.counts["syn_stalls"], 0);
    assert_eq!(r.evidence.counts["syn_ack_stalls"], 1);
    assert_eq!(r.evidence.frames, vec![1, 2, 3], "SYN, lost SYN-ACK, retry");
    assert!((r.time_lost_ms - 998.0).abs() < 0.5);
    assert!(!r.fix.contains("accept queue (`ss"), "{}", r.fix);
}

/// nDPI `tests/cfgs/default/pcap/tls_port_80.pcapng`: every SYN is answered within 126 ms,
/// and the client keeps sending it again (1.0 s, 3.4 s, 7.1 s) until it takes a SYN-ACK sent
/// after its last retry. One lost-SYN-ACK stall, from the answered SYN to the last retry.
#[test]
fn syn_ack_lost_again_and_again_counts_once() {
    let mut s = Sim::new();
    let isn = 2_217_740_234;
    s.syn(50541, 0, isn);
    s.syn_ack(126 * MS);
    s.syn(50541, 1_012 * MS, isn);
    s.syn_ack(1_132 * MS);
    s.syn_ack(3_152 * MS);
    s.syn(50541, 3_445 * MS, isn);
    s.syn_ack(3_571 * MS);
    s.syn(50541, 7_067 * MS, isn);
    s.syn_ack(7_192 * MS);
    s.syn_ack(11_217 * MS);
    s.data(C2S, 14_522 * MS, 245);
    s.data(S2C, 14_650 * MS, 1360);
    let f = s.findings();
    assert_eq!(kinds(&f), vec![(FindingKind::RetransmissionStall, S2C)]);
    let r = stall(&f, S2C);
    assert_eq!(r.evidence.counts["stalls"], 1);
    assert_eq!(r.evidence.counts["syn_ack_stalls"], 1);
    assert_eq!(r.evidence.frames, vec![1, 2, 8]);
}

/// nDPI `tests/cfgs/default/pcap/alexa-app.pcapng`, port 49627: the SYN-ACK passes the
/// capture point 865 ms after the SYN, the client's 1 s timer sends the SYN again 132 ms
/// later, and 3 ms after that the client ACKs the SYN-ACK it already had. The SYN-ACK was
/// late on the last hop, not lost, and the SYN was answered: no stall either way.
#[test]
fn syn_ack_taken_right_after_the_retry_was_late_not_lost() {
    let mut s = Sim::new();
    s.syn(49627, 0, 78_810);
    s.syn_ack(865 * MS);
    s.syn(49627, 997 * MS, 78_810);
    s.ack(C2S, 1_001 * MS);
    s.syn_ack(1_109 * MS);
    s.ack(C2S, 1_110 * MS);
    s.close(1_121 * MS);
    assert_eq!(kinds(&s.findings()), vec![]);
}

/// The same SYN captured twice at the same instant (two interfaces): not a retry worth a
/// finding, and the handshake still completes.
#[test]
fn the_same_syn_captured_twice_is_no_stall() {
    let mut s = Sim::new();
    s.syn(40000, 0, 7_000);
    s.syn(40000, 0, 7_000);
    s.syn_ack(10 * MS);
    s.ack(C2S, 20 * MS);
    s.data(C2S, 21 * MS, 20);
    s.data(S2C, 31 * MS, 100);
    s.close(40 * MS);
    assert_eq!(kinds(&s.findings()), vec![]);
}

/// suricata-verify `tests/bug-7657-01/input.pcap`: 21 SYNs from the same client port, each
/// with its own ISN, about 160 ms apart, interleaved with one ISN sent three times 1.02 s
/// apart; only that third one is answered. Each ISN is its own connection attempt (tshark
/// gives each a `tcp.stream`); the SYN retries of the answered one stay one flow, and its
/// stall runs from its own first SYN, not from the first SYN of the port pair.
#[test]
fn syns_with_new_isns_on_one_port_pair_are_new_connections() {
    let mut s = Sim::new();
    let real = 4_291_095_205u32;
    let mut frame_of_real = Vec::new();
    let mut others = 0u64;
    let mut next_other = 0u32;
    // (time in ms, is the real ISN)
    let mut events: Vec<(u64, bool)> = (0..21).map(|i| (i * 162, false)).collect();
    events.extend([(1_864, true), (2_888, true), (3_912, true)]);
    events.sort();
    for (t, is_real) in events {
        if is_real {
            s.syn(45511, t * MS, real);
            frame_of_real.push(s.frame);
        } else {
            let isn = 1_317_897_315u32.wrapping_add(next_other.wrapping_mul(509_866_505));
            next_other += 1;
            others += 1;
            s.syn(45511, t * MS, isn);
        }
    }
    s.syn_ack(3_917 * MS);
    s.ack(C2S, 3_918 * MS);
    s.data(C2S, 3_919 * MS, 1448);
    s.ack(S2C, 3_923 * MS);
    s.close(4_419 * MS);
    let (flows, f) = s.summary_flows();
    assert_eq!(flows, others + 1, "one flow per ISN");
    assert_eq!(kinds(&f), vec![(FindingKind::RetransmissionStall, C2S)]);
    let r = stall(&f, C2S);
    assert_eq!(r.evidence.counts["stalls"], 1);
    assert_eq!(
        r.evidence.frames,
        vec![frame_of_real[0], *frame_of_real.last().unwrap()],
        "from the real ISN's first SYN"
    );
}

/// A connection that closed on one side only (the client's FIN, no FIN back), then, 10 s
/// later, a SYN with a new ISN on the same port pair: a new connection, not a SYN retry of
/// the old one.
#[test]
fn new_isn_after_a_one_sided_fin_is_a_new_connection() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    s.data(C2S, 100, 20);
    s.data(S2C, 200, 100);
    let (c, sq) = (s.cseq, s.sseq);
    s.raw(C2S, 300, c, sq, FIN | ACK, 0, TcpOptions::default());
    s.raw(S2C, 310, sq, c + 1, ACK, 0, TcpOptions::default());
    s.syn(40000, 10_000 * MS, 777_777);
    s.syn_ack(10_000 * MS + 30);
    s.ack(C2S, 10_000 * MS + 40);
    s.data(C2S, 10_000 * MS + 100, 20);
    s.data(S2C, 10_000 * MS + 200, 100);
    s.close(10_000 * MS + 300);
    let (flows, f) = s.summary_flows();
    assert_eq!(flows, 2);
    assert_eq!(kinds(&f), vec![]);
}

/// A SYN with a new ISN while the earlier connection on the pair is still open (both sides
/// talking, no FIN or RST): still a new connection, as tshark counts it.
#[test]
fn new_isn_on_an_open_connection_is_a_new_connection() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    s.data(C2S, 100, 20);
    s.data(S2C, 200, 100);
    s.syn(40000, 2_000 * MS, 1_234_567);
    s.syn_ack(2_000 * MS + 30);
    s.ack(C2S, 2_000 * MS + 40);
    s.data(C2S, 2_000 * MS + 100, 20);
    s.data(S2C, 2_000 * MS + 200, 100);
    s.close(2_000 * MS + 300);
    let (flows, f) = s.summary_flows();
    assert_eq!(flows, 2);
    assert_eq!(kinds(&f), vec![]);
}

/// suricata-verify `tests/firewall/tcp-session-syn-flood-drop-precedence/input.pcap`: 200
/// SYNs 1 ms apart from consecutive client ports, none answered. No connection was made, no
/// handshake paid: not connection churn (and no SYN was sent twice: no stall).
#[test]
fn syn_flood_is_not_connection_churn() {
    let mut s = Sim::new();
    s.server = Endpoint {
        ip: IpAddr::V4(Ipv4Addr::new(198, 51, 100, 5)),
        port: 443,
    };
    for i in 0..200u16 {
        s.syn(40000 + i, u64::from(i) * MS, 1000 + u32::from(i));
    }
    let (flows, f) = s.summary_flows();
    assert_eq!(flows, 200);
    assert_eq!(kinds(&f), vec![]);
}

/// suricata-verify `tests/dnp3/dnp3-max-points/test.pcap`: 20 connections opened 0.9 ms apart,
/// handshakes complete, and 18 of them never carry a byte. Connections without a request are
/// not "a new connection per request".
#[test]
fn handshakes_without_requests_are_not_connection_churn() {
    let mut s = Sim::new();
    for i in 0..20u16 {
        let t = u64::from(i) * 900;
        s.connect(10000 + i, t, 400, 240);
        if i < 2 {
            s.data(C2S, t + 700, 100);
        }
    }
    assert_eq!(kinds(&s.findings()), vec![]);
}

/// A connect refused with an RST 18 ms after the SYN, the same SYN sent again 3 s later
/// (Windows retries a refused connect), and accepted. One connection, as tshark counts it;
/// the accepted part is analysed (it used to be swallowed by the ended, refused flow), and
/// the SYN was answered (by the RST): no SYN stall.
#[test]
fn a_retry_after_a_refusal_continues_the_flow() {
    let mut s = Sim::new();
    s.syn(59621, 0, 64_818);
    s.raw(
        S2C,
        18 * MS,
        0,
        64_819,
        TcpFlags::RST | ACK,
        0,
        TcpOptions::default(),
    );
    s.syn(59621, 3_061 * MS, 64_818);
    s.syn_ack(3_079 * MS);
    s.ack(C2S, 3_080 * MS);
    let mut t = 3_100 * MS;
    for _ in 0..40 {
        s.data(C2S, t, 20);
        s.data(S2C, t + 30_200, 120);
        t += 30_300;
    }
    s.close(t);
    let (flows, f) = s.summary_flows();
    assert_eq!(flows, 1);
    assert_eq!(kinds(&f), vec![(FindingKind::RttBound, C2S)]);
}

/// zeek `testing/btest/Traces/pop3/pop3.pcap`: SYN, RST, the same SYN 0.55 s later, RST, and
/// once more: every SYN was answered, by a refusal. One flow, no stall.
#[test]
fn refused_again_and_again_is_one_flow_and_no_stall() {
    let mut s = Sim::new();
    for k in 0..3u64 {
        s.syn(26242, k * 555 * MS, 3_145_310_914);
        s.raw(
            S2C,
            k * 555 * MS + 51 * MS,
            0,
            3_145_310_915,
            TcpFlags::RST | ACK,
            0,
            TcpOptions::default(),
        );
    }
    let (flows, f) = s.summary_flows();
    assert_eq!(flows, 1);
    assert_eq!(kinds(&f), vec![]);
}
