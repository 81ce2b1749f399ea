//! `tcpdoctor sandbox --delay 15ms --server …`: a real WAN path between two network namespaces
//! (real kernel TCP at both ends, the delay line in between), as an unprivileged user (uid
//! 65534 when the tests run as root, as in CI). The Nagle per-line server costs two round
//! trips and the client's delayed ACK per exchange and is named `nagle_delayed_ack` at both
//! ends; its coalesced twin costs one round trip and is named `rtt_bound`; the line delivers
//! every packet bit-exact and in order (both ends' captures compared packet by packet).

mod common;

use std::path::Path;
use std::process::Output;

use common::live::{self, OpenDir};
use serde_json::Value;
use tcpdoctor_core::wire::readdress::{set_ipv4_addr, Field};
use tcpdoctor_core::wire::CaptureReader;

const FAR: [u8; 4] = [198, 18, 0, 1];

/// Runs `sandbox ARGS` as the unprivileged user in `dir`; None (with a reason printed) when
/// this machine cannot build the path for this user, unless it is required.
fn sandbox(dir: &OpenDir, test: &str, args: &[String]) -> Option<Output> {
    let bin = dir.install(&live::tcpdoctor_bin());
    let out = live::unprivileged(&bin)
        .current_dir(&dir.0)
        .env("TCPDOCTOR_LINE_TIMING", "1")
        .arg("sandbox")
        .args(args)
        .output()
        .expect("run tcpdoctor sandbox");
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(2) && common::wan_unavailable(test, &err) {
        return None;
    }
    assert_eq!(out.status.code(), Some(0), "{test}: {err}");
    Some(out)
}

fn words(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Runs the exchange workload across a 15 ms-each-way path; None (with a reason printed) when
/// this machine cannot build the path for this user, unless it is required.
fn across_the_path(dir: &OpenDir, test: &str, coalesce: bool, n: usize) -> Option<Output> {
    let ex = dir.install(&live::exchange_bin()).display().to_string();
    let server = format!(
        "{ex} serve 127.0.0.1:7070{}",
        if coalesce { " coalesce" } else { "" }
    );
    let client = format!("{ex} client 198.18.0.1:7070 {n} > client.txt");
    let mut args = words(&["--delay", "15ms", "-w", "near.pcapng", "--server"]);
    args.push(server);
    args.extend(words(&["--server-port", "7070", "--"]));
    args.push(client);
    sandbox(dir, test, &args)
}

fn analyze(file: &Path) -> Value {
    let out = common::tcpdoctor(&["analyze", "--format", "json", file.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(0), "analyze {}", file.display());
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn kinds(r: &Value) -> Vec<String> {
    r["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| format!("{} {}", f["kind"].as_str().unwrap_or("?"), f["direction"]))
        .collect()
}

/// Every packet of a capture, with the line's address rewrite undone (so the two ends compare).
fn packets(file: &Path) -> Vec<(u64, Vec<u8>)> {
    let f = std::fs::File::open(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let mut r = CaptureReader::new(f).expect("a capture");
    let mut v = Vec::new();
    while let Some(fr) = r.next_frame().expect("readable") {
        let mut p = fr.data.to_vec();
        for field in [Field::Source, Field::Destination] {
            if tcpdoctor_core::wire::readdress::ipv4_addr(&p, field) == Some([127, 0, 0, 1]) {
                set_ipv4_addr(&mut p, field, FAR);
            }
        }
        v.push((fr.ts.as_nanos(), p));
    }
    v
}

/// The handshake's round trip at the client's end: SYN → SYN-ACK, ms.
fn handshake_rtt_ms(pkts: &[(u64, Vec<u8>)]) -> f64 {
    let flags = |p: &[u8]| p.get(33).copied().unwrap_or(0);
    let syn = pkts.iter().find(|(_, p)| flags(p) == 0x02).expect("a SYN");
    let synack = pkts
        .iter()
        .find(|(_, p)| flags(p) == 0x12)
        .expect("a SYN-ACK");
    (synack.0 - syn.0) as f64 / 1e6
}

#[test]
fn a_per_line_nagle_server_over_a_15ms_path_is_named_at_both_ends() {
    let dir = OpenDir::new("wan-nagle");
    let test = "per-line server over a 15 ms path";
    if across_the_path(&dir, test, false, 12).is_none() {
        return;
    }
    let said = std::fs::read_to_string(dir.path("client.txt")).expect("client output");
    assert!(said.starts_with("sent_bytes="), "{said}");
    let near = dir.path("near.pcapng");
    let far = dir.path("near.server.pcapng");
    for (end, file) in [("client", &near), ("server", &far)] {
        let r = analyze(file);
        let k = kinds(&r);
        assert!(
            k.iter().any(|k| k.starts_with("nagle_delayed_ack")),
            "at the {end}'s end: {k:?}"
        );
    }
    // The line delays each packet at least 15 ms each way: the handshake takes one round trip
    // at the client's end (a floor, not a timing: nothing can make it shorter).
    let rtt = handshake_rtt_ms(&packets(&near));
    assert!(rtt >= 30.0, "handshake RTT {rtt} ms over a 30 ms path");
    // Per exchange: two round trips and the client's delayed ACK (PHYSICS §3). The floor again.
    let r = analyze(&near);
    let p50 = r["captures"][0]["servers"][0]["exchange_latency_ms"]["p50"]
        .as_f64()
        .expect("exchange latency");
    assert!(
        p50 >= 90.0,
        "median exchange {p50} ms: 2 RTT + ato is at least 90"
    );
}

#[test]
fn the_line_delivers_every_packet_bit_exact_and_in_order() {
    let dir = OpenDir::new("wan-exact");
    let Some(out) = across_the_path(&dir, "bit-exact line", true, 20) else {
        return;
    };
    let near = packets(&dir.path("near.pcapng"));
    let far = packets(&dir.path("near.server.pcapng"));
    assert!(
        near.len() >= 40,
        "{} packets at the client's end",
        near.len()
    );
    let bytes = |v: &[(u64, Vec<u8>)]| v.iter().map(|(_, p)| p.clone()).collect::<Vec<_>>();
    let c2s = |v: &[(u64, Vec<u8>)]| {
        bytes(v)
            .into_iter()
            .filter(|p| p.get(16..20) == Some(&FAR[..]))
            .collect::<Vec<_>>()
    };
    let s2c = |v: &[(u64, Vec<u8>)]| {
        bytes(v)
            .into_iter()
            .filter(|p| p.get(12..16) == Some(&FAR[..]))
            .collect::<Vec<_>>()
    };
    // The same packets, byte for byte (checksums included, once the address is put back), in
    // the same order, each way. Nothing was dropped: no loss was asked for.
    assert_eq!(c2s(&near), c2s(&far), "client → server");
    assert_eq!(s2c(&near), s2c(&far), "server → client");
    assert_eq!(c2s(&near).len() + s2c(&near).len(), near.len());
    // Each end's capture is in time order, and every packet reached the other end no sooner
    // than the path's delay after its record at the sending end (the instant it entered the
    // path).
    for (end, v) in [("client", &near), ("server", &far)] {
        assert!(
            v.windows(2).all(|w| w[0].0 <= w[1].0),
            "the {end}'s capture goes back in time"
        );
    }
    let times = |v: &[(u64, Vec<u8>)], at: std::ops::Range<usize>| {
        v.iter()
            .filter(|(_, p)| p.get(at.clone()) == Some(&FAR[..]))
            .map(|(t, _)| *t)
            .collect::<Vec<_>>()
    };
    let delay_ns = 15_000_000;
    for (way, sent, got) in [
        ("client → server", times(&near, 16..20), times(&far, 16..20)),
        ("server → client", times(&far, 12..16), times(&near, 12..16)),
    ] {
        for (k, (s, g)) in sent.iter().zip(&got).enumerate() {
            assert!(
                *g >= s + delay_ns,
                "{way} packet {k}: recorded at {s} ns and arrived at {g} ns, under 15 ms"
            );
        }
    }
    // Every packet read entered its path at the kernel's departure stamp (the devices' taps)
    // or, when it left while the line wrote one the other way, at that write; none at the
    // line's read. The taps are best effort: a machine that refuses them skips this part.
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err
        .lines()
        .find(|l| l.contains("entered the path when they left the sender"))
        .unwrap_or_else(|| panic!("no departure count in: {err}"));
    // "delay line: N packets entered … (read X µs later on average), C at the line's previous
    // event at that device, U when read (no tap stamp)[; no departure tap on DEVICE: why]"
    let parts: Vec<&str> = line.split(", ").collect();
    let first = |part: &str| -> u64 {
        let w = part.split_whitespace().next().expect("a count");
        w.parse().unwrap_or_else(|_| panic!("{w:?} in {line}"))
    };
    let stamped = first(line.trim_start_matches("delay line: "));
    if line.contains("no departure tap on") {
        common::skip_unless_required("TCPDOCTOR_REQUIRE_WAN", "departure taps", line);
    } else {
        let read = (c2s(&near).len() + s2c(&far).len()) as u64;
        assert_eq!(parts.len(), 3, "{line}");
        assert_eq!(stamped + first(parts[1]), read, "{line}");
        assert_eq!(first(parts[2]), 0, "{line}");
    }
    // And the coalesced twin is round-trip bound: one RTT per exchange, named as such.
    let r = analyze(&dir.path("near.pcapng"));
    let k = kinds(&r);
    assert!(k.iter().any(|k| k.starts_with("rtt_bound")), "{k:?}");
    assert!(!k.iter().any(|k| k.starts_with("nagle")), "{k:?}");
}

/// Ctrl-C while the client runs: exit 130, and neither the server nor the client is left.
#[test]
fn ctrl_c_leaves_nothing_behind() {
    let dir = OpenDir::new("wan-sigint");
    let bin = dir.install(&live::tcpdoctor_bin());
    let ex = dir.install(&live::exchange_bin()).display().to_string();
    let id = std::process::id();
    // The shell computes the numbers, so only the sleepers' own argv hold them.
    let (client, client_mark) = (
        format!("sleep $((81000+0)).{id}"),
        format!("sleep 81000.{id}"),
    );
    let (server, server_mark) = (
        format!("sleep $((82000+0)).{id}"),
        format!("sleep 82000.{id}"),
    );
    let mut child = live::unprivileged(&bin)
        .current_dir(&dir.0)
        .args(["sandbox", "--delay", "5ms", "--server"])
        .arg(format!("{ex} serve 127.0.0.1:7070 & {server}"))
        .args(["--server-port", "7070", "--"])
        .arg(&client)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn tcpdoctor sandbox");
    // Bounded wait for the client to be running (or for the sandbox to have refused).
    for _ in 0..3000 {
        if !live::processes_with(&client_mark).is_empty()
            || child.try_wait().ok().flatten().is_some()
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    if let Ok(Some(_)) = child.try_wait() {
        let out = child.wait_with_output().expect("output");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.code() == Some(2)
                && common::wan_unavailable("ctrl-c over the WAN path", &err),
            "the sandbox ended before the client ran: {:?} {err}",
            out.status
        );
        return;
    }
    assert!(
        !live::processes_with(&client_mark).is_empty(),
        "the client runs"
    );
    live::interrupt(&child);
    let out = child.wait_with_output().expect("wait");
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left: Vec<String> = [client_mark, server_mark, format!("{ex} serve")]
        .iter()
        .flat_map(|m| live::processes_with(m))
        .collect();
    assert_eq!(
        left,
        Vec::<String>::new(),
        "nothing the sandbox started survives"
    );
}

/// The 6th response dropped (`drop=s2c:8,9`: server → client packet 8 is that response after
/// the SYN-ACK, an ACK and five responses; 9 is the server's next packet). It is the only
/// segment in flight, so no duplicate ACK can come and only the retransmission timeout (~200 ms)
/// recovers it; the server's end, which sees the original and the timeout's retransmission,
/// names `retransmission_stall` server → client. The line says what it dropped.
#[test]
fn a_drop_pattern_that_forces_a_timeout_is_named_at_the_senders_end() {
    let dir = OpenDir::new("wan-drop");
    let ex = dir.install(&live::exchange_bin()).display().to_string();
    let mut args = words(&["--delay", "2ms", "--path", "drop=s2c:8,9", "-w", "d.pcapng"]);
    args.extend([
        "--server".into(),
        format!("{ex} serve 127.0.0.1:7070 coalesce"),
        "--server-port".into(),
        "7070".into(),
        "--".into(),
        format!("{ex} client 198.18.0.1:7070 10"),
    ]);
    let Some(out) = sandbox(&dir, "drop pattern", &args) else {
        return;
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("(2 dropped by loss)"), "{err}");
    let r = analyze(&dir.path("d.server.pcapng"));
    let k = kinds(&r);
    assert!(
        k.contains(&"retransmission_stall \"server_to_client\"".to_string()),
        "at the server's end: {k:?}"
    );
}

/// A 10 Mbit/s bottleneck: the far end receives the client's bulk data at 10 Mbit/s of IP
/// bytes (the line paces whole packets; it can be late, never early, so the bound above is
/// physics and the one below only says the line kept up).
#[test]
fn a_10mbit_bottleneck_carries_10mbit() {
    let dir = OpenDir::new("wan-rate");
    let ex = dir.install(&live::exchange_bin()).display().to_string();
    let mut args = words(&["--delay", "2ms", "--rate", "10mbit", "-w", "r.pcapng"]);
    args.extend([
        "--server".into(),
        format!("{ex} sink 127.0.0.1:7070"),
        "--server-port".into(),
        "7070".into(),
        "--".into(),
        format!("{ex} flood 198.18.0.1:7070 1 1448"),
    ]);
    if sandbox(&dir, "rate", &args).is_none() {
        return;
    }
    let far = packets(&dir.path("r.server.pcapng"));
    let data: Vec<&(u64, Vec<u8>)> = far
        .iter()
        .filter(|(_, p)| p.len() > 1000 && p.get(12..16) == Some(&[198, 18, 0, 2][..]))
        .collect();
    assert!(
        data.len() > 200,
        "{} full packets at the server's end",
        data.len()
    );
    let span = (data[data.len() - 1].0 - data[0].0) as f64 / 1e9;
    let bits: usize = data[1..].iter().map(|(_, p)| p.len() * 8).sum();
    let mbit = bits as f64 / span / 1e6;
    assert!(
        mbit <= 10.2,
        "{mbit:.3} Mbit/s through a 10 Mbit/s bottleneck"
    );
    assert!(mbit >= 8.0, "{mbit:.3} Mbit/s: the line did not keep up");
}

/// A server command that backgrounds the server and ends (`srv &`, as a daemon does): the
/// sandbox waits for the port in the far namespace, runs the client, and stops the server it
/// left there, although it is outside the command's process group.
#[test]
fn a_server_that_leaves_its_process_group_is_served_and_stopped() {
    let dir = OpenDir::new("wan-daemon");
    let ex = dir.install(&live::exchange_bin()).display().to_string();
    // setsid: the server leaves the command's process group and session, as a daemon does.
    let server = format!("setsid {ex} serve 127.0.0.1:7070 coalesce &");
    let args = vec![
        "--delay".to_string(),
        "2ms".into(),
        "--server".into(),
        server,
        "--server-port".into(),
        "7070".into(),
        "--".into(),
        format!("{ex} client 198.18.0.1:7070 5"),
    ];
    let Some(out) = sandbox(&dir, "daemonizing server", &args) else {
        return;
    };
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("sent_bytes="), "{said}");
    assert_eq!(
        live::processes_with(&format!("{ex} serve")),
        Vec::<String>::new(),
        "the server left in the far namespace is stopped"
    );
}

/// The commands at both ends keep CAP_NET_RAW over the path's namespaces (an ambient
/// capability of the user namespace the sandbox made), so a user's own `tcpdump -i tdnear0`
/// (client) or `-i tdfar0` (server) captures at its end with the kernel's timestamps, as
/// `scripts/bench-wan.sh` does to measure the delay per packet. Before, an unprivileged user's
/// commands held no capability at all (`CapEff: 0`).
#[test]
fn both_ends_commands_may_capture_on_their_device() {
    let dir = OpenDir::new("wan-sandbox-caps");
    let ex = dir.install(&live::exchange_bin()).display().to_string();
    let mut args = words(&["--delay", "1ms", "--server"]);
    args.push(format!(
        "grep CapEff /proc/self/status > server.caps; exec {ex} sink 127.0.0.1:7070"
    ));
    args.extend(words(&["--server-port", "7070", "--"]));
    args.push("grep CapEff /proc/self/status > client.caps".into());
    if sandbox(&dir, "capabilities in the sandbox", &args).is_none() {
        return;
    }
    const CAP_NET_RAW: u32 = 13;
    for end in ["client.caps", "server.caps"] {
        let text = std::fs::read_to_string(dir.path(end)).expect(end);
        let hex = text.trim().trim_start_matches("CapEff:").trim();
        let caps = u64::from_str_radix(hex, 16).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert!(
            caps & (1 << CAP_NET_RAW) != 0,
            "{end}: CAP_NET_RAW not held: {text}"
        );
    }
}
