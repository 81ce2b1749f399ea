//! The finding kinds of `watch` ([`super::kinds`]): inspect's Nagle rule over each interval.

use super::*;

const S: u64 = 1_000_000_000;
const SERVER: u64 = 2;

/// A request/response connection's sample: `replies` small data segments out (20 B each),
/// `requests` in, at `at_ns`.
fn rr(at_ns: u64, replies: u32, requests: u32) -> TcpSample {
    TcpSample {
        at_ns,
        state: TCP_ESTABLISHED,
        snd_mss: 1448,
        snd_cwnd: 10,
        ato_us: 40_000,
        data_segs_out: replies,
        data_segs_in: requests,
        bytes_sent: u64::from(replies) * 20,
        bytes_received: u64::from(requests) * 6,
        ..TcpSample::default()
    }
}

/// A fast sample that caught a reply line waiting for the ACK of the one in flight.
fn held(at_ns: u64) -> TcpSample {
    TcpSample {
        unacked: 1,
        notsent_bytes: 60,
        ..rr(at_ns, 0, 0)
    }
}

fn seen(process: &str, port: u16, s: TcpSample) -> Vec<SocketSeen> {
    let mut listen = socket(1, process, port, TCP_LISTEN, None);
    listen.remote = SocketAddr::from(([0, 0, 0, 0], 0));
    vec![
        listen,
        socket(SERVER, process, port, TCP_ESTABLISHED, Some(s)),
    ]
}

fn socket(inode: u64, process: &str, port: u16, state: u8, s: Option<TcpSample>) -> SocketSeen {
    SocketSeen {
        inode,
        cookie: inode,
        process: Some(process.to_owned()),
        state,
        local: SocketAddr::from(([127, 0, 0, 1], port)),
        remote: SocketAddr::from(([127, 0, 0, 1], 40000)),
        sample: s,
    }
}

/// One host sample through the ledger and the kinds, options read as `options` says.
fn tick(
    l: &mut Ledger,
    k: &mut Kinds,
    at: u64,
    seen: &[SocketSeen],
    options: Options,
) -> Vec<(u64, SocketAddr)> {
    l.observe(at, seen);
    for inode in k.candidates(seen) {
        k.set_options(inode, options);
    }
    k.conclude(seen, l)
}

fn nagle(l: &Ledger) -> Option<&KindTotals> {
    l.series()
        .find_map(|(_, t)| t.kinds.get(&FindingKind::NagleDelayedAck))
}

const NAGLE_ON: Options = Options::Read {
    nodelay: false,
    cork: Some(false),
};

#[test]
fn a_nagle_on_per_line_server_is_sampled_fast_and_its_held_share_becomes_seconds() {
    let (mut l, mut k) = (Ledger::new(MAX_SERIES), Kinds::default());
    assert!(tick(&mut l, &mut k, 0, &seen("srv", 8080, rr(0, 0, 0)), NAGLE_ON).is_empty());
    // 10 requests answered in 130 small segments: a candidate, Nagle on, sampled fast next.
    let fast = tick(
        &mut l,
        &mut k,
        5 * S,
        &seen("srv", 8080, rr(5 * S, 130, 10)),
        NAGLE_ON,
    );
    assert_eq!(fast, [(SERVER, SocketAddr::from(([127, 0, 0, 1], 8080)))]);
    // No fast sample yet: a risk (replies in pieces), no time lost, one socket named.
    let n = nagle(&l).expect("the kind on the series");
    assert_eq!((n.lost_seconds, n.sockets), (0.0, 1));
    // 99 fast samples, 40 of them caught a held reply; with this sample, 40 of 100.
    for i in 0..99 {
        let at = 5 * S + (i + 1) * 10_000_000;
        let s = if i % 5 < 2 { held(at) } else { rr(at, 135, 11) };
        k.burst_sample(SERVER, &s);
    }
    tick(
        &mut l,
        &mut k,
        10 * S,
        &seen("srv", 8080, rr(10 * S, 260, 20)),
        NAGLE_ON,
    );
    let n = nagle(&l).expect("the kind");
    assert!((n.lost_seconds - 0.4 * 5.0).abs() < 1e-6, "{n:?}");
    assert_eq!(n.sockets, 1);
    let text = render(&l, "0");
    assert!(text.contains("# TYPE tcpdoctor_finding_lost_seconds_total counter\n"));
    assert!(text.contains(
        "tcpdoctor_finding_lost_seconds_total{kind=\"nagle_delayed_ack\",process=\"srv\",port=\"8080\"} 2\n"
    ), "{text}");
    assert!(text.contains(
        "tcpdoctor_finding_sockets{kind=\"nagle_delayed_ack\",process=\"srv\",port=\"8080\"} 1\n"
    ));
    // Idle next interval: the counter stays, the gauge falls to 0.
    tick(
        &mut l,
        &mut k,
        15 * S,
        &seen("srv", 8080, rr(15 * S, 260, 20)),
        NAGLE_ON,
    );
    let n = nagle(&l).expect("kept");
    assert_eq!((n.lost_seconds, n.sockets), (2.0, 0));
}

#[test]
fn its_twin_with_nodelay_or_cork_is_neither_sampled_fast_nor_named() {
    for options in [
        Options::Read {
            nodelay: true,
            cork: Some(false),
        },
        Options::Read {
            nodelay: false,
            cork: Some(true),
        },
    ] {
        let (mut l, mut k) = (Ledger::new(MAX_SERIES), Kinds::default());
        tick(&mut l, &mut k, 0, &seen("twin", 8081, rr(0, 0, 0)), options);
        let fast = tick(
            &mut l,
            &mut k,
            5 * S,
            &seen("twin", 8081, rr(5 * S, 130, 10)),
            options,
        );
        assert!(fast.is_empty(), "{options:?}");
        assert!(nagle(&l).is_none(), "{options:?}");
        assert!(!render(&l, "0").contains("kind="));
    }
}

#[test]
fn only_small_request_response_connections_have_their_options_read() {
    let (mut l, k) = (Ledger::new(MAX_SERIES), Kinds::default());
    let mut k = k;
    tick(&mut l, &mut k, 0, &seen("s", 1, rr(0, 0, 0)), NAGLE_ON);
    // A bulk sender (full segments, nothing received) and an idle connection.
    let mut bulk = rr(5 * S, 1000, 0);
    bulk.bytes_sent = 1000 * 1448;
    l.observe(5 * S, &seen("s", 1, bulk));
    assert!(k.candidates(&seen("s", 1, bulk)).is_empty());
    assert!(k.candidates(&seen("s", 1, rr(5 * S, 0, 0))).is_empty());
    // Large writes each way: not small.
    let mut large = rr(5 * S, 100, 100);
    large.bytes_sent = 100 * 1400;
    assert!(k.candidates(&seen("s", 1, large)).is_empty());
    assert_eq!(k.candidates(&seen("s", 1, rr(5 * S, 130, 10))), [SERVER]);
}

#[test]
fn options_a_process_refused_are_counted_for_it_and_nothing_is_judged() {
    let (mut l, mut k) = (Ledger::new(MAX_SERIES), Kinds::default());
    tick(
        &mut l,
        &mut k,
        0,
        &seen("other", 7, rr(0, 0, 0)),
        Options::Unreadable,
    );
    let fast = tick(
        &mut l,
        &mut k,
        5 * S,
        &seen("other", 7, rr(5 * S, 130, 10)),
        Options::Unreadable,
    );
    assert!(fast.is_empty());
    assert!(nagle(&l).is_none());
    assert_eq!(l.health.options_unreadable.get("other"), Some(&1));
    assert!(render(&l, "0")
        .contains("tcpdoctor_watch_options_unreadable_sockets{process=\"other\"} 1\n"));
}

#[test]
fn a_series_left_out_by_the_cap_has_no_kind_either() {
    let (mut l, mut k) = (Ledger::new(1), Kinds::default());
    let both = |at: u64, segs: u32| {
        let mut v = seen("first", 1, rr(at, 0, 0));
        let mut other = seen("second", 2, rr(at, segs, segs / 13));
        for s in &mut other {
            s.inode += 10;
        }
        v.extend(other);
        v
    };
    tick(&mut l, &mut k, 0, &both(0, 0), NAGLE_ON);
    tick(&mut l, &mut k, 5 * S, &both(5 * S, 130), NAGLE_ON);
    assert_eq!(l.series().count(), 1);
    assert!(nagle(&l).is_none());
    assert!(l.health.series_dropped > 0);
}

/// "app" holding three connections to one peer, which carried `uses` data segments each
/// (half sent, half received) by `at_ns`.
fn pool(at_ns: u64, uses: [u32; 3]) -> Vec<SocketSeen> {
    uses.iter()
        .enumerate()
        .map(|(i, &u)| {
            let mut s = socket(
                30 + i as u64,
                "app",
                41000 + i as u16,
                TCP_ESTABLISHED,
                None,
            );
            s.remote = SocketAddr::from(([127, 0, 0, 1], 5432));
            s.sample = Some(TcpSample {
                bytes_sent: u64::from(u / 2) * 1000,
                ..rr(at_ns, u / 2, u - u / 2)
            });
            s
        })
        .collect()
}

fn pool_kind(l: &Ledger) -> Option<&KindTotals> {
    l.series()
        .filter(|(k, _)| k.process == "app" && k.port == Port::Client)
        .find_map(|(_, t)| t.kinds.get(&FindingKind::PoolImbalance))
}

#[test]
fn a_pool_used_unevenly_is_named_on_its_client_series_and_one_used_in_turn_is_not() {
    for (uses, named) in [
        ([600, 0, 0], Some(2)),
        ([200, 200, 200], None),
        ([0, 0, 0], None),
    ] {
        let (mut l, mut k) = (Ledger::new(MAX_SERIES), Kinds::default());
        tick(&mut l, &mut k, 0, &pool(0, [0, 0, 0]), NAGLE_ON);
        tick(&mut l, &mut k, 5 * S, &pool(5 * S, uses), NAGLE_ON);
        let got = pool_kind(&l).map(|t| t.sockets);
        assert_eq!(got, named, "{uses:?}");
        if named.is_some() {
            // No time estimate: the counter is there, at 0 s.
            assert_eq!(pool_kind(&l).map(|t| t.lost_seconds), Some(0.0));
        }
    }
}
