//! `tcpdoctor watch` (issue 31) against real servers whose sockets change over time.
//!
//! 1. Across a real `wan:` path (`sandbox --delay 20ms --rate 20mbit`: kernel TCP at both
//!    ends, a 40 ms round trip), two python3 servers answer 256 KiB per request: `tdw-small` with a fixed
//!    4 KiB `SO_SNDBUF` (the kernel doubles it: 8 KiB in flight per 40 ms, far below what the
//!    path carries, here a 20 Mbit/s bottleneck) and its twin `tdw-default`, whose buffer the
//!    kernel autotunes to the window. The servers live in the path's far network namespace;
//!    `watch --netns /proc/PID/ns/net` reads that namespace and serves from ours, and a real
//!    Prometheus scrapes it: `rate(tcpdoctor_tcp_send_buffer_limited_seconds_total)` is over
//!    0.1 s/s for the small buffer and under 0.01 for the twin, both of them sending. A
//!    watch without `--netns` sees neither; one run inside the namespace (`nsenter --net`)
//!    sees them and serves from there.
//! 2. Processes that come and go with `--series-idle 2s`: the series of those that exited
//!    disappear from /metrics after the idle time while those of a live one stay, the
//!    series count never exceeds what the live processes make, and one that comes back
//!    (same name, same port) starts from zero — which Prometheus reads as one counter reset.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use common::live::{self, OpenDir};
use common::watch::{Exporter, Prometheus};

/// A server answering each request line with 256 KiB; argv: name, port, SO_SNDBUF (0: the
/// kernel's autotuning). The buffer set on the listener is inherited by what it accepts.
const SERVER: &str = "import socket,sys,threading\n\
open('/proc/self/comm','w').write(sys.argv[1])\n\
l=socket.socket()\n\
l.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n\
if int(sys.argv[3]): l.setsockopt(socket.SOL_SOCKET,socket.SO_SNDBUF,int(sys.argv[3]))\n\
l.bind(('0.0.0.0',int(sys.argv[2])))\n\
l.listen(16)\n\
body=b'x'*(256<<10)\n\
def serve(c):\n    \
    for line in c.makefile('rb'):\n        \
        c.sendall(body)\n\
while True:\n    \
    c,_=l.accept()\n    \
    threading.Thread(target=serve,args=(c,),daemon=True).start()\n";

/// The client, in the near namespace: one connection to each server, each asking for the
/// next answer as soon as it has the last, until the file `stop` appears (at most 120 s).
const CLIENT: &str = "import os,socket,threading,time\n\
def conn(port):\n    \
    for _ in range(400):\n        \
        try: return socket.create_connection(('198.18.0.1',port))\n        \
        except OSError: time.sleep(0.05)\n    \
    raise SystemExit('nothing listens on %d' % port)\n\
socks=[conn(7070),conn(7071)]\n\
print('ready',flush=True)\n\
end=time.time()+120\n\
def pull(s):\n    \
    while not os.path.exists('stop') and time.time()<end:\n        \
        s.sendall(b'GET\\n')\n        \
        n=256<<10\n        \
        while n:\n            \
            d=s.recv(min(n,1<<16))\n            \
            if not d: return\n            \
            n-=len(d)\n\
ts=[threading.Thread(target=pull,args=(s,)) for s in socks]\n\
[t.start() for t in ts]\n\
[t.join() for t in ts]\n";

/// The host PID of the process named `comm` (the sandbox's PID namespace hides it from
/// nothing: our /proc shows every process).
fn pid_named(comm: &str) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        (name.trim_end() == comm).then_some(pid)
    })
}

#[test]
fn a_small_fixed_send_buffer_across_a_wan_path_shows_send_buffer_limited_time() {
    let test = "watch_wan::a_small_fixed_send_buffer";
    let Some(prometheus) = common::watch::prometheus_tool(test, "prometheus") else {
        return;
    };
    if !common::has_python3(test) {
        return;
    }
    if !live::is_root() {
        // Entering another user namespace's network namespace needs CAP_SYS_ADMIN over it
        // and in our own: root.
        common::skip_unless_required(
            "TCPDOCTOR_REQUIRE_WAN",
            test,
            "watch --netns needs root to enter the path's far namespace",
        );
        return;
    }
    let dir = OpenDir::new("watch-wan");
    std::fs::write(dir.path("srv.py"), SERVER).expect("server script");
    std::fs::write(dir.path("cli.py"), CLIENT).expect("client script");
    let bin = dir.install(&live::tcpdoctor_bin());
    // As nobody, as the WAN path runs in CI. The line captures both ends (headers only).
    let mut sandbox = live::unprivileged(&bin)
        .current_dir(&dir.0)
        .args([
            "sandbox",
            "--delay",
            "20ms",
            "--rate",
            "20mbit",
            "--no-trace",
            "-s",
            "64",
            "-w",
            "near.pcapng",
            "--server",
            "python3 srv.py tdw-small 7071 4096 & exec python3 srv.py tdw-default 7070 0",
            "--server-port",
            "7070",
            "--",
            "python3 cli.py",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tcpdoctor sandbox");
    let mut line = String::new();
    BufReader::new(sandbox.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the client's first line");
    if line.trim() != "ready" {
        let out = sandbox.wait_with_output().expect("sandbox ended");
        let err = String::from_utf8_lossy(&out.stderr);
        if common::wan_unavailable(test, &err) {
            return;
        }
        panic!("{test}: the client never connected: {line:?} {err}");
    }
    let stop = || {
        let _ = std::fs::write(dir.path("stop"), "");
    };
    // Both servers accepted, so both exist.
    let small = pid_named("tdw-small").expect("the small-buffer server");
    assert!(
        pid_named("tdw-default").is_some(),
        "the default-buffer twin"
    );
    let netns = format!("/proc/{small}/ns/net");
    let w = Exporter::start(&["--netns", &netns]);
    let here = Exporter::start(&[]);
    let prom = Prometheus::start(&prometheus, &w.addr);
    let rate = |process: &str| {
        prom.query_by_process(&format!(
            "rate(tcpdoctor_tcp_send_buffer_limited_seconds_total{{process=\"{process}\"}}[3s])"
        ))
    };
    // Until Prometheus holds a whole 3 s window of both series (six scrapes).
    let start = Instant::now();
    while prom
        .query_by_process("count_over_time(tcpdoctor_tcp_send_buffer_limited_seconds_total{process=~\"tdw-.*\"}[3s])")
        .iter()
        .filter(|(_, n)| *n >= 6.0)
        .count()
        < 2
    {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "Prometheus never held both series: {:?}; up: {:?}",
            prom.query_by_process("tcpdoctor_tcp_send_buffer_limited_seconds_total"),
            prom.query_by_process("up")
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let (small_rate, twin_rate) = (rate("tdw-small"), rate("tdw-default"));
    let sent = prom.query_by_process("rate(tcpdoctor_tcp_sent_bytes_total[3s])");
    let m = here.get("/metrics").1;
    let inside = the_other_way(&netns);
    stop();
    let status = sandbox.wait().expect("sandbox ended");
    // One connection each: a rate of 1 is limited the whole time.
    assert_eq!(small_rate.len(), 1, "{small_rate:?}");
    assert_eq!(small_rate[0].0, "tdw-small");
    // The kernel counts a stretch as send-buffer limited from a transmit that finds the
    // writer waiting for space while the congestion window had room, until ACKs free enough
    // space to wake it: with an 8 KiB buffer on a 40 ms path that is a large share of every
    // second (measured 0.34–0.40 s/s, the rest counted as merely busy). A tenth of a second
    // per second is far from zero and from noise.
    assert!(
        small_rate[0].1 > 0.1,
        "the 8 KiB buffer limits the small server: {small_rate:?} (twin {twin_rate:?}; \
         bytes/s sent: {sent:?})"
    );
    assert_eq!(twin_rate.len(), 1, "{twin_rate:?}");
    // Its autotuned buffer keeps ahead of its window: the window, not the buffer, limits it
    // (measured 0 s/s).
    assert!(
        twin_rate[0].1 < 0.01,
        "the autotuned twin is not limited by its buffer: {twin_rate:?} (bytes/s sent: {sent:?})"
    );
    // Both servers sent in the meantime: the twin's zero is not idleness.
    for name in ["tdw-small", "tdw-default"] {
        assert!(
            sent.iter().any(|(p, b)| p == name && *b > 0.0),
            "{name} sends: {sent:?}"
        );
    }
    // Without --netns the exporter reads our own namespace, where neither server is.
    assert!(Exporter::value(&m, "tcpdoctor_watch_samples_total").is_some_and(|n| n >= 1.0));
    assert!(
        !m.contains("\"tdw-small\"") && !m.contains("\"tdw-default\""),
        "{m}"
    );
    assert!(status.success(), "sandbox: {status:?}");
    assert!(
        inside.contains("tcpdoctor_tcp_connections{process=\"tdw-small\",port=\"7071\"} 1\n"),
        "{inside}"
    );
}

/// The other way to read that namespace: watch run inside it (`nsenter --net`), serving
/// there too, scraped from there. Its exposition once it counts the small server's
/// connection (at most 30 s).
fn the_other_way(netns: &str) -> String {
    let mut cmd = Command::new("nsenter");
    cmd.arg(format!("--net={netns}"))
        .arg(env!("CARGO_BIN_EXE_tcpdoctor"));
    let w = Exporter::spawn(cmd, &[]);
    let fetch = "import sys,urllib.request\n\
                 sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())\n";
    let start = Instant::now();
    loop {
        let out = Command::new("nsenter")
            .arg(format!("--net={netns}"))
            .args([
                "python3",
                "-c",
                fetch,
                &format!("http://{}/metrics", w.addr),
            ])
            .output()
            .expect("nsenter python3");
        let m = String::from_utf8_lossy(&out.stdout).into_owned();
        if m.contains("process=\"tdw-small\",port=\"7071\"} 1\n") {
            return m;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "watch inside the namespace: {m} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A python3 process named `name` listening on `port` (0: any) with one connection to
/// itself; each line on its stdin (a byte count) is sent over that connection and read at
/// the other end, then answered `sent`.
struct Svc {
    child: Child,
    port: u16,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

const SVC: &str = "import socket,sys\n\
open('/proc/self/comm','w').write(sys.argv[1])\n\
l=socket.socket()\n\
l.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n\
l.bind(('127.0.0.1',int(sys.argv[2])))\n\
l.listen(4)\n\
c=socket.create_connection(l.getsockname())\n\
s,_=l.accept()\n\
print(l.getsockname()[1],flush=True)\n\
for line in sys.stdin:\n    \
    n=int(line); c.sendall(b'x'*n); got=0\n    \
    while got<n: got+=len(s.recv(1<<16))\n    \
    print('sent',flush=True)\n";

impl Svc {
    fn start(name: &str, port: u16) -> Svc {
        let mut child = Command::new("python3")
            .args(["-c", SVC, name, &port.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let stdin = child.stdin.take().expect("stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("its port");
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}: {line:?}"));
        Svc {
            child,
            port,
            stdin,
            stdout,
        }
    }

    fn send(&mut self, n: usize) {
        writeln!(self.stdin, "{n}").expect("ask");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("answer");
        assert_eq!(line.trim(), "sent");
    }

    fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Svc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `tdw-cg` series of a scrape (one name of each process and port).
fn churn_series(m: &str) -> Vec<String> {
    m.lines()
        .filter_map(|l| l.strip_prefix("tcpdoctor_tcp_connections{process=\"tdw-cg"))
        .map(|l| l.split(' ').next().unwrap_or("").to_owned())
        .collect()
}

fn received(name: &str, port: u16) -> String {
    format!("tcpdoctor_tcp_received_bytes_total{{process=\"{name}\",port=\"{port}\"}}")
}

fn connections(name: &str, port: u16) -> String {
    format!("tcpdoctor_tcp_connections{{process=\"{name}\",port=\"{port}\"}}")
}

#[test]
fn processes_that_come_and_go_leave_no_series_and_one_that_comes_back_starts_from_zero() {
    let test = "watch_wan::processes_that_come_and_go";
    if !common::has_python3(test) {
        return;
    }
    let Some(prometheus) = common::watch::prometheus_tool(test, "prometheus") else {
        return;
    };
    // Wave 1, running before the exporter starts (its first sample places every process).
    let mut a = Svc::start("tdw-cg-a", 0);
    let b = Svc::start("tdw-cg-b", 0);
    let c = Svc::start("tdw-cg-c", 0);
    let a_port = a.port;
    let w = Exporter::start(&["--series-idle", "2s"]);
    let prom = Prometheus::start(&prometheus, &w.addr);
    // Each live process makes two series: its listening port and "client".
    let bounded = |m: &str, live: usize| {
        let s = churn_series(m);
        assert!(
            s.len() <= 2 * live,
            "more series than {live} processes make: {s:?}"
        );
        s
    };
    w.until_within("wave 1 placed", Duration::from_secs(30), |m| {
        bounded(m, 3);
        [&a, &b, &c].iter().zip(["a", "b", "c"]).all(|(s, n)| {
            Exporter::value(m, &connections(&format!("tdw-cg-{n}"), s.port)) == Some(1.0)
        })
    });
    a.send(1 << 20);
    w.until_within("a's megabyte counted", Duration::from_secs(30), |m| {
        Exporter::value(m, &received("tdw-cg-a", a_port)).is_some_and(|v| v >= (1 << 20) as f64)
    });
    let start = Instant::now();
    while prom
        .query_by_process(&received("tdw-cg-a", a_port))
        .first()
        .is_none_or(|v| v.1 < (1 << 20) as f64)
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "Prometheus has a's bytes"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    // a and b exit, c stays: a's and b's series go after the idle time, c's stay.
    let c_port = c.port;
    a.stop();
    b.stop();
    let m = w.until_within("a's and b's series expired", Duration::from_secs(30), |m| {
        bounded(m, 3);
        let s = churn_series(m);
        s.iter().all(|l| l.starts_with("-c\""))
    });
    assert_eq!(
        churn_series(&m),
        [
            format!("-c\",port=\"{c_port}\"}}"),
            "-c\",port=\"client\"}".to_owned()
        ]
    );
    assert!(
        Exporter::value(&m, "tcpdoctor_watch_series_expired_total").is_some_and(|n| n >= 4.0),
        "{m}"
    );
    // Wave 2: a comes back on its port (a socket of a process that just started is placed at
    // the next walk over every process: within 30 s), and d is new.
    let mut a = Svc::start("tdw-cg-a", a_port);
    assert_eq!(a.port, a_port);
    let d = Svc::start("tdw-cg-d", 0);
    w.until_within("wave 2 placed", Duration::from_secs(45), |m| {
        bounded(m, 3);
        Exporter::value(m, &connections("tdw-cg-a", a_port)) == Some(1.0)
            && Exporter::value(m, &connections("tdw-cg-d", d.port)) == Some(1.0)
    });
    a.send(64 << 10);
    let m = w.until_within("a's new bytes counted", Duration::from_secs(30), |m| {
        Exporter::value(m, &received("tdw-cg-a", a_port)).is_some_and(|v| v >= (64 << 10) as f64)
    });
    assert_eq!(
        Exporter::value(&m, &received("tdw-cg-a", a_port)),
        Some((64 << 10) as f64),
        "back from zero: only what its new socket received"
    );
    // Once Prometheus has scraped the new value, it holds one reset and a positive increase.
    let series = received("tdw-cg-a", a_port);
    let start = Instant::now();
    while prom
        .query_by_process(&series)
        .first()
        .is_none_or(|v| v.1 != (64 << 10) as f64)
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "Prometheus has a's new value: {:?}",
            prom.answer(&format!("{series}[5m]"))
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let resets = prom.query_by_process(&format!("resets({series}[5m])"));
    let increase = prom.query_by_process(&format!("increase({series}[5m])"));
    let raw = prom.answer(&format!("{series}[5m]"));
    assert_eq!(resets.len(), 1, "{raw}");
    assert_eq!(resets[0].1, 1.0, "one reset: {raw}");
    assert!(increase[0].1 > 0.0, "{increase:?}: {raw}");
    // Everyone leaves: nothing of theirs stays.
    for s in [a, c, d] {
        s.stop();
    }
    let m = w.until_within(
        "every tdw-cg series expired",
        Duration::from_secs(30),
        |m| churn_series(m).is_empty(),
    );
    assert!(
        Exporter::value(&m, "tcpdoctor_watch_series_expired_total").is_some_and(|n| n >= 10.0),
        "{m}"
    );
}

#[test]
fn a_bad_series_idle_or_netns_exits_2_naming_it() {
    for (flag, value) in [
        ("--series-idle", "0s"),
        ("--series-idle", "soon"),
        ("--series-idle", "200h"),
        ("--netns", "/nonexistent/ns/net"),
    ] {
        let out = common::tcpdoctor(&["watch", "--listen", "127.0.0.1:0", flag, value]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {err}");
        assert!(err.contains(flag), "{flag} {value}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    // Entering a namespace is refused to an unprivileged user: said, naming the capability.
    if live::is_root() {
        let dir = OpenDir::new("watch-netns");
        let out = live::unprivileged(&dir.install(&live::tcpdoctor_bin()))
            .args(["watch", "--listen", "127.0.0.1:0"])
            .args(["--netns", "/proc/self/ns/net"])
            .output()
            .expect("tcpdoctor as nobody");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("--netns") && err.contains("CAP_SYS_ADMIN"),
            "{err}"
        );
    }
}
