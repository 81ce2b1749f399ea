//! Connection starts on simulated time: SYNs that went unanswered, SYN-ACKs that did not reach
//! the client. The shapes copy public captures that may not be committed (nDPI is
//! LGPL, suricata-verify GPL); each test names the file it imitates.

use super::*;

const SYN: u8 = TcpFlags::SYN;

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
