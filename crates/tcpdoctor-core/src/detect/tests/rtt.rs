//! `rtt_bound` on simulated time: which exchanges are sequential wherever the capture was
//! taken, savings bounded by the time measured, and advice that fits concurrent connections.

use super::*;

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

/// Four connections of a driver keeping eight requests in flight each over a 30 ms path,
/// seen at the client: each turn carries a batch of eight 24-byte requests and waits one
/// round trip for the batch's responses.
fn pipelined_batches(client: Option<crate::analysis::ScriptedClient>) -> Vec<Finding> {
    let mut s = Sim::new();
    if let Some(c) = client {
        s.an = Analyzer::with_scripted_client(c);
    }
    let mut conns = Vec::new();
    for k in 0..4u16 {
        s.connect(41000 + k, u64::from(k) * 100, 30_000, 20);
        conns.push(s.conn());
    }
    let start = 40_000;
    let mut events: Vec<(u64, usize, Direction)> = Vec::new();
    for k in 0..conns.len() {
        for i in 0..20u64 {
            let t = start + k as u64 * 50 + i * 30_300;
            events.push((t, k, C2S));
            events.push((t + 30_200, k, S2C));
        }
    }
    events.sort_by_key(|&(t, k, dir)| (t, k, dir.index()));
    for (t, k, dir) in events {
        s.set_conn(conns[k]);
        s.data(dir, t, if dir == C2S { 8 * 24 } else { 8 * 30 });
        conns[k] = s.conn();
    }
    let end = start + 20 * 30_300 + 30_000;
    for (k, c) in conns.clone().into_iter().enumerate() {
        s.set_conn(c);
        s.close(end + k as u64 * 100);
    }
    s.findings()
}

/// `run` says the client is its driver with --pipeline 8 on 4 connections: the finding says
/// batches of eight per turn, each waiting a round trip, and that the fix is the script's. It
/// never says one request at a time, nor offers HTTP/2 to a client that pipelines.
#[test]
fn a_pipelining_driver_is_told_to_pipeline_deeper_not_to_multiplex() {
    let client = crate::analysis::ScriptedClient {
        pipeline: 8,
        connections: 4,
        requests: 4 * 20 * 8,
        rate: None,
    };
    let f = pipelined_batches(Some(client));
    let r = get(&f, FindingKind::RttBound);
    let all = format!("{} {} {}", r.verdict, r.evidence.facts.join(" "), r.fix);
    for said in [
        "--pipeline 8",
        "about 8.0 requests per turn",
        "scripted client",
    ] {
        assert!(r.verdict.contains(said), "{said}: {}", r.verdict);
    }
    assert!(r.fix.contains("raise --pipeline"), "{}", r.fix);
    assert!(r.fix.contains("batch commands"), "{}", r.fix);
    for never in [
        "one request at a time",
        "HTTP/2",
        "Multiplex",
        "one request per",
    ] {
        assert!(!all.contains(never), "{never}: {all}");
    }
    assert_eq!(r.evidence.values["requests_per_turn"], 8.0);
    assert_eq!(r.evidence.counts["driver_pipeline"], 8);
    // Severity follows the time the finding says was lost.
    let elapsed = r.evidence.values["elapsed_ms"];
    let critical = r.time_lost_ms >= 1000.0 && r.time_lost_ms >= 0.8 * elapsed;
    assert_eq!(r.severity == crate::report::Severity::Critical, critical);
}

/// The same wire from a plain capture: the analysis cannot know what a turn carries, so it
/// speaks of turns and makes multiplexing conditional on one request per turn.
#[test]
fn parallel_turns_of_an_unknown_client_are_not_called_one_request_at_a_time() {
    let f = pipelined_batches(None);
    let r = get(&f, FindingKind::RttBound);
    assert!(
        r.fix.contains("If each turn carries one request"),
        "{}",
        r.fix
    );
    assert!(r.fix.contains("more requests in each turn"), "{}", r.fix);
    assert!(
        !r.verdict.contains("multiplexing the requests"),
        "{}",
        r.verdict
    );
    assert!(!r.verdict.contains("scripted"), "{}", r.verdict);
}

/// A driver with --pipeline 1 on one connection: one request at a time is what happened, and
/// the finding says so (and that the fix is the script's).
#[test]
fn a_driver_that_does_not_pipeline_gets_the_sequential_wording() {
    let mut s = Sim::new();
    s.an = Analyzer::with_scripted_client(crate::analysis::ScriptedClient {
        pipeline: 1,
        connections: 1,
        requests: 40,
        rate: None,
    });
    s.connect(41000, 0, 30_000, 20);
    let mut t = 40_000;
    for _ in 0..40 {
        s.data(C2S, t, 24);
        s.data(S2C, t + 30_200, 30);
        t += 30_300;
    }
    s.close(t);
    let f = s.findings();
    let r = get(&f, FindingKind::RttBound);
    assert!(r.verdict.contains("one request at a time"), "{}", r.verdict);
    assert!(r.verdict.contains("--pipeline 1"), "{}", r.verdict);
    assert!(r.fix.contains("raise --pipeline"), "{}", r.fix);
    assert!(!r.fix.contains("HTTP/2"), "{}", r.fix);
    assert_eq!(r.evidence.values["requests_per_turn"], 1.0);
    assert_eq!(r.severity, crate::report::Severity::Critical);
}
