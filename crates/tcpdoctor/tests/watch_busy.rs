//! `tcpdoctor watch` exports `busy_poll` (issue 31): two `tcpdoctor specimen` line servers
//! answer a client each, the client pausing 5 ms between requests. One waits for its send
//! queue to drain by polling it (`--drain spin`: `ioctl(SIOCOUTQ)` in a loop until the
//! reply's ACK, which the client delays); its twin writes and goes back to waiting for the
//! next request. Through a real Prometheus, the spinner's series gets
//! `tcpdoctor_finding_lost_seconds_total{kind="busy_poll"}` growing and a sockets gauge of 1;
//! the twin, as busy with requests, gets neither; the exposition passes `promtool`.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::watch::{Exporter, Prometheus};

/// A `tcpdoctor specimen` with `args`, once it listens; killed when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn specimen(args: &[&str]) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(["specimen", "--idle-timeout", "120s"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn specimen");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("its readiness line");
    let port = line
        .trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no `listening ADDR:PORT` line: {line:?}"));
    Server { child, port }
}

#[test]
fn prometheus_sees_busy_poll_for_the_spinning_server_and_not_for_its_twin() {
    let test = "watch_busy::prometheus_sees_busy_poll";
    let Some(binary) = common::watch::prometheus_tool(test, "prometheus") else {
        return;
    };
    let Some(promtool) = common::watch::prometheus_tool(test, "promtool") else {
        return;
    };
    let spin = specimen(&["--writes", "whole", "--drain", "spin"]);
    let calm = specimen(&["--writes", "whole"]);
    let w = Exporter::start(&["--interval", "1s"]);
    let prom = Prometheus::start(&binary, &w.addr);
    let done = Arc::new(AtomicBool::new(false));
    let (spin_client, spin_n) = common::watch::client(
        spin.port,
        b"LIST\n",
        Duration::from_millis(5),
        Duration::from_secs(120),
        &done,
    );
    let (calm_client, calm_n) = common::watch::client(
        calm.port,
        b"LIST\n",
        Duration::from_millis(5),
        Duration::from_secs(120),
        &done,
    );
    let lost = |port: u16| {
        prom.query(&format!(
            "rate(tcpdoctor_finding_lost_seconds_total{{kind=\"busy_poll\",\
             process=\"tcpdoctor\",port=\"{port}\"}}[1m])"
        ))
    };
    let sent = |port: u16| {
        prom.query(&format!(
            "rate(tcpdoctor_tcp_sent_bytes_total{{process=\"tcpdoctor\",port=\"{port}\"}}[1m])"
        ))
    };
    // Until Prometheus has a rate of CPU lost to polling for the spinner, and has seen the
    // twin answer for as long (bounded: 90 s).
    let start = Instant::now();
    let spin_rate = loop {
        let r = lost(spin.port);
        let calm_busy = sent(calm.port).first().is_some_and(|b| *b > 0.0);
        if r.first().is_some_and(|v| *v > 0.0) && calm_busy {
            break r;
        }
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "no busy_poll through Prometheus: {r:?}, twin answering {calm_busy}; replies {} \
             and {}; last scrape:\n{}",
            spin_n.load(Ordering::Relaxed),
            calm_n.load(Ordering::Relaxed),
            w.get("/metrics").1
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    // Named where true: CPU seconds above the budget per second, at most one core's worth
    // (the specimen polls on one thread), on its one connection.
    assert!(spin_rate[0] > 0.0 && spin_rate[0] <= 1.05, "{spin_rate:?}");
    let sockets = format!(
        "tcpdoctor_finding_sockets{{kind=\"busy_poll\",process=\"tcpdoctor\",port=\"{}\"}}",
        spin.port
    );
    assert_eq!(prom.query(&sockets), [1.0], "{sockets}");
    // Not named where false: the twin answers the same requests, and has no busy_poll row
    // (or a zero one).
    let calm_rate = lost(calm.port);
    assert!(calm_rate.iter().all(|v| *v == 0.0), "twin: {calm_rate:?}");
    let calm_sockets = prom.query(&format!(
        "tcpdoctor_finding_sockets{{kind=\"busy_poll\",port=\"{}\"}} > 0",
        calm.port
    ));
    assert!(calm_sockets.is_empty(), "{calm_sockets:?}");
    assert!(calm_n.load(Ordering::Relaxed) > 100, "the twin was busy");
    let (_, text) = w.get("/metrics");
    assert!(text.contains("tcpdoctor_finding_lost_seconds_total{kind=\"busy_poll\""));
    common::watch::promtool_passes(&promtool, &text);
    done.store(true, Ordering::Relaxed);
    for h in [spin_client, calm_client] {
        let _ = h.join();
    }
}
