//! `tcpdoctor capture` on the real loopback, around exchanges this test makes (root: CI runs
//! as root; elsewhere these tests say they are skipped). The capture must hold exactly what the
//! kernel sent — as many segments as the sockets' own counters say, the same payload bytes —
//! and `analyze` must find the Nagle stall in the per-line exchange and nothing in its twin.

mod common;

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;

use common::exchange::{self, Sent};
use common::live::{self, is_root, skip, OpenDir};
use tcpdoctor_core::wire::LinkType;

const EXCHANGES: usize = 8;

struct Run {
    port: u16,
    client: Sent,
    server: Sent,
    received: u64,
    stderr: String,
    code: Option<i32>,
    stdout: String,
}

/// Captures on `lo` (with `extra` flags) around one connection of EXCHANGES exchanges, then
/// Ctrl-C.
fn capture_exchange(coalesce: bool, extra: &[&str]) -> Run {
    capture_exchange_on("lo", coalesce, extra)
}

/// [`capture_exchange`] on `interface`.
fn capture_exchange_on(interface: &str, coalesce: bool, extra: &[&str]) -> Run {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    capture_exchange_with(interface, listener, |_| {}, coalesce, extra)
}

/// [`capture_exchange`] on `interface`, serving on `listener`, with `setup` applied to both
/// client sockets (the test's and the noise's) once connected.
fn capture_exchange_with(
    interface: &str,
    listener: TcpListener,
    setup: fn(&TcpStream),
    coalesce: bool,
    extra: &[&str],
) -> Run {
    let server_addr = listener.local_addr().expect("addr");
    let port = listener.local_addr().expect("addr").port();
    let mut cmd = Command::new(live::tcpdoctor_bin());
    cmd.args(["capture", "--interface", interface])
        .args(["--port", &port.to_string()])
        .args(extra);
    let marker = format!("capturing on {interface}");
    let (mut child, mut rest) = live::spawn_until(&mut cmd, &marker);
    let server = std::thread::spawn(move || {
        let (conn, _) = listener.accept().expect("accept");
        exchange::serve(conn, coalesce).expect("serve")
    });
    // Traffic on another port at the same time: the kernel filter must keep it out.
    let noise = std::thread::spawn(move || {
        let l = TcpListener::bind((server_addr.ip(), 0)).expect("bind");
        let c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        setup(&c);
        let (s, _) = l.accept().expect("accept");
        let t = std::thread::spawn(move || exchange::serve(s, true));
        exchange::client(c, EXCHANGES).expect("noise client");
        t.join().expect("noise server").expect("noise serve");
    });
    let conn = TcpStream::connect(server_addr).expect("connect");
    setup(&conn);
    let (client, received) = exchange::client(conn, EXCHANGES).expect("client");
    let server = server.join().expect("server thread");
    noise.join().expect("noise");
    live::interrupt(&child);
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut stdout)
        .expect("stdout");
    let mut stderr = String::new();
    rest.read_to_string(&mut stderr).expect("stderr");
    let code = child.wait().expect("wait").code();
    Run {
        port,
        client,
        server,
        received,
        stderr,
        code,
        stdout,
    }
}

fn check_contents(run: &Run, file: &Path) {
    check_contents_of(run, file, LinkType::Ethernet);
}

/// The capture holds each packet the sockets sent exactly once, with link type `link`.
fn check_contents_of(run: &Run, file: &Path, link: LinkType) {
    assert_eq!(run.code, Some(0), "capture: {}", run.stderr);
    let c = live::read_capture(file);
    let sent = run.client.segments + run.server.segments;
    // The SYN-ACK is sent on the listener's behalf and counted by neither socket.
    assert_eq!(
        c.frames,
        sent + 1,
        "frames in the capture vs segments the sockets sent ({:?} / {:?})",
        run.client,
        run.server
    );
    assert_eq!(
        c.tcp, c.frames,
        "only the test's connection is in the capture"
    );
    assert!(
        run.stderr
            .contains(&format!("{} packets captured, 0 dropped", c.frames)),
        "summary line: {}",
        run.stderr
    );
    let other = *c
        .payload_from
        .keys()
        .find(|p| **p != run.port)
        .expect("client port");
    assert_eq!(c.payload_from[&other], run.client.bytes);
    assert_eq!(c.payload_from[&run.port], run.server.bytes);
    assert_eq!(run.received, run.server.bytes);
    assert_eq!(c.syn_only, 1);
    assert_eq!(c.link, Some(link));
    assert!(c.timestamps_ordered);
    assert!(c.max_caplen <= 256, "snap length 256 by default");
    live::tshark_reads_cleanly(file);
}

fn kinds(report: &serde_json::Value) -> Vec<(String, String)> {
    report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            (
                f["kind"].as_str().unwrap_or("").to_string(),
                f["direction"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn per_line_exchange_is_captured_whole_and_shows_the_nagle_stall() {
    if !is_root() {
        return skip("capture on lo", "needs root (CAP_NET_RAW); CI runs as root");
    }
    let dir = OpenDir::new("capture");
    let file = dir.path("perline.pcap");
    let run = capture_exchange(false, &["-w", file.to_str().expect("utf-8")]);
    check_contents(&run, &file);
    // Per-line writes: more data segments from the server than responses.
    assert!(run.server.data_segments > EXCHANGES as u64);
    let (report, _) = common::analyze_json(&file);
    let found = kinds(&report);
    assert!(
        found.contains(&("nagle_delayed_ack".into(), "server_to_client".into())),
        "{found:?}"
    );
}

#[test]
fn coalesced_twin_to_pcapng_is_captured_whole_and_clean() {
    if !is_root() {
        return skip("capture on lo", "needs root (CAP_NET_RAW); CI runs as root");
    }
    let dir = OpenDir::new("capture");
    let file = dir.path("coalesced.pcapng");
    let run = capture_exchange(true, &["-w", file.to_str().expect("utf-8")]);
    check_contents(&run, &file);
    let (report, _) = common::analyze_json(&file);
    assert_eq!(report["captures"][0]["format"], "pcapng");
    assert!(kinds(&report).is_empty(), "{:?}", kinds(&report));
}

#[test]
fn any_interface_sees_each_loopback_packet_once_in_cooked_form() {
    if !is_root() {
        return skip(
            "capture -i any",
            "needs root (CAP_NET_RAW); CI runs as root",
        );
    }
    let dir = OpenDir::new("capture");
    for name in ["any.pcap", "any.pcapng"] {
        let file = dir.path(name);
        let run = capture_exchange_on("any", false, &["-w", file.to_str().expect("utf-8")]);
        // The kernel shows every loopback packet twice to a socket on all interfaces (sent
        // and received): as many frames as segments sent means the sent copy was dropped.
        check_contents_of(&run, &file, LinkType::LinuxSll2);
        let (report, _) = common::analyze_json(&file);
        let found = kinds(&report);
        assert!(
            found.contains(&("nagle_delayed_ack".into(), "server_to_client".into())),
            "{name}: {found:?}"
        );
    }
}

/// Makes `conn` send an IPv6 hop-by-hop options header (a PadN option) before TCP.
fn send_hop_by_hop_options(conn: &TcpStream) {
    use std::os::fd::AsRawFd;
    // Next header (filled by the kernel), length 0 (8 bytes), PadN of 4.
    let opts: [u8; 8] = [0, 0, 1, 4, 0, 0, 0, 0];
    // SAFETY: setsockopt with a buffer of the length passed, on a live socket.
    let r = unsafe {
        libc::setsockopt(
            conn.as_raw_fd(),
            libc::IPPROTO_IPV6,
            libc::IPV6_HOPOPTS,
            opts.as_ptr().cast(),
            opts.len() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "IPV6_HOPOPTS: {}", std::io::Error::last_os_error());
}

#[test]
fn ipv6_segments_behind_a_hop_by_hop_header_pass_the_port_filter() {
    if !is_root() {
        return skip(
            "capture IPv6 extension headers",
            "needs root (CAP_NET_RAW, also for IPV6_HOPOPTS); CI runs as root",
        );
    }
    let dir = OpenDir::new("capture");
    for interface in ["lo", "any"] {
        let Ok(listener) = TcpListener::bind("[::1]:0") else {
            return skip("capture IPv6 extension headers", "no ::1 on this host");
        };
        let file = dir.path(&format!("v6-hbh-{interface}.pcap"));
        let path = file.to_str().expect("utf-8");
        let run = capture_exchange_with(
            interface,
            listener,
            send_hop_by_hop_options,
            true,
            &["-w", path],
        );
        // The client's data segments carry the header: without stepping over it the filter
        // would drop them and the counts would not match. The noise, on another port with
        // the same header, must stay out.
        let link = if interface == "any" {
            LinkType::LinuxSll2
        } else {
            LinkType::Ethernet
        };
        check_contents_of(&run, &file, link);
    }
}

#[test]
fn analyze_live_reports_json_and_fails_on_the_stall() {
    if !is_root() {
        return skip(
            "capture --analyze",
            "needs root (CAP_NET_RAW); CI runs as root",
        );
    }
    let run = capture_exchange(
        false,
        &[
            "--analyze",
            "--format",
            "json",
            "--fail-on",
            "nagle_delayed_ack",
        ],
    );
    assert_eq!(run.code, Some(1), "--fail-on found it: {}", run.stderr);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    common::validate(&report);
    assert_eq!(report["captures"][0]["format"], "live");
    assert!(kinds(&report).contains(&("nagle_delayed_ack".into(), "server_to_client".into())));
    let segments = report["captures"][0]["tcp_segments"]
        .as_u64()
        .expect("count");
    assert_eq!(segments, run.client.segments + run.server.segments + 1);
}

#[test]
fn packet_limit_ends_the_capture_after_the_handshake() {
    if !is_root() {
        return skip(
            "capture --packets",
            "needs root (CAP_NET_RAW); CI runs as root",
        );
    }
    let dir = OpenDir::new("capture");
    let file = dir.path("handshake.pcap");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port().to_string();
    let mut cmd = Command::new(live::tcpdoctor_bin());
    cmd.args(["capture", "--port", &port, "--packets", "3", "-w"])
        .arg(&file);
    let (mut child, mut rest) = live::spawn_until(&mut cmd, "capturing on lo");
    let conn = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
    let mut stderr = String::new();
    rest.read_to_string(&mut stderr).expect("stderr");
    let status = child.wait().expect("wait");
    drop(conn);
    assert!(status.success(), "{status:?}: {stderr}");
    assert!(stderr.contains("3 packets captured"), "{stderr}");
    let c = live::read_capture(&file);
    assert_eq!((c.frames, c.syn_only), (3, 1), "SYN, SYN-ACK, ACK");
}

#[test]
fn bad_flags_are_usage_errors() {
    for (args, says) in [
        (
            &["capture", "--packets", "5"][..],
            "-w FILE.pcap, --analyze",
        ),
        (
            &["capture", "-w", "x.pcap", "--snaplen", "0"][..],
            "--snaplen",
        ),
        (
            &["capture", "-w", "x.pcap", "--duration", "soon"][..],
            "--duration",
        ),
        (&["capture", "-w", "x.pcap", "--port", "0"][..], "--port"),
        (
            &["capture", "-w", "x.pcap", "--format", "json"][..],
            "--analyze",
        ),
    ] {
        let out = common::tcpdoctor(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn without_cap_net_raw_capture_refuses_and_points_to_the_sandbox() {
    let dir = OpenDir::new("nocap");
    let bin = dir.install(&live::tcpdoctor_bin());
    let file = dir.path("x.pcap");
    let out = live::unprivileged(&bin)
        .args(["capture", "--port", "1", "--duration", "1s", "-w"])
        .arg(&file)
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    if !is_root() && out.status.success() {
        return skip(
            "no CAP_NET_RAW",
            "this user can capture (file capabilities?)",
        );
    }
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err.trim(),
        "tcpdoctor: error: capturing needs CAP_NET_RAW (run as root, or `setcap \
         cap_net_raw+ep`, or use `tcpdoctor sandbox -- ...` which needs neither)"
    );
    assert!(!file.exists(), "no file is left behind");
}

#[test]
fn duration_ends_a_quiet_capture_with_an_empty_but_valid_file() {
    if !is_root() {
        return skip(
            "capture --duration",
            "needs root (CAP_NET_RAW); CI runs as root",
        );
    }
    let dir = OpenDir::new("capture");
    let file = dir.path("quiet.pcapng");
    // A port nothing uses: bound here, never connected to.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port().to_string();
    let out = Command::new(live::tcpdoctor_bin())
        .args([
            "capture",
            "--port",
            &port,
            "--duration",
            "200ms",
            "--analyze",
        ])
        .args(["--format", "json", "-w"])
        .arg(&file)
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("0 packets captured, 0 dropped"), "{err}");
    assert!(err.contains("nothing to analyse"), "{err}");
    assert!(out.stdout.is_empty(), "no report without packets");
    assert_eq!(live::read_capture(&file).frames, 0);
}

#[test]
fn a_write_error_names_the_file_and_exits_2() {
    if !is_root() {
        return skip(
            "capture write error",
            "needs root (CAP_NET_RAW); CI runs as root",
        );
    }
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port().to_string();
    let mut cmd = Command::new(live::tcpdoctor_bin());
    cmd.args([
        "capture",
        "--port",
        &port,
        "--packets",
        "3",
        "-w",
        "/dev/full",
    ]);
    let (mut child, mut rest) = live::spawn_until(&mut cmd, "capturing on lo");
    let conn = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
    let mut stderr = String::new();
    rest.read_to_string(&mut stderr).expect("stderr");
    let status = child.wait().expect("wait");
    drop(conn);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("writing /dev/full: No space left on device"),
        "{stderr}"
    );
}

#[test]
fn an_unknown_interface_is_a_usage_error() {
    if !is_root() {
        return skip(
            "capture -i unknown",
            "needs root (CAP_NET_RAW); CI runs as root",
        );
    }
    let out = common::tcpdoctor(&["capture", "-i", "nosuch0", "--analyze", "--packets", "1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--interface nosuch0: no such interface"),
        "{err}"
    );
}
