//! The shipped PostgreSQL script (`examples/postgres.toml`) against a real PostgreSQL from
//! Debian's packages: its wire protocol v3 (typed, length-prefixed messages) and its default
//! password authentication, SCRAM-SHA-256. A fresh cluster is made with `initdb` in a temp dir
//! and started on 127.0.0.1 at a free port, as an unprivileged user (root cannot run postgres):
//! ourselves when we are not root; else, through `setpriv`, the `postgres` system user when it
//! exists, or `nobody` (postgres needs a uid that has a passwd entry).
//!
//! Where the postgres binaries are missing the test skips with the reason, unless
//! `TCPDOCTOR_REQUIRE_TOOLS=1` (CI), where it fails.

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::chown;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::run::{free_port, scratch};
use serde_json::Value;

/// Not the script's default (`bench-secret`): only `--param password=…` logs in.
const PASSWORD: &str = "pg-test-secret";
const SCRIPT: &str = "examples/postgres.toml";

fn skip(test: &str, why: &str) {
    common::skip_unless_required("TCPDOCTOR_REQUIRE_TOOLS", test, why);
}

/// The directory holding `initdb` and `postgres`: on PATH, else Debian's newest
/// /usr/lib/postgresql/<version>/bin.
fn postgres_bin() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").into_iter().flat_map(|p| {
        std::env::split_paths(&p)
            .filter(|d| d.join("initdb").is_file())
            .collect::<Vec<_>>()
    });
    let mut debian: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    debian.sort();
    on_path
        .chain(debian.into_iter().rev().map(|(_, b)| b))
        .find(|b| b.join("postgres").is_file())
}

/// The (uid, gid) postgres runs as: ours when we are not root; else the `postgres` user, or
/// `nobody`.
fn postgres_user() -> Option<(u32, u32)> {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if me != 0 {
        // SAFETY: getegid has no preconditions.
        return Some((me, unsafe { libc::getegid() }));
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let user = |name: &str| {
        passwd.lines().find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            if f.len() > 3 && f[0] == name {
                Some((f[2].parse().ok()?, f[3].parse().ok()?))
            } else {
                None
            }
        })
    };
    user("postgres").or_else(|| user("nobody"))
}

/// A command run as `user` (through setpriv when that is not us).
fn as_user(user: (u32, u32), program: &Path) -> Command {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == user.0 {
        return Command::new(program);
    }
    let mut c = Command::new("setpriv");
    c.arg(format!("--reuid={}", user.0))
        .arg(format!("--regid={}", user.1))
        .arg("--clear-groups")
        .arg(program);
    c
}

/// A running postgres; stopped (fast shutdown) and its files removed when dropped.
struct Postgres {
    child: Child,
    port: u16,
    dir: common::Scratch,
    log: mpsc::Receiver<String>,
}

impl Postgres {
    /// initdb (user `bench`, password [`PASSWORD`], scram-sha-256 for every connection), then
    /// postgres on 127.0.0.1 at a free port, returned once it says it accepts connections.
    fn start(test: &str) -> Option<Postgres> {
        let Some(bin) = postgres_bin() else {
            skip(test, "no initdb/postgres here (apt-get install postgresql)");
            return None;
        };
        let Some(user) = postgres_user() else {
            skip(
                test,
                "running as root and no `postgres` or `nobody` user to run postgres as",
            );
            return None;
        };
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        if user.0 != me && Command::new("setpriv").arg("--version").output().is_err() {
            skip(
                test,
                "running as root and no setpriv (util-linux) to drop privileges",
            );
            return None;
        }
        let dir = scratch(&format!("postgres-{}", test.replace(' ', "-")));
        std::fs::write(dir.join("pw"), format!("{PASSWORD}\n")).expect("password file");
        for p in [&*dir, &dir.join("pw")] {
            chown(p, Some(user.0), Some(user.1)).expect("chown to the postgres user");
        }
        let data = dir.join("data");
        let init = as_user(user, &bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                "bench",
                "--auth=scram-sha-256",
                "-E",
                "UTF8",
                "--no-sync",
            ])
            .arg(format!("--pwfile={}", dir.join("pw").display()))
            .output()
            .expect("initdb runs");
        assert!(
            init.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&init.stderr)
        );
        let port = free_port();
        let mut child = as_user(user, &bin.join("postgres"))
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1"])
            .arg("-c")
            .arg(format!("unix_socket_directories={}", dir.display()))
            .args(["-c", "fsync=off"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("postgres starts");
        // Its log, line by line, drained by a thread for as long as it runs: readiness is the
        // line saying so, read as it comes (no polling), bounded by a deadline.
        let stderr = child.stderr.take().expect("piped");
        let (tx, log) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let pg = Postgres {
            child,
            port,
            dir,
            log,
        };
        let mut seen = Vec::new();
        loop {
            match pg.log.recv_timeout(Duration::from_secs(60)) {
                Ok(line) if line.contains("ready to accept connections") => return Some(pg),
                Ok(line) => seen.push(line),
                Err(e) => panic!("postgres did not become ready ({e}): {}", seen.join("\n")),
            }
        }
    }

    fn target(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The log lines read since the last call.
    fn log(&self) -> String {
        self.log.try_iter().collect::<Vec<_>>().join("\n")
    }

    /// The log lines read since the last call, waiting (at most 30 s) until `n` of them hold
    /// `needle`: postgres logs a refusal before it answers it, but the log is read by a thread.
    fn log_until(&self, needle: &str, n: usize) -> String {
        let mut lines: Vec<String> = Vec::new();
        while lines.iter().filter(|l| l.contains(needle)).count() < n {
            match self.log.recv_timeout(Duration::from_secs(30)) {
                Ok(line) => lines.push(line),
                Err(_) => break,
            }
        }
        lines.extend(self.log.try_iter());
        lines.join("\n")
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // SIGINT: fast shutdown (clients disconnected, no wait for them).
        // SAFETY: kill on the pid of our own child, which has not been reaped yet.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn script() -> String {
    common::repo()
        .join(SCRIPT)
        .to_str()
        .expect("utf-8")
        .to_string()
}

fn step_counts(run: &Value) -> Vec<(String, u64)> {
    run["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| {
            let n = s["latency_ms"]["count"].as_u64().expect("count");
            (s["name"].as_str().expect("name").to_string(), n)
        })
        .collect()
}

#[test]
fn postgres_scram_login_then_queries_bench_and_run() {
    let test = "postgres scram login";
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    let target = pg.target();
    let script = script();
    let password = format!("password={PASSWORD}");

    // bench: one connection logs in (StartupMessage, SASLInitialResponse, SASLResponse), then
    // runs the three queries in turn: 300 exchanges, the 3 of the login included. (One
    // connection: with two, the second's login may still be computing its proof when the first
    // has spent the budget, and the counts would not be exact.)
    let (r, code, err) = common::bench_json(&[
        "--target",
        &target,
        "--script",
        &script,
        "--param",
        &password,
        "--requests",
        "300",
    ]);
    assert_eq!(code, 0, "{err}\n{}", pg.log());
    let run = common::run0(&r);
    assert_eq!(run["errors"]["assertion"], 0, "{}", run["errors"]);
    assert_eq!(run["errors"]["response"], 0, "{}", run["errors"]);
    assert_eq!(run["errors"]["timeouts"], 0);
    assert_eq!(run["exchanges"], 300);
    assert_eq!(run["connections_opened"], 1);
    let counts: Vec<(String, u64)> = step_counts(run);
    let want: Vec<(String, u64)> = [
        ("startup", 1),
        ("sasl-initial", 1),
        ("sasl-final", 1),
        ("select-1", 99),
        ("select-now", 99),
        ("select-table", 99),
    ]
    .iter()
    .map(|(n, c)| (n.to_string(), *c))
    .collect();
    assert_eq!(counts, want);
    // The server saw logins, not refusals.
    let log = pg.log();
    assert!(!log.contains("FATAL"), "{log}");

    // run over the same server, directly and behind the Nagle hop.
    let out_dir = pg.dir.join("run-out");
    let out = common::tcpdoctor(&[
        "run",
        "--target",
        &target,
        "--script",
        &script,
        "--param",
        &password,
        "--scenarios",
        "direct,proxy-nagle",
        "--requests",
        "153",
        "--format",
        "json",
        "--out",
        out_dir.to_str().expect("utf-8"),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}\n{}", pg.log());
    let r: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    common::validate_with("run-report.schema.json", &r);
    for s in r["scenarios"].as_array().expect("scenarios") {
        let f = &s["figures"];
        assert_eq!(f["errors"], 0, "{}: {}", s["name"], s["bench"]);
        assert_eq!(f["timeouts"], 0, "{}", s["name"]);
        assert_eq!(f["exchanges"], 153, "{}", s["name"]);
        // PostgreSQL buffers a query's whole answer and flushes it at ReadyForQuery: one write
        // per response, so nothing waits on a delayed ACK, even behind the Nagle hop.
        assert_eq!(f["stalls"], 0, "{}", s["name"]);
        let kinds: Vec<&str> = s["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .filter_map(|f| f["kind"].as_str())
            .collect();
        assert!(
            !kinds
                .iter()
                .any(|k| *k == "nagle_delayed_ack" || *k == "fragmented_writes"),
            "{}: {kinds:?}",
            s["name"]
        );
    }
    assert_eq!(r["scenarios"].as_array().map(Vec::len), Some(2));
}

#[test]
fn a_wrong_password_stops_with_the_servers_error_after_back_off() {
    let test = "postgres wrong password";
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    let out = common::tcpdoctor(&[
        "bench",
        "--target",
        &pg.target(),
        "--script",
        &script(),
        "--param",
        "password=not-the-password",
        "--requests",
        "100",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("setup failed 5 times in a row"), "{err}");
    // The ErrorResponse's text, quoted from the server's answer.
    assert!(err.contains("step sasl-final"), "{err}");
    assert!(
        err.contains(r#"password authentication failed for user \"bench\""#),
        "{err}"
    );
    // Five logins tried, not thousands: the server refused exactly five.
    let needle = "password authentication failed for user";
    let log = pg.log_until(needle, 5);
    assert_eq!(log.matches(needle).count(), 5, "{log}");
}
