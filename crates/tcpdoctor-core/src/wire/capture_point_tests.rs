use std::net::SocketAddrV4;
use std::time::Duration;

use super::*;
use crate::analysis::Analyzer;
use crate::report::FindingKind;
use crate::wire::write::LINKTYPE_RAW;
use crate::wire::{decode_tcp, Decoded, LinkType};

fn ms(x: f64) -> Timestamp {
    Timestamp(1_000_000_000 + (x * 1e6) as u64)
}

fn addrs() -> (SocketAddrV4, SocketAddrV4) {
    (
        "10.1.0.1:40000".parse().unwrap(),
        "10.0.0.1:9000".parse().unwrap(),
    )
}

const PATH: EmulatedPath = EmulatedPath {
    rtt: Duration::from_millis(10),
    jitter: Duration::ZERO,
};

/// (time in ms, from client, payload length, ack number, seq number) of each packet.
fn brief(pkts: &[Packet]) -> Vec<(f64, bool, u32, u32, u32)> {
    pkts.iter()
        .map(|(ts, p, len)| match decode_tcp(LinkType::RawIp, p, *len) {
            Decoded::Tcp(s, _) => (
                (ts.as_nanos() as f64 - 1e9) / 1e6,
                s.src.port == 40000,
                s.payload_len,
                s.ack,
                s.seq,
            ),
            other => panic!("not TCP: {other:?}"),
        })
        .collect()
}

fn times(pkts: &[Packet]) -> Vec<f64> {
    brief(pkts).iter().map(|b| b.0).collect()
}

#[test]
fn handshake_spans_one_round_trip_at_either_end() {
    let (c, s) = addrs();
    let (_, at_client) = PathCapture::new(c, s, CapturePoint::Client, PATH, ms(100.0), 64);
    assert_eq!(times(&at_client), [90.0, 100.0, 100.0]);
    let (_, at_server) = PathCapture::new(c, s, CapturePoint::Server, PATH, ms(100.0), 64);
    assert_eq!(times(&at_server), [90.0, 90.0, 100.0]);
    let (_, middle) = PathCapture::new(c, s, CapturePoint::Proxy, PATH, ms(100.0), 64);
    assert_eq!(times(&middle), [100.0, 100.0, 100.0]);
}

#[test]
fn a_prompt_response_carries_the_ack_and_silence_gets_a_pure_ack() {
    let (c, s) = addrs();
    let (mut pc, _) = PathCapture::new(c, s, CapturePoint::Client, PATH, ms(0.0), 64);
    // Request at 1 ms; the response passes the client at 11.2 ms and carries the ACK.
    let mut out = pc.data(ms(1.0), Side::Client, b"GET\n", 4);
    assert_eq!(out.len(), 1, "nothing modelled can precede the request");
    out.extend(pc.data(ms(11.2), Side::Server, b"OK\n", 3));
    let b = brief(&out);
    assert_eq!(b.len(), 2, "{b:?}");
    assert_eq!((b[0].0, b[0].1, b[0].2), (1.0, true, 4));
    assert_eq!((b[1].0, b[1].1, b[1].2), (11.2, false, 3));
    assert_eq!(b[1].3, b[0].4 + 4, "the response acknowledges the request");
    // A request nobody answers: a pure ACK exactly one round trip later.
    let mut out = pc.data(ms(20.0), Side::Client, b"SET\n", 4);
    out.extend(pc.data(ms(40.0), Side::Client, b"SET\n", 4));
    out.extend(pc.finish());
    let b = brief(&out);
    let t: Vec<(f64, bool, u32)> = b.iter().map(|x| (x.0, x.1, x.2)).collect();
    assert_eq!(
        t,
        [
            (20.0, true, 4),
            (30.0, false, 0),
            (40.0, true, 4),
            (50.0, false, 0)
        ]
    );
    assert_eq!(b[1].3, b[0].4 + 4, "the pure ACK covers the first SET only");
    assert_eq!(b[3].3, b[2].4 + 4);
}

#[test]
fn far_data_never_acknowledges_what_could_not_have_reached_it() {
    let (c, s) = addrs();
    let (mut pc, hs) = PathCapture::new(c, s, CapturePoint::Client, PATH, ms(0.0), 64);
    let syn_ack = brief(&hs)[1].3;
    // A server greeting passing the client 2 ms after the client's first request left.
    let mut out = pc.data(ms(1.0), Side::Client, b"A", 1);
    out.extend(pc.data(ms(3.0), Side::Server, b"hello", 5));
    out.extend(pc.finish());
    let b = brief(&out);
    assert_eq!((b[1].0, b[1].2, b[1].3), (3.0, 5, syn_ack));
    assert_eq!((b[2].0, b[2].2), (11.0, 0), "pure ACK of A at 1 + 10 ms");
}

#[test]
fn server_end_mirrors_the_client_end() {
    let (c, s) = addrs();
    let (mut pc, _) = PathCapture::new(c, s, CapturePoint::Server, PATH, ms(0.0), 64);
    // At the server the request arrives (far data), the response leaves at once (near data),
    // and the client's ACK of the response comes back one round trip later.
    let mut out = pc.data(ms(5.0), Side::Client, b"GET\n", 4);
    out.extend(pc.data(ms(5.1), Side::Server, b"OK\n", 3));
    out.extend(pc.fin(ms(30.0), Side::Client));
    out.extend(pc.finish());
    let t: Vec<(f64, bool, u32)> = brief(&out).iter().map(|x| (x.0, x.1, x.2)).collect();
    assert_eq!(
        t,
        [
            (5.0, true, 4),
            (5.1, false, 3),
            (15.1, true, 0),
            (30.0, true, 0)
        ]
    );
}

/// Ping-pong with `n` exchanges (or all requests in one write) over a 10 ms path, captured at
/// the client: what `tcpdoctor analyze` makes of it.
fn analyze(n: usize, pipelined: bool) -> (Option<f64>, Vec<FindingKind>) {
    let (c, s) = addrs();
    let (mut pc, mut pkts) = PathCapture::new(c, s, CapturePoint::Client, PATH, ms(0.0), 64);
    let mut t = 0.5;
    if pipelined {
        pkts.extend(pc.data(ms(t), Side::Client, &[], 4 * n));
        t += 10.2;
        for _ in 0..n {
            pkts.extend(pc.data(ms(t), Side::Server, &[], 3));
            t += 0.01;
        }
    } else {
        for _ in 0..n {
            pkts.extend(pc.data(ms(t), Side::Client, &[], 4));
            t += 10.2;
            pkts.extend(pc.data(ms(t), Side::Server, &[], 3));
            t += 0.05;
        }
    }
    pkts.extend(pc.fin(ms(t + 1.0), Side::Client));
    pkts.extend(pc.fin(ms(t + 11.0), Side::Server));
    pkts.extend(pc.finish());
    let mut a = Analyzer::default();
    for (i, (ts, p, len)) in pkts.iter().enumerate() {
        a.on_frame(
            i as u64 + 1,
            *ts,
            LinkType::from_code(LINKTYPE_RAW),
            p,
            *len,
        );
    }
    let (summary, findings) = a.finish("model", "pcap");
    (
        summary.servers.first().and_then(|s| s.rtt_ms),
        findings.iter().map(|f| f.kind).collect(),
    )
}

#[test]
fn analyze_sees_the_path_rtt_and_names_a_round_trip_bound_client() {
    let (rtt, kinds) = analyze(30, false);
    let rtt = rtt.expect("an RTT");
    assert!((9.9..=10.5).contains(&rtt), "rtt {rtt}");
    assert!(kinds.contains(&FindingKind::RttBound), "{kinds:?}");
    let (rtt, kinds) = analyze(30, true);
    assert!(rtt.is_some_and(|r| (9.9..=10.5).contains(&r)), "{rtt:?}");
    assert!(!kinds.contains(&FindingKind::RttBound), "{kinds:?}");
}
