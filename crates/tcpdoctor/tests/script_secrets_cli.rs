//! Secrets, `--dry-run` and `--allow-exec`, through the real binary against real loopback
//! servers:
//! - a secret (a `secret = true` var set by `--param`, an `{env:…}` value) that the server
//!   echoes back in its errors appears nowhere in `bench` or `run` output (text, JSON, the
//!   `--save` file, the HTML), and a refused login stops the run with the answer, masked;
//! - `--dry-run` prints the first conversation's requests (Zino's example, the presets)
//!   without connecting;
//! - `exec`: its output reaches the server (checked there), and a timeout, a non-zero exit,
//!   no `--allow-exec`, an `exec` in `[[steps]]` are each exit 2 with the line.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use common::{repo, tcpdoctor, ScratchFile};

const SECRET: &str = "S3cret-Param-42";
const ENV_SECRET: &str = "Env-Token-9f8e7d";

/// A line server: answers each line with `answer(line)`; keeps every line it received.
fn line_server(
    answer: fn(&str) -> String,
    greeting: Option<&'static str>,
) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let addr = l.local_addr().expect("local addr");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let keep = seen.clone();
    thread::spawn(move || {
        for s in l.incoming().flatten() {
            let keep = keep.clone();
            thread::spawn(move || {
                let _ = s.set_nodelay(true);
                let Ok(mut out) = s.try_clone() else { return };
                if let Some(g) = greeting {
                    if out.write_all(g.as_bytes()).is_err() {
                        return;
                    }
                }
                for line in BufReader::new(s).lines() {
                    let Ok(line) = line else { return };
                    keep.lock().expect("lock").push(line.clone());
                    if out.write_all(answer(&line).as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, seen)
}

/// Echoes every request back inside an error: the worst a server can do to a secret.
fn echo_error(line: &str) -> String {
    format!("500 unknown command: {line}\r\n")
}

fn scratch(name: &str, text: &str) -> ScratchFile {
    common::scratch_file("secrets", name, text)
}

fn text(out: &std::process::Output) -> (String, String, i32) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

/// `tcpdoctor ARGS --allow-env TCPD_TEST_TOKEN` with that variable set.
fn with_env(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(args)
        .args(["--allow-env", "TCPD_TEST_TOKEN"])
        .env("TCPD_TEST_TOKEN", ENV_SECRET)
        .output()
        .expect("run tcpdoctor")
}

fn assert_no_secret(what: &str, text: &str) {
    for s in [SECRET, ENV_SECRET] {
        assert!(!text.contains(s), "{what} shows the secret {s}:\n{text}");
    }
}

/// Each request carries both secrets; the server echoes it in its error.
const ECHOED: &str = r#"name = "echoed-secret"

[vars]
pw = { value = "written-in-the-file", secret = true }

[[steps]]
send = "GET {i} key={pw} token={env:TCPD_TEST_TOKEN}\r\n"
read = { until = "\r\n" }
expect = '^200 '
"#;

#[test]
fn a_secret_the_server_echoes_appears_in_no_bench_output() {
    let (addr, seen) = line_server(echo_error, None);
    let addr = addr.to_string();
    let script = scratch("echoed.toml", ECHOED);
    let script = script.to_str().expect("utf-8");
    for format in ["text", "json"] {
        let out = with_env(&[
            "bench",
            "--target",
            &addr,
            "--script",
            script,
            "--param",
            &format!("pw={SECRET}"),
            "--requests",
            "20",
            "--format",
            format,
        ]);
        let (stdout, stderr, code) = text(&out);
        assert!(code == 0 || code == 1, "exit {code}: {stderr}");
        assert_no_secret(&format!("bench --format {format} stdout"), &stdout);
        assert_no_secret(&format!("bench --format {format} stderr"), &stderr);
        // The error is still reported, with the secret masked where it stood.
        assert!(
            stdout.contains("key=*** token=***"),
            "--format {format}: the masked example is missing:\n{stdout}"
        );
    }
    // The secret did go on the wire: the server saw it (masking is tcpdoctor's own text only).
    assert!(seen
        .lock()
        .expect("lock")
        .iter()
        .any(|l| l.contains(SECRET) && l.contains(ENV_SECRET)));
}

#[test]
fn a_secret_the_server_echoes_appears_in_no_run_report() {
    let (addr, _) = line_server(echo_error, None);
    let addr = addr.to_string();
    let script = scratch("echoed-run.toml", ECHOED);
    let script = script.to_str().expect("utf-8");
    let dir = std::env::temp_dir().join(format!("tcpdoctor-secrets-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let save = dir.join("report.json");
    let html = dir.join("report.html");
    let out_dir = dir.join("out");
    let out = with_env(&[
        "run",
        "--target",
        &addr,
        "--script",
        script,
        "--param",
        &format!("pw={SECRET}"),
        "--scenarios",
        "direct,proxy",
        "--requests",
        "20",
        "--format",
        "json",
        "--save",
        save.to_str().expect("utf-8"),
        "--html",
        html.to_str().expect("utf-8"),
        "--out",
        out_dir.to_str().expect("utf-8"),
    ]);
    let (stdout, stderr, code) = text(&out);
    assert!(code == 0 || code == 1, "exit {code}: {stderr}");
    assert_no_secret("run stdout", &stdout);
    assert_no_secret("run stderr", &stderr);
    let saved = std::fs::read_to_string(&save).expect("--save written");
    assert_no_secret("run --save", &saved);
    assert!(saved.contains("key=***"), "no masked example in {saved}");
    let page = std::fs::read_to_string(&html).expect("--html written");
    assert_no_secret("run --html", &page);
    // tcpdoctor's own text files in --out (not the captures: packets hold the wire bytes).
    for entry in std::fs::read_dir(&out_dir).into_iter().flatten().flatten() {
        let p = entry.path();
        let is_capture = p
            .extension()
            .is_some_and(|e| e == "pcap" || e == "pcapng" || e == "log");
        if p.is_file() && !is_capture {
            if let Ok(t) = std::fs::read_to_string(&p) {
                assert_no_secret(&p.display().to_string(), &t);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every login is refused with the request quoted back.
fn refuse_login(line: &str) -> String {
    format!("500 Not authenticated: {line}\r\n")
}

#[test]
fn a_refused_login_stops_with_the_answer_masked() {
    let (addr, _) = line_server(refuse_login, None);
    let addr = addr.to_string();
    let script = scratch(
        "login.toml",
        r#"[vars]
pw = { value = "x", secret = true }
[[setup]]
send = "LOGIN bench {pw}\r\n"
read = { until = "\r\n" }
expect = '^200 '
[[steps]]
send = "NOOP\r\n"
read = { until = "\r\n" }
"#,
    );
    let out = with_env(&[
        "bench",
        "--target",
        &addr,
        "--script",
        script.to_str().expect("utf-8"),
        "--param",
        &format!("pw={SECRET}"),
        "--requests",
        "20",
    ]);
    let (stdout, stderr, code) = text(&out);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(
        stderr.contains("Not authenticated: LOGIN bench ***"),
        "the server's answer, masked: {stderr}"
    );
    assert_no_secret("stderr", &stderr);
    assert_no_secret("stdout", &stdout);
}

#[test]
fn dry_run_shows_zino_requests_with_the_challenge_named() {
    let zino = repo().join("examples/zino-legacy.toml");
    // Port 9 on loopback: nothing listens; a dry run must not try.
    let out = tcpdoctor(&[
        "bench",
        "--target",
        "127.0.0.1:9",
        "--script",
        zino.to_str().expect("utf-8"),
        "--dry-run",
        "--param",
        &format!("secret={SECRET}"),
    ]);
    let (stdout, stderr, code) = text(&out);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(r#""USER bench {hex(sha1(concat(challenge, \" \", secret)))}\r\n""#),
        "{stdout}"
    );
    assert!(
        stdout.contains("challenge = <from the greeting>"),
        "{stdout}"
    );
    assert!(stdout.contains(r#""CASEIDS\r\n""#), "{stdout}");
    assert!(stdout.contains(r#""GETATTRS {id}\r\n""#), "{stdout}");
    assert!(stdout.contains("id = <each element of `ids`>"), "{stdout}");
    assert_no_secret("dry run", &stdout);

    // `run --dry-run` starts no server either (the command would fail if it ran).
    let out = tcpdoctor(&[
        "run",
        "--server",
        "exit 3",
        "--target",
        "127.0.0.1:9",
        "--script",
        zino.to_str().expect("utf-8"),
        "--dry-run",
    ]);
    let (stdout, stderr, code) = text(&out);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("dry run of `zino-legacy`"), "{stdout}");
}

#[test]
fn dry_run_of_presets_is_the_exact_request_and_secrets_are_masked() {
    let cases: &[(&[&str], &str)] = &[
        (&["--preset", "resp"], r#""*1\r\n$4\r\nPING\r\n""#),
        (
            &["--preset", "http1", "--param", "path=/health"],
            r#""GET /health HTTP/1.1\r\n"#,
        ),
    ];
    for (flags, want) in cases {
        let mut args = vec!["bench", "--target", "127.0.0.1:9", "--dry-run"];
        args.extend_from_slice(flags);
        let (stdout, stderr, code) = text(&tcpdoctor(&args));
        assert_eq!(code, 0, "{flags:?}: {stderr}");
        assert!(stdout.contains(want), "{flags:?}: {stdout}");
        assert!(!stdout.contains("not exact"), "{flags:?}: {stdout}");
    }
    // A dry run needs no target (bench and run); without --dry-run the target is required.
    for cmd in ["bench", "run"] {
        let (stdout, stderr, code) = text(&tcpdoctor(&[cmd, "--dry-run", "--preset", "resp"]));
        assert_eq!(code, 0, "{cmd}: {stderr}");
        assert!(
            stdout.contains(r#""*1\r\n$4\r\nPING\r\n""#),
            "{cmd}: {stdout}"
        );
        let (_, stderr, code) = text(&tcpdoctor(&[cmd, "--preset", "resp"]));
        assert_eq!(code, 2, "{cmd}: {stderr}");
        assert!(stderr.contains("--target"), "{cmd}: {stderr}");
    }
    let script = scratch(
        "dry.toml",
        r#"[vars]
pw = { value = "x", secret = true }
[[setup]]
send = "AUTH {pw} {env:TCPD_TEST_TOKEN} {hex(pw)}\r\n"
read = { until = "\r\n" }
"#,
    );
    let out = with_env(&[
        "bench",
        "--target",
        "127.0.0.1:9",
        "--script",
        script.to_str().expect("utf-8"),
        "--param",
        &format!("pw={SECRET}"),
        "--dry-run",
    ]);
    let (stdout, stderr, code) = text(&out);
    assert_eq!(code, 0, "{stderr}");
    let hex: String = SECRET.bytes().map(|b| format!("{b:02x}")).collect();
    // The secret masked; what a function made of it is what would be sent.
    assert!(
        stdout.contains(&format!("\"AUTH *** *** {hex}\\r\\n\"")),
        "{stdout}"
    );
    assert_no_secret("dry run", &stdout);
}

static NEXT: AtomicUsize = AtomicUsize::new(0);

fn exec_script(command: &str, extra: &str, in_steps: bool) -> ScratchFile {
    let exec = format!("exec = {{ name = \"token\", command = {command}{extra} }}");
    let body = if in_steps {
        format!("[[steps]]\n{exec}\n")
    } else {
        format!("[[setup]]\n{exec}\n\n[[steps]]\nsend = \"GET {{token}} {{i}}\\r\\n\"\nread = {{ until = \"\\r\\n\" }}\nexpect = '^200 '\n")
    };
    scratch(
        &format!("exec-{}.toml", NEXT.fetch_add(1, Ordering::Relaxed)),
        &format!("[vars]\nuser = \"bench\"\n\n{body}"),
    )
}

fn ok_line(_: &str) -> String {
    "200 ok\r\n".into()
}

#[test]
fn exec_output_is_used_in_requests_and_never_shown() {
    let (addr, seen) = line_server(ok_line, None);
    let addr = addr.to_string();
    let script = exec_script(
        r#"["sh", "-c", "printf '  tok-%s-77\n' \"$0\"", "{user}"]"#,
        "",
        false,
    );
    let out = tcpdoctor(&[
        "bench",
        "--target",
        &addr,
        "--script",
        script.to_str().expect("utf-8"),
        "--allow-exec",
        "--requests",
        "10",
    ]);
    let (stdout, stderr, code) = text(&out);
    assert_eq!(code, 0, "{stderr}");
    let lines = seen.lock().expect("lock").clone();
    assert_eq!(lines.len(), 10, "{lines:?}");
    // The output, trimmed, with the argument rendered from [vars].
    assert_eq!(lines[0], "GET tok-bench-77 0");
    assert!(!stdout.contains("tok-bench-77") && !stderr.contains("tok-bench-77"));
    // A server that echoes it in an error: the output is a secret, masked in the report.
    let (addr, _) = line_server(echo_error, None);
    let out = tcpdoctor(&[
        "bench",
        "--target",
        &addr.to_string(),
        "--script",
        script.to_str().expect("utf-8"),
        "--allow-exec",
        "--requests",
        "10",
    ]);
    let (stdout, stderr, _) = text(&out);
    assert!(stdout.contains("GET *** 0"), "{stdout}");
    assert!(
        !stdout.contains("tok-bench-77") && !stderr.contains("tok-bench-77"),
        "{stdout}"
    );
}

#[test]
fn exec_failures_are_exit_2_naming_the_step() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            r#"["sh", "-c", "echo no such user >&2; exit 3"]"#,
            "",
            &[
                "line 5",
                "exec `token`",
                "exited with status 3",
                "no such user",
            ],
        ),
        (
            r#"["sh", "-c", "sleep 30"]"#,
            r#", timeout = "200ms""#,
            &["line 5", "timeout of 200ms", "killed"],
        ),
        (
            r#"["/nonexistent/get-token"]"#,
            "",
            &["line 5", "/nonexistent/get-token", "cannot start"],
        ),
    ];
    let (addr, seen) = line_server(ok_line, None);
    let addr = addr.to_string();
    for (command, extra, needles) in cases {
        let script = exec_script(command, extra, false);
        let start = std::time::Instant::now();
        let out = tcpdoctor(&[
            "bench",
            "--target",
            &addr,
            "--script",
            script.to_str().expect("utf-8"),
            "--allow-exec",
            "--requests",
            "5",
        ]);
        let (_, stderr, code) = text(&out);
        assert_eq!(code, 2, "{command}: {stderr}");
        for n in *needles {
            assert!(stderr.contains(n), "{command}: no `{n}` in {stderr}");
        }
        // The 30s sleep was killed, not waited for (a generous bound: not a timing figure).
        assert!(start.elapsed().as_secs() < 25, "{command}");
    }
    assert!(seen.lock().expect("lock").is_empty(), "nothing is sent");
}

#[test]
fn exec_needs_allow_exec_and_is_refused_in_steps() {
    let script = exec_script(r#"["true"]"#, "", false);
    let (_, stderr, code) = text(&tcpdoctor(&[
        "bench",
        "--target",
        "127.0.0.1:9",
        "--script",
        script.to_str().expect("utf-8"),
        "--requests",
        "5",
    ]));
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--allow-exec") && stderr.contains("line 5"),
        "{stderr}"
    );
    // `run` refuses it too, before starting anything.
    let (_, stderr, code) = text(&tcpdoctor(&[
        "run",
        "--target",
        "127.0.0.1:9",
        "--script",
        script.to_str().expect("utf-8"),
        "--scenarios",
        "direct",
    ]));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--allow-exec"), "{stderr}");

    let script = exec_script(r#"["true"]"#, "", true);
    let (_, stderr, code) = text(&tcpdoctor(&[
        "bench",
        "--target",
        "127.0.0.1:9",
        "--script",
        script.to_str().expect("utf-8"),
        "--allow-exec",
        "--requests",
        "5",
    ]));
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("line 5, column 1") && stderr.contains("not allowed in [[steps]]"),
        "{stderr}"
    );
}
