//! `tcpdoctor run --target unix:PATH`: a specimen on a Unix socket, driven directly (no packets
//! to capture) and through hops that put a TCP leg in front of it.

mod common;

use common::num;
use common::run::{
    kinds, live_capture_possible, run_never_ready, scenario, scratch, tcpdoctor_in, SPECIMEN_LINE,
};
use serde_json::Value;

/// A service on a Unix socket that writes each reply line on its own (a row at a time):
/// directly there is no Nagle and nothing to capture; behind a Nagle-on hop (TCP towards the
/// driver, the socket upstream) the pieces stall on the delayed-ACK timer, named from the
/// hop's leg. A stale socket file from an earlier server is in the way at the start.
#[test]
fn run_drives_a_unix_socket_directly_and_behind_a_nagle_hop() {
    let dir = scratch("unix");
    let sock = dir.join("s.sock");
    drop(std::os::unix::net::UnixListener::bind(&sock).expect("a stale socket file"));
    let target = format!("unix:{}", sock.display());
    let exe = env!("CARGO_BIN_EXE_tcpdoctor");
    let server = format!(
        "{exe} specimen --listen {target} --writes per-line --line-gap 1ms --idle-timeout 60s"
    );
    let out = dir.join("files");
    let mut args = vec![
        "run",
        "--format",
        "json",
        "--server",
        &server,
        "--target",
        &target,
        "--scenarios",
        "direct,proxy-nagle",
        "--requests",
        "20",
        "--out",
        out.to_str().expect("as in the report"),
    ];
    args.extend_from_slice(SPECIMEN_LINE);
    if !live_capture_possible() {
        args.push("--sandbox");
    }
    let (r, code, err) = tcpdoctor_in(&dir, &args);
    assert_eq!(code, 0, "stderr: {err}");
    assert_eq!(r["settings"]["target"], target.as_str());
    assert!(
        std::os::unix::net::UnixStream::connect(&sock).is_err(),
        "the server on {target} is still running after run exited"
    );

    let direct = scenario(&r, "direct");
    assert_eq!(num(&direct["figures"]["exchanges"]), 20.0, "{direct}");
    assert!(direct["capture"].is_null(), "{}", direct["capture"]);
    let note = direct["capture_note"].as_str().expect("a note");
    assert!(note.starts_with("Unix socket: no packets"), "{note}");
    assert!(!kinds(direct).contains(&"nagle_delayed_ack".to_string()));
    assert!(
        !direct["server_cpu"].is_null(),
        "the server's CPU is still accounted"
    );

    let hop = scenario(&r, "proxy-nagle");
    let path = hop["path"].as_str().expect("a path");
    assert!(path.contains("Unix socket"), "{path}");
    assert!(!hop["capture"].is_null(), "{}", hop["capture_note"]);
    assert!(
        kinds(hop).contains(&"nagle_delayed_ack".to_string()),
        "{:?}; {}",
        kinds(hop),
        hop["capture"]["source"]
    );
    // The same service, the same writes: only the hop's Nagle adds stalls.
    let stalls = |s: &Value| num(&s["figures"]["stalls_30ms"]);
    assert!(stalls(hop) >= 10.0, "{}", hop["figures"]);
    assert!(stalls(direct) < 10.0, "{}", direct["figures"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A socket file with nobody accepting is not a ready server: `run` waits for a connect to
/// succeed, and names the timeout.
#[test]
fn a_stale_unix_socket_file_is_not_a_ready_server() {
    let dir = scratch("stale");
    let sock = dir.join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&sock).expect("a stale socket file"));
    let target = format!("unix:{}", sock.display());
    let exe = env!("CARGO_BIN_EXE_tcpdoctor");
    // Listens on TCP, while run waits for the socket.
    let server = format!("{exe} specimen --idle-timeout 62s --listen 127.0.0.1:0");
    let (code, err) = run_never_ready(&dir, &server, &target);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!("{target} did not accept a connection")),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
