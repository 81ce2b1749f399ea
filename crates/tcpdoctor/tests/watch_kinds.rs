//! `tcpdoctor watch` exports inspect's finding kinds (issue 31): a real Prometheus scrapes the
//! exporter while two real CPython asyncio servers answer a client each, both writing every
//! reply one line per write (testdata/servers/asyncio_lines.py per-line). One has Nagle on
//! (the accepted sockets of socket.create_server keep it); its twin's listener has
//! TCP_NODELAY, which every accepted socket inherits. Through Prometheus's HTTP API,
//! `rate(tcpdoctor_finding_lost_seconds_total{kind="nagle_delayed_ack"}[1m])` is above zero
//! for the first server's series and absent (or zero) for the twin's, though the twin is busy
//! too; the Grafana panel "Which services stall, and on what" names the first and not the
//! twin; the exposition with kind rows passes `promtool check metrics`.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::watch::{Exporter, Prometheus};
use serde_json::Value;

/// asyncio_lines.py per-line on a free port (`extra`: "nodelay-listener"), once it listens.
fn server(extra: &[&str]) -> (Child, u16) {
    let port = common::run::free_port();
    let mut child = Command::new("python3")
        .arg(common::repo().join("testdata/servers/asyncio_lines.py"))
        .args([port.to_string().as_str(), "per-line", "12"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("its readiness line");
    assert!(line.contains("listening"), "{line:?}");
    (child, port)
}

/// The `port` labels of an instant query's series of finding kind `kind`.
fn ports(answer: &Value, kind: &str) -> Vec<String> {
    answer["data"]["result"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter(|s| s["metric"]["kind"] == kind)
                .filter_map(|s| Some(s["metric"]["port"].as_str()?.to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn prometheus_rates_nagle_held_time_for_the_per_line_server_and_not_for_its_nodelay_twin() {
    let test = "watch_kinds::prometheus_rates_nagle";
    let Some(binary) = common::watch::prometheus_tool(test, "prometheus") else {
        return;
    };
    let Some(promtool) = common::watch::prometheus_tool(test, "promtool") else {
        return;
    };
    if !common::has_python3(test) {
        return;
    }
    let (mut nagle, nagle_port) = server(&[]);
    let (mut twin, twin_port) = server(&["nodelay-listener"]);
    let w = Exporter::start(&["--interval", "1s"]);
    let prom = Prometheus::start(&binary, &w.addr);
    let done = Arc::new(AtomicBool::new(false));
    let (nagle_client, nagle_n) = common::watch::client(
        nagle_port,
        b"q\n",
        Duration::ZERO,
        Duration::from_secs(90),
        &done,
    );
    let (twin_client, twin_n) = common::watch::client(
        twin_port,
        b"q\n",
        Duration::ZERO,
        Duration::from_secs(90),
        &done,
    );
    let lost = |port: u16| {
        format!(
            "rate(tcpdoctor_finding_lost_seconds_total{{kind=\"nagle_delayed_ack\",\
             process=\"python3\",port=\"{port}\"}}[1m])"
        )
    };
    let busy = |port: u16| {
        prom.query(&format!(
            "rate(tcpdoctor_tcp_sent_bytes_total{{process=\"python3\",port=\"{port}\"}}[1m])"
        ))
    };
    // Until Prometheus has a rate of held time for the Nagle server, and has seen the twin
    // send for as long (bounded: 60 s).
    let start = Instant::now();
    let nagle_rate = loop {
        let r = prom.query(&lost(nagle_port));
        let twin_busy = busy(twin_port).first().is_some_and(|b| *b > 0.0);
        if r.first().is_some_and(|v| *v > 0.0) && twin_busy {
            break r;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no held time through Prometheus: {r:?}, twin sending {twin_busy}; exchanges \
             {} and {}; last scrape:\n{}",
            nagle_n.load(Ordering::Relaxed),
            twin_n.load(Ordering::Relaxed),
            w.get("/metrics").1
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    // Named where true: writes held, on the one connection that holds them.
    assert!(
        nagle_rate[0] > 0.0 && nagle_rate[0] <= 1.0,
        "{nagle_rate:?}"
    );
    let sockets = format!(
        "tcpdoctor_finding_sockets{{kind=\"nagle_delayed_ack\",process=\"python3\",port=\"{nagle_port}\"}}"
    );
    assert_eq!(prom.query(&sockets), [1.0], "{sockets}");
    // Not named where false: the twin answers with the same per-line writes, busy, and has no
    // held time (absent, or 0 if a row ever appeared).
    let twin_rate = prom.query(&lost(twin_port));
    assert!(twin_rate.iter().all(|v| *v == 0.0), "twin: {twin_rate:?}");
    let twin_sockets = prom.query(&format!(
        "tcpdoctor_finding_sockets{{kind=\"nagle_delayed_ack\",port=\"{twin_port}\"}} > 0"
    ));
    assert!(twin_sockets.is_empty(), "{twin_sockets:?}");
    assert!(!busy(twin_port).is_empty(), "the twin's series exists");
    // The dashboard's panel answers "which services stall, and on what" with the first only.
    let dash: Value = serde_json::from_str(
        &std::fs::read_to_string(common::repo().join("deploy/grafana/tcpdoctor-watch.json"))
            .expect("the dashboard"),
    )
    .expect("dashboard JSON");
    let panel = dash["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .find(|p| p["title"] == "Which services stall, and on what")
        .expect("the stall panel");
    let expr = panel["targets"][0]["expr"]
        .as_str()
        .expect("expr")
        .replace("$__rate_interval", "1m")
        .replace("$instance", ".*");
    let a = prom.answer(&expr);
    let named = ports(&a, "nagle_delayed_ack");
    assert!(named.contains(&nagle_port.to_string()), "{expr}: {a}");
    assert!(!named.contains(&twin_port.to_string()), "{expr}: {a}");
    // The exposition with kind rows passes promtool.
    let (_, text) = w.get("/metrics");
    assert!(text.contains("tcpdoctor_finding_lost_seconds_total{kind=\"nagle_delayed_ack\""));
    common::watch::promtool_passes(&promtool, &text);
    // The holds were caught by fast samples, and the exporter says what they cost.
    assert!(
        Exporter::value(&text, "tcpdoctor_watch_burst_samples_total").is_some_and(|n| n > 0.0),
        "{text}"
    );
    assert!(
        Exporter::value(&text, "tcpdoctor_watch_burst_cpu_seconds").is_some(),
        "{text}"
    );
    done.store(true, Ordering::Relaxed);
    for h in [nagle_client, twin_client] {
        let _ = h.join();
    }
    for c in [&mut nagle, &mut twin] {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// A python3 process named `name` holding three connections to `port`, exchanging on them in
/// the order `pattern` (indices) until its stdin closes (bounded: 90 s); returned once its
/// connections are up.
fn pool_client(name: &str, port: u16, pattern: &str) -> Child {
    let script = r#"
import socket, sys, threading, time
open('/proc/self/comm', 'w').write(sys.argv[1])
port, pattern = int(sys.argv[2]), [int(x) for x in sys.argv[3].split(",")]
conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
def exchange(s):
    s.sendall(b"LIST\n")
    got = b""
    while not got.endswith(b".\r\n"):
        b = s.recv(4096)
        if not b:
            sys.exit("server closed")
        got += b
for s in conns:
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    exchange(s)
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
print("ready", flush=True)
end = time.time() + 90
while not done.is_set() and time.time() < end:
    for i in pattern:
        exchange(conns[i])
"#;
    let mut child = Command::new("python3")
        .args(["-c", script, name, &port.to_string(), pattern])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("its ready line");
    assert!(line.starts_with("ready"), "{line:?}");
    child
}

#[test]
fn a_pool_used_unevenly_is_a_pool_imbalance_gauge_and_one_used_in_turn_has_none() {
    let test = "watch_kinds::a_pool_used_unevenly";
    if !common::has_python3(test) {
        return;
    }
    let mut server = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args([
            "specimen",
            "--idle-timeout",
            "60s",
            "--writes",
            "whole",
            "--nodelay",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("specimen");
    let mut line = String::new();
    BufReader::new(server.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("its readiness line");
    let port: u16 = line
        .trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    let mut skew = pool_client("poolskew", port, "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,2");
    let mut turn = pool_client("poolturn", port, "0,1,2");
    // Started after the clients: its first walk over /proc places their sockets (a process
    // started later waits for the next walk, up to 30 s).
    let w = Exporter::start(&["--interval", "1s"]);
    let row = |process: &str| {
        format!(
            "tcpdoctor_finding_sockets{{kind=\"pool_imbalance\",process=\"{process}\",port=\"client\"}}"
        )
    };
    // Named where true: the two connections that carried less than an even share.
    let m = w.until("the uneven pool is named", |m| {
        Exporter::value(m, &row("poolskew")).is_some_and(|n| n > 0.0)
            && Exporter::value(
                m,
                "tcpdoctor_tcp_sent_bytes_total{process=\"poolturn\",port=\"client\"}",
            )
            .is_some_and(|b| b > 0.0)
    });
    assert_eq!(Exporter::value(&m, &row("poolskew")), Some(2.0), "{m}");
    // Not named where false: judged over the same intervals, with no row ever.
    assert_eq!(Exporter::value(&m, &row("poolturn")), None, "{m}");
    for c in [&mut skew, &mut turn] {
        drop(c.stdin.take());
        let _ = c.wait();
    }
    let _ = server.kill();
    let _ = server.wait();
}
