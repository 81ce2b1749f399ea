//! The WAN path needs no privilege and leaves nothing behind: as uids no account uses (no need
//! to create them), `tcpdoctor sandbox --delay` and `run --scenarios wan:` work, and after
//! success, a failing client, a server that ends before it listens, and Ctrl-C, no process of
//! that uid, no TUN device of the path and no named namespace is left.
//!
//! Each test skips (saying why) where this machine cannot build the path for an unprivileged
//! user, unless `TCPDOCTOR_REQUIRE_WAN=1`, where it fails.

mod common;

use std::path::PathBuf;

use common::live::{self, OpenDir};
use common::wan::{analyze, as_uid, exchange, kinds, tcpdoctor_as};
use serde_json::Value;

/// Processes of `uid` still running. Zombies are not counted: a process that has exited holds
/// no namespace, device or socket any more, only its pid until its parent reaps it (an
/// orphan's new parent is init, which on some machines reaps late).
fn processes_of(uid: u32) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let field = |name: &str| {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .map(str::to_string)
        };
        let mine = field("Uid:").and_then(|u| u.parse::<u32>().ok()) == Some(uid);
        if mine && field("State:").as_deref() != Some("Z") {
            let cmd = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            found.push(format!(
                "{}: {}",
                entry.file_name().to_string_lossy(),
                String::from_utf8_lossy(&cmd).replace('\0', " ")
            ));
        }
    }
    found
}

/// Network devices of this (the root) namespace.
fn devices() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/sys/class/net")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Named network namespaces (`ip netns`).
fn named_netns() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Nothing `uid` started is left: no process (so no namespace it created: a namespace lives
/// only while a process or a mount holds it, and the user's mounts lived in its own mount
/// namespace), no TUN device of the path in this namespace, no named namespace of tcpdoctor.
fn assert_nothing_left(uid: u32, dir: &OpenDir, when: &str) {
    if live::is_root() {
        assert_eq!(
            processes_of(uid),
            Vec::<String>::new(),
            "{when}: processes of uid {uid}"
        );
    }
    let marker = dir.0.display().to_string();
    let ours: Vec<String> = live::processes_with(&marker)
        .into_iter()
        .filter(|p| !p.contains("setpriv"))
        .collect();
    assert_eq!(
        ours,
        Vec::<String>::new(),
        "{when}: processes started from {marker}"
    );
    let tuns: Vec<String> = devices()
        .into_iter()
        .filter(|d| d.starts_with("tdnear") || d.starts_with("tdfar"))
        .collect();
    assert_eq!(tuns, Vec::<String>::new(), "{when}: the path's TUN devices");
    let named: Vec<String> = named_netns()
        .into_iter()
        .filter(|n| n.contains("tcpdoctor"))
        .collect();
    assert_eq!(named, Vec::<String>::new(), "{when}: named namespaces");
}

/// A uid no account uses (no need to create one): the path needs no privilege and no
/// passwd entry. Each test takes its own, so "nothing of this uid is left" is exact.
const FRESH_UID: u32 = 54321;

/// As a fresh uid: the per-line Nagle server over 15 ms each way is named at the client's end
/// with two round trips and the delayed ACK per exchange (a floor); and after it, after a
/// client that fails and after a server that ends before it listens, nothing is left.
#[test]
fn a_fresh_uid_gets_the_path_and_leaves_nothing_behind() {
    let uid = FRESH_UID;
    let dir = OpenDir::new("wan-uid");
    let ex = exchange(&dir);
    let test = "sandbox as a fresh uid";
    let run = |client: &str, server: &str, extra: &[&str]| {
        let mut args: Vec<String> = ["sandbox", "--delay", "15ms"]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect();
        args.extend([
            "--server".into(),
            server.into(),
            "--server-port".into(),
            "7070".into(),
            "--".into(),
            client.into(),
        ]);
        tcpdoctor_as(uid, &dir, test, &args)
    };
    let serve = format!("{ex} serve 127.0.0.1:7070");
    let Some(ok) = run(
        &format!("{ex} client 198.18.0.1:7070 10"),
        &serve,
        &["-w", "n.pcapng"],
    ) else {
        return;
    };
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let r = analyze(&dir.path("n.pcapng"));
    assert!(
        kinds(&r).iter().any(|k| k.starts_with("nagle_delayed_ack")),
        "{:?}",
        kinds(&r)
    );
    let p50 = r["captures"][0]["servers"][0]["exchange_latency_ms"]["p50"]
        .as_f64()
        .expect("exchange latency");
    assert!(p50 >= 90.0, "median exchange {p50} ms: 2 RTT + ato");
    assert_nothing_left(uid, &dir, "after success");

    // The client fails: its status is the sandbox's, and the server is stopped.
    let failed = run("exit 3", &serve, &[]).expect("available a moment ago");
    assert_eq!(failed.status.code(), Some(3));
    assert_nothing_left(uid, &dir, "after the client failed");

    // The server ends before it listens: exit 2, naming the port, nothing left.
    let never = run(&format!("{ex} client 198.18.0.1:7070 1"), "exit 5", &[])
        .expect("available a moment ago");
    let err = String::from_utf8_lossy(&never.stderr);
    assert_eq!(never.status.code(), Some(2), "{err}");
    assert!(err.contains("port 7070"), "{err}");
    assert_nothing_left(uid, &dir, "after the server ended unready");
}

/// As a fresh uid, Ctrl-C while the client runs over the path: exit 130, nothing left.
#[test]
fn ctrl_c_as_a_fresh_uid_leaves_nothing_behind() {
    let uid = FRESH_UID + 1;
    let dir = OpenDir::new("wan-uid-sigint");
    let bin = dir.install(&live::tcpdoctor_bin());
    let ex = exchange(&dir);
    // The client: a script in the directory, so its command line names it.
    let script = dir.path("client.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\necho running > started\nexec sleep 600\n",
    )
    .expect("write");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let mut child = as_uid(uid, &bin)
        .current_dir(&dir.0)
        .args(["sandbox", "--delay", "5ms", "--server"])
        .arg(format!("{ex} serve 127.0.0.1:7070"))
        .args(["--server-port", "7070", "--"])
        .arg(script.display().to_string())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn tcpdoctor sandbox");
    // Bounded wait for the client to run (or for the sandbox to have refused).
    for _ in 0..3000 {
        if dir.path("started").exists() || child.try_wait().ok().flatten().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    if let Ok(Some(_)) = child.try_wait() {
        let out = child.wait_with_output().expect("output");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.code() == Some(2) && common::wan_unavailable("ctrl-c as a fresh uid", &err),
            "the sandbox ended before the client ran: {:?} {err}",
            out.status
        );
        return;
    }
    assert!(dir.path("started").exists(), "the client runs");
    live::interrupt(&child);
    let out = child.wait_with_output().expect("wait");
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_nothing_left(uid, &dir, "after Ctrl-C");
}

/// As a fresh uid, `run --scenarios wan:15ms` against the per-line Nagle specimen: the median
/// exchange is two round trips and the client's delayed ACK (the 90–120 ms), the
/// finding is `nagle_delayed_ack`, and nothing of that uid is left.
#[test]
fn run_over_wan_as_a_fresh_uid() {
    let uid = FRESH_UID + 2;
    let dir = OpenDir::new("wan-uid-run");
    let bin = dir.install(&live::tcpdoctor_bin());
    let port = common::run::free_port();
    let server = format!(
        "{} specimen --listen 127.0.0.1:{port} --protocol line --writes per-line",
        bin.display()
    );
    let target = format!("127.0.0.1:{port}");
    let mut args: Vec<String> = [
        "run",
        "--format",
        "json",
        "--server",
        &server,
        "--target",
        &target,
        "--requests",
        "20",
        "--scenarios",
        "wan:15ms",
        "--out",
        "files",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(common::run::SPECIMEN_LINE.iter().map(|s| s.to_string()));
    let Some(out) = tcpdoctor_as(uid, &dir, "run wan:15ms as a fresh uid", &args) else {
        return;
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let r: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let s = common::run::scenario(&r, "wan:15ms");
    let k = common::run::kinds(s);
    assert!(k.iter().any(|k| k == "nagle_delayed_ack"), "{k:?}");
    let p50 = s["figures"]["p50_ms"].as_f64().expect("p50");
    assert!(
        (90.0..=120.0).contains(&p50),
        "median {p50} ms: 2 × 30 ms + ato"
    );
    assert!(PathBuf::from(&dir.0).join("files").exists());
    assert_nothing_left(uid, &dir, "after run");
}
