//! `tcpdoctor watch` (issue 31): a real exporter process sampling this host's real sockets.
//! A python3 server accepts a connection from this test and reads what it is sent; its
//! series (process "python3", its listening port) counts the connection and at least every
//! byte sent after the exporter's first sample; the exposition passes `promtool check
//! metrics`; SIGTERM stops it with exit 0; bad flags exit 2 naming the flag.

mod common;

use common::watch::{Exporter, Prometheus};

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A python3 server on a free port that reads everything each connection sends.
fn sink() -> (Child, u16) {
    let code = "import socket,sys\n\
                l=socket.create_server(('127.0.0.1',0))\n\
                print(l.getsockname()[1],flush=True)\n\
                c,_=l.accept()\n\
                while c.recv(1<<16): pass\n\
                sys.stdin.read()\n";
    let mut child = Command::new("python3")
        .args(["-c", code])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("port");
    (child, line.trim().parse().expect("a port"))
}

#[test]
fn a_server_s_series_counts_its_connection_and_the_bytes_it_received() {
    if !common::has_python3("watch_cli::a_server_s_series") {
        return;
    }
    let (mut server, port) = sink();
    let w = Exporter::start(&[]);
    let series = |name: &str| format!("{name}{{process=\"python3\",port=\"{port}\"}}");
    let mut client = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    w.until("the connection is counted", |m| {
        Exporter::value(m, &series("tcpdoctor_tcp_connections")) == Some(1.0)
    });
    // Every byte sent from here on was received after a sample that saw the socket.
    let sent = 4 << 20;
    client.write_all(&vec![7u8; sent]).expect("send");
    let m = w.until("the bytes are counted", |m| {
        Exporter::value(m, &series("tcpdoctor_tcp_received_bytes_total"))
            .is_some_and(|b| b >= sent as f64)
    });
    let got = Exporter::value(&m, &series("tcpdoctor_tcp_received_bytes_total"));
    assert!(
        got.is_some_and(|b| b < (sent + (1 << 20)) as f64),
        "{got:?}: not far more"
    );
    // The test's own end of the connection is its process's client series, not python3's.
    assert!(!m.contains("process=\"python3\",port=\"client\""), "{m}");
    let (code, body) = w.get("/healthz");
    assert_eq!((code, body.as_str()), (200, "ok\n"));
    assert_eq!(w.get("/nothing").0, 404);
    drop(client);
    let _ = server.kill();
    let _ = server.wait();
}

#[test]
fn the_exposition_passes_promtool() {
    let Some(promtool) =
        common::watch::prometheus_tool("watch_cli::the_exposition_passes_promtool", "promtool")
    else {
        return;
    };
    let w = Exporter::start(&[]);
    let m = w.until("a sample", |m| m.contains("tcpdoctor_watch_samples_total"));
    let mut check = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool");
    check
        .stdin
        .take()
        .expect("stdin")
        .write_all(m.as_bytes())
        .expect("feed promtool");
    let out = check.wait_with_output().expect("promtool ran");
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn sigterm_stops_it_cleanly() {
    let mut w = Exporter::start(&[]);
    w.until("a sample", |m| m.contains("tcpdoctor_watch_samples_total"));
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(w.child.id() as i32, libc::SIGTERM) };
    let status = w.child.wait().expect("wait");
    assert_eq!(status.code(), Some(0));
    let mut rest = String::new();
    w.stderr.read_to_string(&mut rest).expect("stderr");
    assert!(rest.contains("stopped"), "{rest}");
}

#[test]
fn bad_flags_and_a_taken_address_exit_2_naming_them() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let out = common::tcpdoctor(&["watch", "--listen", &addr]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--listen") && err.contains(&addr), "{err}");
    for (flag, value) in [
        ("--interval", "0s"),
        ("--interval", "soon"),
        ("--max-series", "0"),
        ("--listen", "nowhere"),
    ] {
        let out = common::tcpdoctor(&["watch", flag, value]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {err}");
        assert!(err.contains(flag), "{flag} {value}: {err}");
    }
}

#[test]
fn prometheus_scrapes_it_and_rate_shows_which_server_is_receiving() {
    let test = "watch_cli::prometheus_scrapes_it";
    let Some(binary) = common::watch::prometheus_tool(test, "prometheus") else {
        return;
    };
    if !common::has_python3(test) {
        return;
    }
    // Two sinks: one is sent to for the whole test, the other holds an idle connection.
    let (mut busy, busy_port) = sink();
    let (mut idle, idle_port) = sink();
    let _idle_client = TcpStream::connect(("127.0.0.1", idle_port)).expect("connect");
    let w = Exporter::start(&[]);
    let prom = Prometheus::start(&binary, &w.addr);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sender = {
        let done = std::sync::Arc::clone(&done);
        std::thread::spawn(move || {
            let mut c = TcpStream::connect(("127.0.0.1", busy_port)).expect("connect");
            let chunk = vec![1u8; 1 << 16];
            let start = Instant::now();
            // Bounded: until the test has its answer, and never past 90 s.
            while !done.load(std::sync::atomic::Ordering::Relaxed)
                && start.elapsed() < Duration::from_secs(90)
            {
                if c.write_all(&chunk).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let rate = |port: u16| {
        prom.query(&format!(
            "rate(tcpdoctor_tcp_received_bytes_total{{process=\"python3\",port=\"{port}\"}}[3s])"
        ))
    };
    let start = Instant::now();
    let (busy_rate, idle_rate) = loop {
        let (b, i) = (rate(busy_port), rate(idle_port));
        if b.first().is_some_and(|r| *r > 0.0) && !i.is_empty() {
            break (b, i);
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no rate through Prometheus: busy {b:?}, idle {i:?}; up: {:?}",
            prom.query("up")
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = sender.join();
    assert!(
        busy_rate[0] > 1e5,
        "the busy server receives: {busy_rate:?} B/s"
    );
    assert_eq!(idle_rate, [0.0], "the idle one does not");
    assert_eq!(prom.query("up{job=\"tcpdoctor\"}"), [1.0]);
    // Every query of the Grafana dashboard runs against the real series.
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(common::repo().join("deploy/grafana/tcpdoctor-watch.json"))
            .expect("the dashboard"),
    )
    .expect("dashboard JSON");
    let panels = dash["panels"].as_array().expect("panels");
    assert!(panels.len() >= 6);
    for panel in panels {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("expr");
            let expr = expr
                .replace("$__rate_interval", "3s")
                .replace("$instance", ".*");
            let a = prom.answer(&expr);
            assert_eq!(a["status"], "success", "{}: {expr}: {a}", panel["title"]);
        }
    }
    let busy_panel = panels[0]["targets"][0]["expr"]
        .as_str()
        .expect("expr")
        .replace("send_buffer_limited_seconds", "received_bytes")
        .replace("$__rate_interval", "3s")
        .replace("$instance", ".*");
    assert!(
        !prom.query(&busy_panel).is_empty(),
        "the dashboard's per-service query shape finds the servers: {busy_panel}"
    );
    for c in [&mut busy, &mut idle] {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// 20 python3 processes named svc00…svc19, each listening on its own port with 25
/// connections to itself: 1,000 connections.
fn fleet() -> Vec<Child> {
    let code = "import socket,sys\n\
                open('/proc/self/comm','w').write(sys.argv[1])\n\
                l=socket.create_server(('127.0.0.1',0))\n\
                keep=[]\n\
                for i in range(25):\n    \
                    c=socket.create_connection(l.getsockname()); s,_=l.accept(); keep+=[c,s]\n\
                print('ready',flush=True)\n\
                sys.stdin.read()\n";
    (0..20)
        .map(|i| {
            let mut child = Command::new("python3")
                .args(["-c", code, &format!("svc{i:02}")])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("python3");
            let mut line = String::new();
            BufReader::new(child.stdout.take().expect("stdout"))
                .read_line(&mut line)
                .expect("ready");
            assert_eq!(line.trim(), "ready");
            child
        })
        .collect()
}

#[test]
fn a_thousand_connections_in_twenty_processes_make_forty_series_and_the_cap_holds() {
    if !common::has_python3("watch_cli::a_thousand_connections") {
        return;
    }
    let mut procs = fleet();
    let series = |m: &str, name: &str| -> Vec<String> {
        m.lines()
            .filter(|l| l.starts_with(&format!("{name}{{process=\"svc")))
            .map(str::to_owned)
            .collect()
    };
    let w = Exporter::start(&[]);
    let m = w.until("every process's connections", |m| {
        let conns = series(m, "tcpdoctor_tcp_connections");
        let total: f64 = conns
            .iter()
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        total == 1000.0
    });
    // Each process: its listening port (25 accepted) and "client" (its 25 own connections).
    let conns = series(&m, "tcpdoctor_tcp_connections");
    assert_eq!(conns.len(), 40, "{conns:#?}");
    assert_eq!(
        conns
            .iter()
            .filter(|l| l.contains("port=\"client\""))
            .count(),
        20
    );
    assert!(conns.iter().all(|l| l.ends_with(" 25")), "{conns:#?}");
    // Capped at 10: ten series, the rest counted as dropped.
    let capped = Exporter::start(&["--max-series", "10"]);
    let m = capped.until("the capped exporter's first samples", |m| {
        Exporter::value(m, "tcpdoctor_watch_samples_total").is_some_and(|n| n >= 2.0)
    });
    assert_eq!(Exporter::value(&m, "tcpdoctor_watch_series"), Some(10.0));
    assert!(
        Exporter::value(&m, "tcpdoctor_watch_series_dropped_total").is_some_and(|n| n >= 500.0),
        "{m}"
    );
    for p in &mut procs {
        let _ = p.kill();
        let _ = p.wait();
    }
}

#[test]
fn slow_clients_neither_hold_the_scrapes_nor_the_shutdown() {
    let mut w = Exporter::start(&[]);
    w.until("a sample", |m| m.contains("tcpdoctor_watch_samples_total"));
    // More clients than the exporter serves at once, each trickling a request a byte a second
    // (each byte within any per-read timeout): only a deadline on the whole request frees them.
    let mut slow: Vec<TcpStream> = (0..24)
        .map(|_| TcpStream::connect(&w.addr).expect("connect"))
        .collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let trickle = {
        let stop = std::sync::Arc::clone(&stop);
        let mut conns: Vec<TcpStream> =
            slow.iter().map(|s| s.try_clone().expect("clone")).collect();
        std::thread::spawn(move || {
            for _ in 0..60 {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    return;
                }
                for c in &mut conns {
                    let _ = c.write_all(b"G");
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        })
    };
    // A scrape does not hang: it is refused at once (503, busy; or reset, when the refusal
    // closed before its request arrived), or answered once the silent ones ran out of time.
    let mut s = TcpStream::connect(&w.addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(15)))
        .expect("timeout");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("request");
    let mut text = String::new();
    match s.read_to_string(&mut text) {
        Ok(_) => assert!(
            text.starts_with("HTTP/1.1 503") && text.contains("busy")
                || text.starts_with("HTTP/1.1 200") && text.contains("tcpdoctor_"),
            "{text}"
        ),
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
    }
    w.until("a scrape answered 200 while they trickle on", |m| {
        m.contains("tcpdoctor_watch_samples_total")
    });
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(w.child.id() as i32, libc::SIGTERM) };
    assert_eq!(w.child.wait().expect("wait").code(), Some(0));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = trickle.join();
    slow.clear();
}
