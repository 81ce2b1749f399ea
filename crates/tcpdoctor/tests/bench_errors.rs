//! `tcpdoctor bench` when things go wrong: timeouts, a server that never answers, a target
//! that refuses, bad flags and scripts. Real binary, real loopback servers.

mod common;
mod servers;

use common::{bench_json, run0, tcpdoctor};

#[test]
fn unanswered_requests_time_out_and_the_connection_is_reopened() {
    let addr = servers::echo_dropping(5).to_string();
    let (r, code, _) = bench_json(&[
        "--target",
        &addr,
        "--preset",
        "echo-line",
        "--timeout",
        "200ms",
        "--requests",
        "20",
    ]);
    assert_eq!(code, 0);
    let run = run0(&r);
    let timeouts = run["errors"]["timeouts"].as_u64().unwrap_or(0);
    assert!(timeouts >= 1, "{}", run["errors"]);
    assert_eq!(run["exchanges"].as_u64().unwrap_or(0) + timeouts, 20);
    // Each timeout closes its connection; a new one follows unless the budget is spent.
    let opened = run["connections_opened"].as_u64().unwrap_or(0);
    assert!(
        opened >= 2 && opened <= timeouts + 1,
        "{opened} connections, {timeouts} timeouts"
    );
}

#[test]
fn a_server_that_never_answers_is_reported_hung_not_waited_on() {
    let addr = servers::silent().to_string();
    let (r, code, _) = bench_json(&[
        "--target",
        &addr,
        "--preset",
        "echo-line",
        "--requests",
        "10",
        "--timeout",
        "30s",
        "--hang-after",
        "1s",
    ]);
    assert_eq!(code, 1, "a hung run fails the command");
    let run = run0(&r);
    assert_eq!(run["outcome"], "hung");
    assert!(
        run["note"]
            .as_str()
            .unwrap_or("")
            .contains("no exchange completed"),
        "{run}"
    );
}

#[test]
fn an_unreachable_target_is_a_usage_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let target = format!("127.0.0.1:{port}");
    let out = tcpdoctor(&[
        "bench",
        "--target",
        &target,
        "--preset",
        "resp",
        "--requests",
        "5",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot connect to") && stderr.contains("connection refused"),
        "{stderr}"
    );
}

#[test]
fn bad_flags_and_scripts_are_exit_2_with_the_flag_named() {
    let dir = std::env::temp_dir().join(format!("tcpdoctor-bench-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let bad_script = dir.join("bad.toml");
    std::fs::write(
        &bad_script,
        "[[steps]]\nsend = \"x\"\nread = { nonsense = 1 }\n",
    )
    .expect("write script");
    let bad = bad_script.to_str().expect("utf-8");
    let missing = dir.join("missing.toml");
    let missing = missing.to_str().expect("utf-8");
    for (args, needle) in [
        (
            vec!["--preset", "resp", "--split-writes", "0"],
            "--split-writes",
        ),
        (vec!["--preset", "resp", "--rate", "fast"], "--rate"),
        (
            vec!["--preset", "resp", "--rate", "9", "--spin", "2ms"],
            "--spin 2ms",
        ),
        (
            vec!["--preset", "resp", "--rate", "9", "--spin", "soon"],
            "--spin",
        ),
        (vec!["--preset", "resp", "--spin", "10us"], "--rate"),
        (vec!["--preset", "resp", "--nagle", "maybe"], "--nagle"),
        (
            vec!["--preset", "resp", "--duration", "forever"],
            "--duration",
        ),
        (vec!["--preset", "resp", "--requests", "0"], "--requests"),
        (vec!["--preset", "nosuch"], "nosuch"),
        (vec!["--preset", "resp", "--param", "bogus=1"], "bogus"),
        (vec!["--script", missing], "missing.toml"),
        (vec!["--script", bad], "bad.toml"),
        (
            vec!["--preset", "resp", "--requests", "5", "--duration", "1s"],
            "--duration",
        ),
    ] {
        let mut all = vec!["bench", "--target", "127.0.0.1:1"];
        all.extend_from_slice(&args);
        let out = tcpdoctor(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let out = tcpdoctor(&["bench", "--target", "127.0.0.1:1", "--script", bad]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("line "),
        "a script error names its line: {stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ctrl_c_ends_the_run_and_prints_what_was_measured() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    let seen = Arc::new(AtomicU64::new(0));
    let addr = servers::batch_echo(Duration::ZERO, seen.clone()).to_string();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args([
            "bench",
            "--format",
            "json",
            "--target",
            &addr,
            "--preset",
            "echo-line",
        ])
        .args(["--rate", "200", "--duration", "60s", "--repeat", "3"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start tcpdoctor");
    let start = Instant::now();
    while seen.load(Ordering::Relaxed) < 20 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no traffic reached the server"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: kill(2) on the pid of a child we spawned and have not waited for.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let out = child.wait_with_output().expect("wait for tcpdoctor");
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "Ctrl-C ended the run"
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    common::validate_with("bench-report.schema.json", &report);
    assert_eq!(out.status.code(), Some(1), "not every run completed");
    let runs = report["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1, "no further --repeat run after Ctrl-C");
    assert_eq!(runs[0]["outcome"], "interrupted");
    assert!(
        runs[0]["exchanges"].as_u64().unwrap_or(0) >= 10,
        "{}",
        runs[0]
    );
}

/// A line server with a login: greets `200 hello`, answers `LOGIN ok` with `200 welcome` and
/// any other login with `500 bad password`, then echoes lines. The first `refuse_first`
/// connections have their login refused whatever they send. Returns the address and the
/// count of logins it has seen.
fn login_server(
    refuse_first: u64,
) -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::atomic::AtomicU64>,
) {
    use std::io::{BufRead, BufReader, Write};
    use std::sync::atomic::{AtomicU64, Ordering};
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    let logins = std::sync::Arc::new(AtomicU64::new(0));
    let seen = logins.clone();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut out = s.try_clone().expect("clone");
                let mut r = BufReader::new(s);
                let _ = out.write_all(b"200 hello\r\n");
                let mut line = String::new();
                let mut authed = false;
                while r.read_line(&mut line).unwrap_or(0) > 0 {
                    let reply = if line.starts_with("LOGIN") {
                        let n = seen.fetch_add(1, Ordering::SeqCst);
                        authed = n >= refuse_first && line.trim_end() == "LOGIN ok";
                        if authed {
                            "200 welcome\r\n".to_string()
                        } else {
                            "500 bad password\r\n".to_string()
                        }
                    } else if authed {
                        line.clone()
                    } else {
                        "500 not authenticated\r\n".to_string()
                    };
                    if out.write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                    line.clear();
                }
            });
        }
    });
    (addr, logins)
}

fn login_script(dir: &std::path::Path, password: &str) -> String {
    let path = dir.join(format!("login-{password}.toml"));
    std::fs::write(
        &path,
        format!(
            "name = \"login\"\n\
             [greeting]\nread = {{ until = \"\\r\\n\" }}\n\
             [[setup]]\nsend = \"LOGIN {password}\\r\\n\"\nread = {{ until = \"\\r\\n\" }}\nexpect = '^200 '\n\
             [[steps]]\nsend = \"PING\\r\\n\"\nread = {{ until = \"\\r\\n\" }}\n"
        ),
    )
    .expect("write script");
    path.display().to_string()
}

#[test]
fn a_login_the_server_keeps_refusing_stops_the_run_with_its_answer() {
    let dir = std::env::temp_dir().join(format!("tcpdoctor-login-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let (addr, logins) = login_server(0);
    let script = login_script(&dir, "wrong");
    let out = tcpdoctor(&[
        "bench",
        "--target",
        &addr.to_string(),
        "--script",
        &script,
        "--connections",
        "4",
        "--requests",
        "5000",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("setup failed 5 times in a row") && err.contains("500 bad password"),
        "{err}"
    );
    // A handful of attempts (the connections already logging in when the fifth failed may
    // still land), not one per request of the budget.
    let n = logins.load(std::sync::atomic::Ordering::SeqCst);
    assert!((5..=8).contains(&n), "{n} logins");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_login_refused_a_few_times_is_retried_and_the_run_goes_on() {
    let dir = std::env::temp_dir().join(format!("tcpdoctor-relogin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let (addr, _) = login_server(2);
    let script = login_script(&dir, "ok");
    let (r, code, err) = bench_json(&[
        "--target",
        &addr.to_string(),
        "--script",
        &script,
        "--requests",
        "50",
    ]);
    assert_eq!(code, 0, "{err}");
    let run = run0(&r);
    // Two refused logins (errors, each a reconnect after a back-off), then the run goes on:
    // every request of the budget is an exchange or one of those errors, as timeouts are.
    assert_eq!(run["errors"]["assertion"], 2, "{}", run["errors"]);
    assert_eq!(run["exchanges"], 48, "{run}");
    assert_eq!(run["connections_opened"], 3, "{run}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_server_that_hangs_up_on_the_login_stops_the_run_too() {
    use std::io::{BufRead, BufReader, Write};
    use std::sync::atomic::{AtomicU64, Ordering};
    let dir = std::env::temp_dir().join(format!("tcpdoctor-hangup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    // Greets, reads the login line, and closes without a word: no assertion can fail.
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    let logins = std::sync::Arc::new(AtomicU64::new(0));
    let seen = logins.clone();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let mut out = s.try_clone().expect("clone");
            let _ = out.write_all(b"200 hello\r\n");
            let mut line = String::new();
            let _ = BufReader::new(s).read_line(&mut line);
            seen.fetch_add(1, Ordering::SeqCst);
        }
    });
    let script = login_script(&dir, "wrong");
    let out = tcpdoctor(&[
        "bench",
        "--target",
        &addr.to_string(),
        "--script",
        &script,
        "--requests",
        "5000",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("setup failed 5 times in a row")
            && err.contains("LOGIN")
            && err.contains("before the setup was done"),
        "{err}"
    );
    let n = logins.load(Ordering::SeqCst);
    assert!((5..=6).contains(&n), "{n} logins");
    let _ = std::fs::remove_dir_all(&dir);
}
