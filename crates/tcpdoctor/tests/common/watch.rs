//! A running `tcpdoctor watch` and a real Prometheus scraping it, for the watch tests.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A running `tcpdoctor watch` and the address it serves.
pub struct Exporter {
    pub child: Child,
    pub addr: String,
    pub stderr: BufReader<ChildStderr>,
}

impl Exporter {
    /// `tcpdoctor watch --listen 127.0.0.1:0 EXTRA…`, once it serves.
    pub fn start(extra: &[&str]) -> Exporter {
        Exporter::spawn(Command::new(env!("CARGO_BIN_EXE_tcpdoctor")), extra)
    }

    /// As [`Exporter::start`], with `cmd` running the binary (e.g. `nsenter --net=… PATH`).
    pub fn spawn(mut cmd: Command, extra: &[&str]) -> Exporter {
        let mut child = cmd
            .args(["watch", "--listen", "127.0.0.1:0"])
            // 200 ms unless the test chose its own.
            .args(if extra.contains(&"--interval") {
                &[][..]
            } else {
                &["--interval", "200ms"][..]
            })
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start tcpdoctor watch");
        let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
        let mut line = String::new();
        stderr.read_line(&mut line).expect("its first line");
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_owned();
        Exporter {
            child,
            addr,
            stderr,
        }
    }

    pub fn get(&self, path: &str) -> (u16, String) {
        let mut s = TcpStream::connect(&self.addr).expect("connect to the exporter");
        // A refused connection (503 while busy, closed at once) reads as an empty answer.
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let _ = write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n");
        let mut text = String::new();
        let _ = s.read_to_string(&mut text);
        let status = text
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = text.split_once("\r\n\r\n").map(|x| x.1).unwrap_or("");
        (status, body.to_owned())
    }

    /// The value of the sample line `name{labels}` (exactly), if present.
    pub fn value(metrics: &str, series: &str) -> Option<f64> {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    /// Scrapes until `ok` holds (a sample at a time), for at most 30 s.
    pub fn until(&self, what: &str, ok: impl FnMut(&str) -> bool) -> String {
        self.until_within(what, Duration::from_secs(30), ok)
    }

    /// Scrapes until `ok` holds (it sees every scrape), for at most `limit`.
    pub fn until_within(
        &self,
        what: &str,
        limit: Duration,
        mut ok: impl FnMut(&str) -> bool,
    ) -> String {
        let start = Instant::now();
        loop {
            let (_, m) = self.get("/metrics");
            if ok(&m) {
                return m;
            }
            assert!(start.elapsed() < limit, "{what}; last scrape:\n{m}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A real Prometheus server (Debian's), scraping the exporter every 500 ms from a temp config
/// and data directory; stopped when dropped.
pub struct Prometheus {
    pub child: Child,
    pub addr: String,
    _dir: super::Scratch,
}

impl Prometheus {
    pub fn start(binary: &std::path::Path, target: &str) -> Prometheus {
        let dir = super::Scratch::new("watch-prometheus");
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 500ms\n  evaluation_interval: 500ms\n\
                 scrape_configs:\n  - job_name: tcpdoctor\n    static_configs:\n      \
                 - targets: ['{target}']\n"
            ),
        )
        .expect("config");
        let addr = format!("127.0.0.1:{}", super::run::free_port());
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).expect("log"))
            .spawn()
            .expect("start prometheus");
        let p = Prometheus {
            child,
            addr,
            _dir: dir,
        };
        let start = Instant::now();
        while !p.http("/-/ready").starts_with("HTTP/1.1 200") {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "prometheus never got ready"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        p
    }

    pub fn http(&self, path: &str) -> String {
        let Ok(mut s) = TcpStream::connect(&self.addr) else {
            return String::new();
        };
        let _ = write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        );
        let mut text = String::new();
        let _ = s.read_to_string(&mut text);
        text
    }

    /// Each series of an instant query: its `process` label and its value.
    pub fn query_by_process(&self, promql: &str) -> Vec<(String, f64)> {
        self.answer(promql)["data"]["result"]
            .as_array()
            .map(|r| {
                r.iter()
                    .filter_map(|s| {
                        let name = s["metric"]["process"].as_str().unwrap_or("").to_owned();
                        Some((name, s["value"][1].as_str()?.parse().ok()?))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The values of an instant query's series (none when it returns nothing).
    pub fn query(&self, promql: &str) -> Vec<f64> {
        self.answer(promql)["data"]["result"]
            .as_array()
            .map(|r| {
                r.iter()
                    .filter_map(|s| s["value"][1].as_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Prometheus's JSON answer to an instant query.
    pub fn answer(&self, promql: &str) -> serde_json::Value {
        let q: String = promql
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect();
        let text = self.http(&format!("/api/v1/query?query={q}"));
        let body = text.split_once("\r\n\r\n").map(|x| x.1).unwrap_or("");
        // A chunked body: the JSON is the one line that starts with `{`.
        let json = body.lines().find(|l| l.starts_with('{')).unwrap_or("{}");
        serde_json::from_str(json).unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `promtool check metrics` accepts `text` without a word.
#[allow(dead_code)]
pub fn promtool_passes(promtool: &std::path::Path, text: &str) {
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
        .write_all(text.as_bytes())
        .expect("feed promtool");
    let out = check.wait_with_output().expect("promtool ran");
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A client on its own thread sending `request` to `port` and reading each whole reply (ended
/// by a `.` line), pausing `pause` between them, until `done` or `limit` (bounded); counts the
/// replies.
#[allow(dead_code)]
pub fn client(
    port: u16,
    request: &'static [u8],
    pause: Duration,
    limit: Duration,
    done: &Arc<AtomicBool>,
) -> (JoinHandle<()>, Arc<AtomicU64>) {
    let count = Arc::new(AtomicU64::new(0));
    let (done, n) = (Arc::clone(done), Arc::clone(&count));
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let h = std::thread::spawn(move || {
        let start = Instant::now();
        let mut buf = [0u8; 4096];
        while !done.load(Ordering::Relaxed) && start.elapsed() < limit {
            if s.write_all(request).is_err() {
                return;
            }
            let mut got = Vec::new();
            while !got.ends_with(b".\r\n") {
                match s.read(&mut buf) {
                    Ok(k) if k > 0 => got.extend_from_slice(&buf[..k]),
                    _ => return,
                }
            }
            n.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(pause);
        }
    });
    (h, count)
}

/// A tool of Debian's `prometheus` package (`prometheus`, `promtool`), or `None` after saying
/// the test is skipped (a failure when TCPDOCTOR_REQUIRE_TOOLS is set).
pub fn prometheus_tool(test: &str, name: &str) -> Option<PathBuf> {
    let found = super::installed(name);
    if found.is_none() {
        super::skip_unless_required(
            "TCPDOCTOR_REQUIRE_TOOLS",
            test,
            &format!("{name} (Debian's prometheus) is not installed"),
        );
    }
    found
}
