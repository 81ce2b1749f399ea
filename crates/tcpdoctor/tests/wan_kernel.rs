//! The WAN path as the kernels at its two ends see it (`tcpdoctor sandbox --delay`, real kernel
//! TCP at both ends, run as an unprivileged user):
//!
//! - the handshake's round trip in each end's own `tcp_info` is two one-way delays;
//! - the whole-reply server costs one round trip per exchange (30.5 ms ± 2), `rtt_bound`;
//! - seeded random loss: the sender recovers without timeouts and nothing calls it a timeout
//!   stall, the line loses the same packet numbers run after run, and another seed others;
//! - a receive window caps an upload over 40 ms: `window_limited`, held by the receiver, at
//!   both ends; a small send buffer caps a paced (BBR) upload: held by the sender, at both ends;
//! - a 10 Mbit/s bottleneck carries 10 Mbit/s of IP bytes ± 5% (goodput reported too), and
//!   neither end calls it `window_limited`;
//! - a small bottleneck queue drops the burst it cannot hold (drop-tail), counts exactly the
//!   packets the captures show missing, and the rate's default queue is the documented one.
//!
//! (`wan_unprivileged.rs`: the same path as uids no account uses, and nothing left behind.)
//! Each test skips (saying why) where this machine cannot build the path for an unprivileged
//! user, unless `TCPDOCTOR_REQUIRE_WAN=1`, where it fails.

mod common;

use std::collections::BTreeMap;

use common::live::{self, OpenDir};
use common::wan::{
    analyze, dropped, exchange, fields, from, kinds, packets, packets_at, sandbox, seq_len, FAR,
    NEAR,
};
use tcpdoctor_core::wire::readdress::{ipv4_addr, Field};
use tcpdoctor_core::wire::CaptureReader;

/// Linux's smallest retransmission timeout (`TCP_RTO_MIN`). Recovery driven by ACKs (a fast
/// retransmit after duplicate ACKs, SACK/RACK marking a hole lost) answers the ACKs as they
/// come, within a round trip or so of the last one that acknowledged new data; the timer waits
/// at least this long after the ACK that re-armed it (or, with a probe or RACK timer pending,
/// after the head segment left). One exception: a tail-loss probe for a lone segment in
/// flight waits 2 × SRTT + `TCP_RTO_MIN` (`tcp_schedule_loss_probe`), and it retransmits the
/// highest segment sent.
const RTO_MIN_NS: u64 = 200_000_000;

/// What the sender's retransmissions were ([`retransmissions`]).
struct Retransmissions {
    all: usize,
    /// Sent less than [`RTO_MIN_NS`] after the last ACK that acknowledged new data: recovery
    /// driven by ACKs.
    prompt: usize,
    /// Of the others, those of the highest segment sent so far (what a tail-loss probe
    /// resends).
    late_tail: usize,
}

/// At the sender's end of a bulk transfer client → server (`near`, with each packet's capture
/// time in `at`): its retransmitted data segments, told apart by how soon after the last ACK
/// of new data they left. Counting duplicate ACKs of each retransmitted sequence number
/// instead misses most of them: with SACK, the holes after the first are retransmitted while
/// the ACKs still name the first.
fn retransmissions(near: &[Vec<u8>], at: &[u64]) -> Retransmissions {
    let mut highest: Option<u32> = None;
    // The highest cumulative ACK from the receiver, and when it last moved forward.
    let mut acked: Option<(u32, u64)> = None;
    let mut r = Retransmissions {
        all: 0,
        prompt: 0,
        late_tail: 0,
    };
    for (p, &t) in near.iter().zip(at) {
        let Some((seq, len, ack)) = seq_len(p) else {
            continue;
        };
        if ipv4_addr(p, Field::Source) == Some(FAR) {
            match acked {
                Some((a, _)) if (ack.wrapping_sub(a) as i32) <= 0 => {}
                _ => acked = Some((ack, t)),
            }
            continue;
        }
        if len == 0 {
            continue;
        }
        let end = seq.wrapping_add(len);
        match highest {
            Some(h) if (end.wrapping_sub(h) as i32) <= 0 => {
                r.all += 1;
                if acked.is_some_and(|(_, since)| t.saturating_sub(since) < RTO_MIN_NS) {
                    r.prompt += 1;
                } else if end == h {
                    r.late_tail += 1;
                }
            }
            _ => highest = Some(end),
        }
    }
    r
}

/// The kernel's own round trip after the handshake, at each end (`tcp_info.tcpi_rtt` right
/// after connect and right after accept): the only sample is the handshake's, SYN → SYN-ACK at
/// the client and SYN-ACK → ACK at the server. Over 15 ms each way both are 30 ms; the line
/// adds tens of microseconds. Nine handshakes: none can be shorter than the path, and the
/// median at each end is within 5% of it (one handshake can meet a loaded machine's late
/// wake-up: a 2-core VM shared with builds showed single samples 2–9 ms late).
#[test]
fn the_handshake_rtt_in_each_ends_tcp_info_is_two_delays() {
    let dir = OpenDir::new("wan-tcpinfo");
    let ex = exchange(&dir);
    let Some(out) = sandbox(
        &dir,
        "tcp_info RTT over a 15 ms path",
        &["--delay", "15ms"],
        &format!("{ex} rtt-serve 127.0.0.1:7070"),
        &format!("{ex} rtt 198.18.0.1:7070 9"),
    ) else {
        return;
    };
    let said = String::from_utf8_lossy(&out.stdout);
    let samples: Vec<BTreeMap<String, i64>> = said.lines().map(fields).collect();
    assert_eq!(samples.len(), 9, "{said}");
    for end in ["client_rtt_us", "server_rtt_us"] {
        let mut rtt: Vec<f64> = samples
            .iter()
            .map(|f| *f.get(end).unwrap_or_else(|| panic!("no {end} in {said}")) as f64)
            .collect();
        rtt.sort_by(f64::total_cmp);
        assert!(
            rtt[0] >= 0.95 * 30_000.0,
            "{end}: {rtt:?} µs, shorter than the path"
        );
        let median = rtt[rtt.len() / 2];
        assert!(
            (median - 30_000.0).abs() <= 0.05 * 30_000.0,
            "{end}: median {median} µs over a 2 × 15 ms path: {rtt:?}"
        );
    }
}

/// The per-line server's whole-reply twin over 15 ms each way: one round trip per exchange,
/// the 30.5 ms ± 2 (the median at the client's end), and `rtt_bound` named.
#[test]
fn the_whole_reply_server_costs_one_round_trip_per_exchange() {
    let dir = OpenDir::new("wan-coalesced");
    let ex = exchange(&dir);
    if sandbox(
        &dir,
        "whole-reply server over a 15 ms path",
        &["--delay", "15ms", "-w", "c.pcapng"],
        &format!("{ex} serve 127.0.0.1:7070 coalesce"),
        &format!("{ex} client 198.18.0.1:7070 20"),
    )
    .is_none()
    {
        return;
    }
    let r = analyze(&dir.path("c.pcapng"));
    let k = kinds(&r);
    assert!(k.iter().any(|k| k.starts_with("rtt_bound")), "{k:?}");
    let p50 = r["captures"][0]["servers"][0]["exchange_latency_ms"]["p50"]
        .as_f64()
        .expect("exchange latency");
    eprintln!("whole-reply server over 15 ms each way: median exchange {p50} ms; {k:?}");
    assert!(
        (28.5..=32.5).contains(&p50),
        "median exchange {p50} ms: one 30 ms round trip"
    );
}

/// One seeded 3% random-loss run of a 1 MB bulk upload over 5 ms each way: the client's and
/// server's captures, what the client's kernel said, and what the line said.
struct LossRun {
    near: Vec<Vec<u8>>,
    /// Each `near` packet's capture time (ns).
    near_at: Vec<u64>,
    far: Vec<Vec<u8>>,
    kernel: BTreeMap<String, i64>,
    stderr: String,
    dir: OpenDir,
}

fn lossy_upload(seed: u32, test: &str) -> Option<LossRun> {
    let dir = OpenDir::new("wan-loss");
    let ex = exchange(&dir);
    let path = format!("seed={seed}");
    let out = sandbox(
        &dir,
        test,
        &[
            "--delay", "5ms", "--loss", "3%", "--path", &path, "-w", "l.pcapng",
        ],
        &format!("{ex} sink 127.0.0.1:7070"),
        &format!("{ex} bulk 198.18.0.1:7070 1000000"),
    )?;
    let said = String::from_utf8_lossy(&out.stdout);
    let line = said
        .lines()
        .find(|l| l.starts_with("bytes="))
        .unwrap_or_else(|| panic!("the client said: {said}"));
    let (near, near_at) = packets_at(&dir.path("l.pcapng"));
    Some(LossRun {
        near,
        near_at,
        far: packets(&dir.path("l.server.pcapng")),
        kernel: fields(line),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        dir,
    })
}

impl LossRun {
    /// The packet numbers the line dropped, client → server and server → client.
    fn drops(&self) -> (Vec<usize>, Vec<usize>) {
        (
            dropped(&from(&self.near, NEAR), &from(&self.far, NEAR), "c2s"),
            dropped(&from(&self.far, FAR), &from(&self.near, FAR), "s2c"),
        )
    }
}

/// Random loss of 3% each way recovers the kernel's way, without a timeout: the client's
/// kernel counts retransmissions and no RTO (`tcpi_total_rto`, Linux 6.7+), its capture shows
/// each retransmission within 200 ms of the last ACK of new data (at most one later: a
/// tail-loss probe of the last segment), and the analyzer names no `retransmission_stall`
/// there (a timeout it would name needs RTT + 150 ms without duplicate ACKs, and none
/// happened). Were the kernel to time out in some run, the stall must then be named: the
/// finding follows the packets either way. And the seed replays: the line drops the same
/// packet numbers in both directions in a second run with the seed, other numbers with another.
#[test]
fn seeded_random_loss_recovers_fast_is_not_called_a_stall_and_replays() {
    let test = "seeded random loss";
    let Some(a) = lossy_upload(7, test) else {
        return;
    };
    let (c2s, s2c) = a.drops();
    assert!(
        a.stderr.contains("dropped by loss"),
        "the line says what it dropped: {}",
        a.stderr
    );
    // 3% of ~700 data packets and ~350 ACKs: a few dozen, never none.
    assert!(c2s.len() >= 5 && s2c.len() >= 2, "{c2s:?} {s2c:?}");
    assert!(
        a.stderr
            .contains(&format!("({} dropped by loss)", c2s.len())),
        "the line counts the client's packets the captures show missing ({}): {}",
        c2s.len(),
        a.stderr
    );

    let re = retransmissions(&a.near, &a.near_at);
    let (retx, prompt, tail) = (re.all, re.prompt, re.late_tail);
    assert!(retx > 0, "the sender retransmitted nothing");
    let rto = a.kernel["total_rto"];
    eprintln!(
        "seed 7: dropped c2s {c2s:?}, s2c {s2c:?}; {retx} retransmissions at the sender's end, \
         {prompt} within 200 ms of the last ACK of new data, {tail} later of the last segment; \
         the sender's kernel: {:?}",
        a.kernel
    );
    // Recovery by ACKs: all of them when the kernel counted no timeout (but for one tail-loss
    // probe of a lone last segment), some otherwise.
    if rto == 0 {
        assert!(
            prompt + tail == retx && tail <= 1,
            "no RTO in the sender's kernel, yet {} of {retx} retransmissions came late",
            retx - prompt
        );
    } else {
        assert!(
            prompt > 0,
            "{retx} retransmissions, all as slow as a timeout"
        );
    }
    assert!(a.kernel["total_retrans"] > 0, "{:?}", a.kernel);
    let r = analyze(&a.dir.path("l.pcapng"));
    let stalls: Vec<String> = kinds(&r)
        .into_iter()
        .filter(|k| k.starts_with("retransmission_stall \"client_to_server\""))
        .collect();
    match rto {
        0 => assert_eq!(
            stalls,
            Vec::<String>::new(),
            "no RTO in the sender's kernel, yet a timeout stall: {:?}",
            kinds(&r)
        ),
        n if n > 0 => assert!(
            !stalls.is_empty(),
            "the sender's kernel timed out {n} time(s), the capture shows no stall"
        ),
        // Before Linux 6.7 tcp_info has no RTO count: the capture's own verdict stands.
        _ => live::skip(
            test,
            "this kernel's tcp_info has no tcpi_total_rto (Linux 6.7+)",
        ),
    }

    // The two ends read together place every drop on the path, as the line counted them
    // (c2s/s2c above come from comparing the captures with tshark-independent code here).
    let (near, far) = (a.dir.path("l.pcapng"), a.dir.path("l.server.pcapng"));
    let out = common::tcpdoctor(&[
        "analyze",
        "--format",
        "json",
        "--ends",
        near.to_str().expect("utf-8"),
        far.to_str().expect("utf-8"),
    ]);
    let ends: serde_json::Value = serde_json::from_slice(&out.stdout).expect("analyze --ends");
    let e = &ends["ends"];
    assert_eq!(e["client_to_server"]["lost"], c2s.len(), "{e}");
    assert_eq!(e["server_to_client"]["lost"], s2c.len(), "{e}");
    assert_eq!(
        e["client_to_server"]["retransmitted"],
        serde_json::json!(retx),
        "{e}"
    );

    let Some(b) = lossy_upload(7, test) else {
        panic!("the path was available a moment ago");
    };
    let (c2s_b, s2c_b) = b.drops();
    let prefix = |x: &[usize], y: &[usize], n: usize| {
        (
            x.iter().copied().filter(|&i| i <= n).collect::<Vec<_>>(),
            y.iter().copied().filter(|&i| i <= n).collect::<Vec<_>>(),
        )
    };
    // The pattern is per packet number: compare the numbers both runs reached.
    let n = from(&a.near, NEAR).len().min(from(&b.near, NEAR).len());
    let (x, y) = prefix(&c2s, &c2s_b, n);
    assert_eq!(x, y, "client → server, seed 7, first {n} packets");
    let m = from(&a.far, FAR).len().min(from(&b.far, FAR).len());
    let (x, y) = prefix(&s2c, &s2c_b, m);
    assert_eq!(x, y, "server → client, seed 7, first {m} packets");

    let Some(c) = lossy_upload(8, test) else {
        panic!("the path was available a moment ago");
    };
    let (c2s_c, _) = c.drops();
    let n = n.min(from(&c.near, NEAR).len());
    let (x, y) = prefix(&c2s, &c2s_c, n);
    assert_ne!(x, y, "seed 8 drops other packets than seed 7");
}

/// A bottleneck of 1 Mbit/s with a 3000-byte queue: the sender's first flight (ten 1500-byte
/// packets at once, its initial window) cannot fit, so the queue drops on arrival; the line
/// counts exactly the packets the two ends' captures show missing, and every other packet
/// arrives bit-exact and in order (a queue never reorders). And a rate with no `queue=` gets
/// the documented default, 100 ms of the link: 125 KB at 10 Mbit/s.
#[test]
fn a_small_queue_tail_drops_a_burst_and_counts_it() {
    let dir = OpenDir::new("wan-queue");
    let ex = exchange(&dir);
    let test = "small bottleneck queue";
    let Some(out) = sandbox(
        &dir,
        test,
        &[
            "--delay",
            "2ms",
            "--rate",
            "1mbit",
            "--path",
            "queue=3000",
            "-w",
            "q.pcapng",
        ],
        &format!("{ex} sink 127.0.0.1:7070"),
        &format!("{ex} bulk 198.18.0.1:7070 60000"),
    ) else {
        return;
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("queue=3KB"), "{err}");
    let near = packets(&dir.path("q.pcapng"));
    let far = packets(&dir.path("q.server.pcapng"));
    let c2s = dropped(&from(&near, NEAR), &from(&far, NEAR), "c2s");
    let s2c = dropped(&from(&far, FAR), &from(&near, FAR), "s2c");
    eprintln!("queue=3000: dropped c2s {c2s:?}, s2c {s2c:?}");
    assert!(!c2s.is_empty(), "a 3000-byte queue held a whole flight");
    let said = format!("the line carried {} packets", from(&near, NEAR).len());
    assert!(err.contains(&said), "{said}: {err}");
    assert!(
        err.contains(&format!("({} dropped by the queue)", c2s.len())),
        "the captures show {} client packets missing: {err}",
        c2s.len()
    );
    assert!(s2c.is_empty(), "the ACKs' direction has room: {s2c:?}");
    // The bound: the first flight arrives at once, so the queue takes what fits in 3000 bytes
    // (the handshake's ACK still there and at most two full packets) and drops the rest.
    let sent = from(&near, NEAR);
    let first_drop = c2s[0];
    let taken = sent[..first_drop - 1]
        .iter()
        .filter(|p| p.len() >= 1000)
        .count();
    assert!(
        (1..=2).contains(&taken),
        "{taken} full packets taken before the first drop into a 3000-byte queue"
    );

    let dir = OpenDir::new("wan-queue-default");
    let ex = exchange(&dir);
    let Some(out) = sandbox(
        &dir,
        "default queue",
        &["--delay", "2ms", "--rate", "10mbit"],
        &format!("{ex} rtt-serve 127.0.0.1:7070"),
        &format!("{ex} rtt 198.18.0.1:7070"),
    ) else {
        return;
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("path wan:2ms,rate=10mbit,queue=125KB:"),
        "{err}"
    );
}

/// What the client's kernel said of a transfer (`exchange bulk`'s `tcp_info` figures).
type Kernel = BTreeMap<String, i64>;

/// Whether this kernel offers congestion control `cc`; when not, the test skips saying so,
/// unless `TCPDOCTOR_REQUIRE_TOOLS` is set, where it fails.
fn congestion_control(cc: &str, test: &str) -> bool {
    let have = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default()
        .split_whitespace()
        .any(|c| c == cc);
    if !have {
        common::skip_unless_required(
            "TCPDOCTOR_REQUIRE_TOOLS",
            test,
            &format!("this kernel has no {cc} congestion control (modprobe tcp_{cc})"),
        );
    }
    have
}

/// An upload of `bytes` over 20 ms each way, the sink's `rcvbuf` and the client's `sndbuf` (0:
/// left alone) and congestion control `cc`: both ends' findings of kind `window_limited`
/// client → server (`counts.example_limited_by_receiver_window` each), and the client's kernel.
fn capped_upload(
    test: &str,
    bytes: u32,
    rcvbuf: u32,
    sndbuf: u32,
    cc: &str,
) -> Option<(Vec<Option<i64>>, Kernel)> {
    let dir = OpenDir::new("wan-window");
    let ex = exchange(&dir);
    let out = sandbox(
        &dir,
        test,
        &["--delay", "20ms", "-w", "w.pcapng"],
        &format!("{ex} sink 127.0.0.1:7070 {rcvbuf}"),
        &format!("{ex} bulk 198.18.0.1:7070 {bytes} {sndbuf} {cc}"),
    )?;
    let said = String::from_utf8_lossy(&out.stdout);
    let line = said
        .lines()
        .find(|l| l.starts_with("bytes="))
        .unwrap_or_else(|| panic!("the client said: {said}"));
    let ends = ["w.pcapng", "w.server.pcapng"]
        .iter()
        .map(|f| {
            let r = analyze(&dir.path(f));
            r["findings"]
                .as_array()
                .expect("findings")
                .iter()
                .find(|f| f["kind"] == "window_limited" && f["direction"] == "client_to_server")
                .map(|f| {
                    f["evidence"]["counts"]["example_limited_by_receiver_window"]
                        .as_i64()
                        .expect("counts")
                })
        })
        .collect();
    Some((ends, fields(line)))
}

/// The receiver's window caps an upload: the sink sets SO_RCVBUF 16 KiB before listen, so it
/// advertises ~18 KiB with no window scale, and over 20 ms each way the client can send no
/// more per round trip (the client's kernel says so: `tcpi_rwnd_limited`). Both ends' captures
/// name `window_limited` client → server, held by the server's window.
///
/// The client paces (BBR), so each flight is spread over the round trip. With an ACK-clocked
/// sender (reno) the same workload is named in only about half of the runs: each window-sized
/// burst leaves one RTT after the previous one, exactly the length of the detector's round
/// trip (the handshake RTT), so whether two bursts fall into one round trip (a doubled
/// ceiling, too few hits) depends on microseconds of the path. Measured: 3 of 6 runs named,
/// ceiling 18.8 KiB or 36.8 KiB. That is the detector's, not this test's, to fix (rounds
/// timed by the ACK of their first segment, as BBR counts them, at the sender's end).
///
/// Regression: an upload starts right after the handshake, when the only segment from the
/// server is its SYN-ACK (which the detector skips); the detector then never learned that both
/// SYNs were seen and blamed the client's send buffer.
#[test]
fn a_receive_window_cap_over_40ms_is_named_with_the_receiver_as_the_limit() {
    let test = "receive-window-capped upload";
    if !congestion_control("bbr", test) {
        return;
    }
    let Some((ends, kernel)) = capped_upload(test, 1 << 20, 16384, 0, "bbr") else {
        return;
    };
    eprintln!("rcvbuf 16 KiB: both ends {ends:?}; the client's kernel {kernel:?}");
    // The physics first: the sender's kernel spent most of its busy time held by the window.
    assert!(
        kernel["rwnd_limited_us"] * 4 >= kernel["busy_us"],
        "the workload is not window-limited: {kernel:?}"
    );
    assert_eq!(
        ends,
        vec![Some(1), Some(1)],
        "window_limited, limited by the receiver's window, at the client's and the server's end"
    );
}

/// The case: a bulk sender with SO_SNDBUF 16 KiB over 20 ms each way. Measured on
/// Linux 6.18:
/// - with an ACK-clocked sender (reno, cubic) the send buffer does not cap the flight at all:
///   the kernel lets the queued bytes grow far past it (`ss -m`: tb32768, w300776),
///   `tcpi_sndbuf_limited` stays 0 and the megabyte leaves in slow start; nothing to name;
/// - with BBR the kernel is send-buffer-limited (`tcpi_sndbuf_limited` 1.35 s of 3.3 s for
///   3 MiB) and the flight is a constant 64 KiB, paced over ~84% of the round trip and then
///   silent for ~30 ms (20× the longest gap inside the flight) until the ACKs free the buffer;
///   the ACKs come back in one path RTT (no queue): rule 4b of window_limited. For stretches
///   of BBR's gain cycle the pacing slows and a flight takes longer than the round trip, so
///   bytes per round trip swing (a flight straddles the cut) and the transfer is counted per
///   flight, cut at the silences (rule 3b). 3 MiB, not 1: BBR's start-up and drain take ten
///   round trips that are never at the ceiling.
///
/// Before rule 4b the detector required the sender to idle 20% of each round trip and missed
/// every paced sender; before rule 3b it missed this one in 4 runs of 5 at 2 MiB.
#[test]
fn a_small_send_buffer_over_40ms_is_named() {
    let test = "send-buffer-capped upload";
    if !congestion_control("bbr", test) {
        return;
    }
    let Some((ends, kernel)) = capped_upload(test, 3 << 20, 0, 16384, "bbr") else {
        return;
    };
    eprintln!("sndbuf 16 KiB: both ends {ends:?}; the client's kernel {kernel:?}");
    assert!(
        kernel["sndbuf_limited_us"] * 4 >= kernel["busy_us"],
        "the workload is not send-buffer-limited: {kernel:?}"
    );
    assert_eq!(
        ends[0],
        Some(0),
        "window_limited by the client's send buffer, at the client's end"
    );
    // At the server's end the flights arrive as the line delivered them: named in most runs
    // (a loaded machine can stretch a flight past one round trip, and rule 3 then sees no
    // steady ceiling), but never blamed on the server's window.
    assert_ne!(ends[1], Some(1), "the server's window is not the limit");
}

/// A 10 Mbit/s bottleneck (its default queue) carries a 1.5 MB upload at 10 Mbit/s of IP
/// bytes ± 5% as the server's end receives it, from the first full packet to the last: the link
/// stays busy once the first flight has filled its queue. Goodput, the TCP payload, is 1448 of
/// every 1500 bytes (timestamps on): 9.65 Mbit/s. A bottleneck is not a buffer: neither end's
/// capture is called `window_limited` (the receiver's shows the link's even spacing, the
/// sender's the queue lengthening the round trip).
#[test]
fn a_10mbit_bottleneck_carries_10mbit_of_ip_bytes_within_5_percent() {
    let dir = OpenDir::new("wan-rate-bulk");
    let ex = exchange(&dir);
    let Some(_) = sandbox(
        &dir,
        "10 Mbit/s bulk",
        &["--delay", "2ms", "--rate", "10mbit", "-w", "r.pcapng"],
        &format!("{ex} sink 127.0.0.1:7070"),
        &format!("{ex} bulk 198.18.0.1:7070 1500000"),
    ) else {
        return;
    };
    let f = std::fs::File::open(dir.path("r.server.pcapng")).expect("far capture");
    let mut r = CaptureReader::new(f).expect("a capture");
    let mut data: Vec<(u64, usize, u32)> = Vec::new();
    while let Some(fr) = r.next_frame().expect("readable") {
        let p = fr.data;
        if ipv4_addr(p, Field::Source) == Some(NEAR) && p.len() >= 1000 {
            let (_, payload, _) = seq_len(p).expect("TCP");
            data.push((fr.ts.as_nanos(), p.len(), payload));
        }
    }
    assert!(data.len() > 900, "{} full packets", data.len());
    let span = (data[data.len() - 1].0 - data[0].0) as f64 / 1e9;
    // Each packet after the first took its own time on the link within the span.
    let ip: usize = data[1..].iter().map(|d| d.1).sum();
    let payload: u64 = data[1..].iter().map(|d| u64::from(d.2)).sum();
    let (mbit, goodput) = (
        ip as f64 * 8.0 / span / 1e6,
        payload as f64 * 8.0 / span / 1e6,
    );
    eprintln!("10 Mbit/s bottleneck: {mbit:.3} Mbit/s of IP bytes, goodput {goodput:.3} Mbit/s");
    assert!(
        (9.5..=10.5).contains(&mbit),
        "{mbit:.3} Mbit/s of IP bytes through 10 Mbit/s"
    );
    let expected = 10.0 * 1448.0 / 1500.0;
    assert!(
        (goodput - expected).abs() <= 0.05 * expected,
        "goodput {goodput:.3} Mbit/s, expected {expected:.2}"
    );
    for end in ["r.pcapng", "r.server.pcapng"] {
        let found = kinds(&analyze(&dir.path(end)));
        assert!(
            !found.iter().any(|k| k.starts_with("window_limited")),
            "{end}: a bottleneck is not a buffer: {found:?}"
        );
    }
}

/// A paced sender through a bottleneck looks like a capped one at first sight: the same bytes
/// round after round, spread over the round trip, the receiver's window far larger. Over 20 ms
/// each way and 10 Mbit/s, a BBR upload: the server's end sees the link's even spacing (no
/// silence between round trips), the client's end the queue lengthening the round trip; no
/// `window_limited` at either end. (An early version of rule 4b, spacing measured as the mean
/// over segments, named the client's end.)
#[test]
fn a_paced_sender_through_a_bottleneck_is_not_window_limited() {
    let test = "BBR upload through 10 Mbit/s";
    if !congestion_control("bbr", test) {
        return;
    }
    let dir = OpenDir::new("wan-rate-bbr");
    let ex = exchange(&dir);
    let Some(_) = sandbox(
        &dir,
        test,
        &["--delay", "20ms", "--rate", "10mbit", "-w", "b.pcapng"],
        &format!("{ex} sink 127.0.0.1:7070"),
        &format!("{ex} bulk 198.18.0.1:7070 1500000 0 bbr"),
    ) else {
        return;
    };
    for end in ["b.pcapng", "b.server.pcapng"] {
        let found = kinds(&analyze(&dir.path(end)));
        assert!(
            !found.iter().any(|k| k.starts_with("window_limited")),
            "{end}: a bottleneck is not a buffer: {found:?}"
        );
    }
}
