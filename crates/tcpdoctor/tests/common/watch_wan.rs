//! The exporter and Prometheus as `watch_wan.rs` drives them (an exporter spawned from any
//! command, `nsenter` included; each query's series named).
//! Helpers for the `tcpdoctor watch` tests: a running exporter and a real Prometheus server
//! scraping it (Debian's `prometheus`, on a loopback port with a temp config and data dir).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStderr, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `tcpdoctor watch` and the address it serves.
pub struct Exporter {
    pub child: Child,
    pub addr: String,
    pub stderr: BufReader<ChildStderr>,
}

impl Exporter {
    /// `tcpdoctor watch --listen 127.0.0.1:0 --interval 200ms EXTRA…`, once it serves.
    pub fn start(extra: &[&str]) -> Exporter {
        Exporter::spawn(Command::new(env!("CARGO_BIN_EXE_tcpdoctor")), extra)
    }

    /// As [`Exporter::start`], with `cmd` running the binary (e.g. `nsenter --net=… PATH`).
    pub fn spawn(mut cmd: Command, extra: &[&str]) -> Exporter {
        let mut child = cmd
            .args(["watch", "--listen", "127.0.0.1:0", "--interval", "200ms"])
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

    /// The body of `GET path`.
    pub fn get(&self, path: &str) -> String {
        let mut s = TcpStream::connect(&self.addr).expect("connect to the exporter");
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let _ = write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n");
        let mut text = String::new();
        let _ = s.read_to_string(&mut text);
        text.split_once("\r\n\r\n")
            .map(|x| x.1)
            .unwrap_or("")
            .to_owned()
    }

    /// The value of the sample line `series` (name and labels, exactly), if present.
    pub fn value(metrics: &str, series: &str) -> Option<f64> {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    /// Scrapes `/metrics` until `ok` holds (it sees every scrape), for at most `limit`.
    pub fn until(&self, what: &str, limit: Duration, mut ok: impl FnMut(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let m = self.get("/metrics");
            if ok(&m) {
                return m;
            }
            assert!(start.elapsed() < limit, "{what}; last scrape:\n{m}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A real Prometheus server scraping one target every 500 ms; stopped when dropped.
pub struct Prometheus {
    child: Child,
    addr: String,
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

    fn http(&self, path: &str) -> String {
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
    pub fn query(&self, promql: &str) -> Vec<(String, f64)> {
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
