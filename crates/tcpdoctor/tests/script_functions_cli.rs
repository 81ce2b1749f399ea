//! Computed values in scripts, through the real binary: a challenge/response login (Zino 2's:
//! `USER <name> <sha1_hex("<challenge> <secret>")>`) against a real loopback server that
//! checks it, the secret given by `--param` or the environment; and scripts with a bad
//! function, a wrong argument count, an unknown variable: exit 2 with the line and column.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use sha1::{Digest, Sha1};

use common::{bench_json, repo, run0, step, tcpdoctor};

/// A Zino-2-like server: greets `200 <challenge> Hello, there` (a new challenge per
/// connection), answers `USER <name> <sha1_hex("<challenge> <secret>")>` with `200 ok` when the
/// digest is right and `500 Not authenticated` otherwise; any later line gets `200 ok` after a
/// good login and `500 Not authenticated` before. Counts the bad logins.
fn challenge_server(secret: &'static str, bad_logins: Arc<AtomicU64>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let addr = l.local_addr().expect("local addr");
    let next = Arc::new(AtomicU64::new(0x5eed));
    thread::spawn(move || {
        for s in l.incoming().flatten() {
            let n = next.fetch_add(1, Ordering::Relaxed);
            let bad_logins = bad_logins.clone();
            thread::spawn(move || {
                let _ = s.set_nodelay(true);
                let Ok(mut out) = s.try_clone() else { return };
                let challenge = format!("{:x}", Sha1::digest(n.to_be_bytes()));
                if write!(out, "200 {challenge} Hello, there\r\n").is_err() {
                    return;
                }
                let want = format!("{:x}", Sha1::digest(format!("{challenge} {secret}")));
                let mut authenticated = false;
                for line in BufReader::new(s).lines() {
                    let Ok(line) = line else { return };
                    let answer = match line.strip_prefix("USER ") {
                        Some(rest) => {
                            authenticated = rest.split_once(' ').map(|(_, d)| d) == Some(&want);
                            if !authenticated {
                                bad_logins.fetch_add(1, Ordering::Relaxed);
                            }
                            if authenticated {
                                "200 ok\r\n"
                            } else {
                                "500 Not authenticated\r\n"
                            }
                        }
                        None if authenticated => "200 ok\r\n",
                        None => "500 Not authenticated\r\n",
                    };
                    if out.write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

const LOGIN: &str = r#"name = "challenge-login"

[vars]
user = "bench"
secret = "wrong"

[greeting]
read = { until = "\r\n" }
capture = { challenge = '^200 (\S+) ' }

[[setup]]
send = 'USER {user} {hex(sha1(concat(challenge, " ", secret)))}\r\n'
read = { until = "\r\n" }
expect = '^200 '

[[steps]]
send = "STATUS {i}\r\n"
read = { until = "\r\n" }
expect = '^200 '
"#;

fn scratch(name: &str, text: &str) -> common::ScratchFile {
    common::scratch_file("fn", name, text)
}

#[test]
fn a_computed_login_passes_a_real_challenge_with_the_secret_from_param() {
    let bad = Arc::new(AtomicU64::new(0));
    let addr = challenge_server("bench-secret", bad.clone()).to_string();
    let script = scratch("login.toml", LOGIN);
    let script = script.to_str().expect("utf-8");
    let (r, code, stderr) = bench_json(&[
        "--target",
        &addr,
        "--script",
        script,
        "--param",
        "secret=bench-secret",
        "--connections",
        "2",
        "--requests",
        "40",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let run = run0(&r);
    assert_eq!(run["exchanges"].as_u64(), Some(40), "{run}");
    assert_eq!(run["errors"]["assertion"].as_u64(), Some(0), "{run}");
    // A login per connection that got that far (the second may open, or log in, after the
    // 40 exchanges are done); none was refused (`bad`, below).
    let logins = step(run, "USER")["latency_ms"]["count"]
        .as_u64()
        .unwrap_or(0);
    assert!(logins >= 1, "{run}");
    assert_eq!(bad.load(Ordering::Relaxed), 0, "every login was right");

    // The script's own (wrong) secret fails the login: the server says so, and the function
    // was what made the difference.
    let (r, _, _) = bench_json(&["--target", &addr, "--script", script, "--requests", "4"]);
    let run = run0(&r);
    assert!(
        run["errors"]["assertion"].as_u64().unwrap_or(0) >= 1,
        "{run}"
    );
    assert!(
        run["errors"]["examples"]
            .to_string()
            .contains("500 Not authenticated"),
        "{run}"
    );
    assert!(bad.load(Ordering::Relaxed) >= 1);
}

#[test]
fn the_secret_can_come_from_the_environment() {
    let bad = Arc::new(AtomicU64::new(0));
    let addr = challenge_server("from-env", bad.clone()).to_string();
    // `[vars]` values are not templates: the environment is read in the send template.
    let script = scratch(
        "login-env.toml",
        &LOGIN.replace(
            "concat(challenge, \" \", secret)",
            "concat(challenge, \" \", env:TCPDOCTOR_TEST_SECRET)",
        ),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(["bench", "--format", "json", "--target", &addr, "--script"])
        .arg(&script)
        .args(["--requests", "10", "--allow-env", "TCPDOCTOR_TEST_SECRET"])
        .env("TCPDOCTOR_TEST_SECRET", "from-env")
        .current_dir(repo())
        .output()
        .expect("run tcpdoctor");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let run = run0(&r);
    assert_eq!(run["exchanges"].as_u64(), Some(10), "{run}");
    assert_eq!(run["errors"]["assertion"].as_u64(), Some(0), "{run}");
    assert_eq!(bad.load(Ordering::Relaxed), 0);
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("from-env"),
        "the secret is not in the report"
    );

    // Unset: exit 2 before any connection, naming the variable, line and column.
    let out = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(["bench", "--target", &addr, "--script"])
        .arg(&script)
        .args(["--allow-env", "TCPDOCTOR_TEST_SECRET"])
        .env_remove("TCPDOCTOR_TEST_SECRET")
        .output()
        .expect("run tcpdoctor");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("line 12, column 58: in `send`: environment variable `TCPDOCTOR_TEST_SECRET` is not set"),
        "{stderr}"
    );
}

#[test]
fn bad_functions_and_variables_are_exit_2_with_line_and_column() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "unknown-function.toml",
            "sha1(concat(",
            "line 12, column 26: in `send`: unknown function `sha3`",
        ),
        (
            "argument-count.toml",
            "sha1(concat(challenge, \" \", secret))",
            "line 12, column 26: in `send`: `hmac_sha256` takes 2 arguments (hmac_sha256(key, message)), not 1",
        ),
        (
            "unknown-variable.toml",
            "secret)",
            "line 12, column 54: undefined variable `secrte` (define it in [vars] or capture it in an earlier step)",
        ),
    ];
    for (name, find, want) in cases {
        let replacement = match *name {
            "unknown-function.toml" => "sha3(concat(",
            "argument-count.toml" => "hmac_sha256(concat(challenge, \" \", secret))",
            _ => "secrte)",
        };
        let text = LOGIN.replacen(find, replacement, 1);
        assert_ne!(text, LOGIN, "{name}");
        let file = scratch(name, &text);
        let out = tcpdoctor(&[
            "bench",
            "--target",
            "127.0.0.1:1",
            "--script",
            file.to_str().expect("utf-8"),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains(want), "{name}: want `{want}` in: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }

    // A `--param` that names no variable of the script is refused before any I/O.
    let file = scratch("login-param.toml", LOGIN);
    let out = tcpdoctor(&[
        "bench",
        "--target",
        "127.0.0.1:1",
        "--script",
        file.to_str().expect("utf-8"),
        "--param",
        "secert=x",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "--param secert: the script has no variable `secert` (its variables: user, secret)"
        ),
        "{stderr}"
    );
}
