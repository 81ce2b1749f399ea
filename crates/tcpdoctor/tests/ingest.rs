//! `analyze` reads the captures people actually have: cut short by a killed tcpdump, gzipped,
//! tunnelled (VXLAN, GRE, MPLS, …), or holding no TCP at all. Each test starts from a real
//! capture (testdata/) and checks the command line's whole answer: exit status, stderr, report.

mod common;

use std::path::Path;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// `name` in a scratch folder of its own (removed with it), holding `bytes`.
fn scratch_file(test: &str, name: &str, bytes: &[u8]) -> common::ScratchFile {
    common::scratch_file(&format!("ingest-{test}"), name, bytes)
}

fn capture(name: &str) -> Vec<u8> {
    std::fs::read(common::repo().join("testdata/captures").join(name)).expect("capture")
}

fn json(out: &std::process::Output) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json report");
    common::validate(&v);
    v
}

fn arg(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// nagle_perline_server.pcap holds 221 records; the last starts at byte 24839 and is 82 bytes
/// long (16-byte header, 66 captured), ending the 24921-byte file. tshark reads the same cut
/// files as "cut short in the middle of a packet" after frame 220.
const NAGLE: &str = "nagle_perline_server.pcap";
const LAST_RECORD: usize = 24839;

#[test]
fn a_capture_cut_mid_record_is_analysed_up_to_the_cut_with_a_warning() {
    let full = capture(NAGLE);
    assert_eq!((full.len(), full.len() - LAST_RECORD), (24921, 82));
    // (cut at, what the warning says was missing)
    let cuts = [
        (
            LAST_RECORD + 50,
            "the pcap record there needs 82 bytes, 50 left",
        ),
        (
            LAST_RECORD + 7,
            "the pcap record header there needs 16 bytes, 7 left",
        ),
    ];
    for (cut, missing) in cuts {
        let path = scratch_file("cut", &format!("cut{cut}.pcap"), &full[..cut]);
        let p = arg(&path);
        let want = format!(
            "tcpdoctor: warning: {p}: capture ends mid-record at byte {LAST_RECORD} ({missing}); \
             analysed the 220 complete frames before it\n"
        );

        // The exit status is that of a complete file: --fail-on decides.
        let out = common::tcpdoctor(&["analyze", "--fail-on", "nagle_delayed_ack", p]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert_eq!(stderr(&out), want);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("nagle_delayed_ack"), "{text}");
        assert!(
            text.contains(&format!(
                "  warning: capture ends mid-record at byte {LAST_RECORD}"
            )),
            "{text}"
        );
        let out = common::tcpdoctor(&["analyze", "--fail-on", "zero_window", p]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

        let out = common::tcpdoctor(&["analyze", "--format", "json", p]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let v = json(&out);
        let c = &v["captures"][0];
        assert_eq!(c["frames"], 220);
        assert_eq!(c["truncated"]["at_byte"], LAST_RECORD);
        assert_eq!(c["truncated"]["frames_before"], 220);
        assert_eq!(c["truncated"]["decompressed"], false);
    }
    // The complete file: no warning, `truncated` is null.
    let out = common::tcpdoctor(&[
        "analyze",
        "--format",
        "json",
        &format!("testdata/captures/{NAGLE}"),
    ]);
    assert_eq!(stderr(&out), "");
    assert_eq!(
        json(&out)["captures"][0]["truncated"],
        serde_json::Value::Null
    );
}

#[test]
fn garbage_in_the_middle_is_still_an_error() {
    let mut bad = capture(NAGLE);
    // Record 102's captured length becomes absurd: the rest of the file cannot be trusted.
    bad[11005 + 8..11005 + 12].copy_from_slice(&0x7fff_0000u32.to_le_bytes());
    let path = scratch_file("garbage", "garbage.pcap", &bad);
    let out = common::tcpdoctor(&["analyze", arg(&path)]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(
        e.contains("malformed pcap record header at byte 11005: captured length 2147418112"),
        "{e}"
    );
    assert!(!e.contains("warning"), "{e}");
}

fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).expect("compress");
    enc.finish().expect("finish")
}

/// The byte offset of each record of a little-endian pcap file, walked here from the format.
fn record_offsets(pcap: &[u8]) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut at = 24;
    while at + 16 <= pcap.len() {
        offsets.push(at);
        let caplen = u32::from_le_bytes(pcap[at + 8..at + 12].try_into().expect("4 bytes"));
        at += 16 + caplen as usize;
    }
    offsets
}

/// The report without the file name, to compare two runs over the same packets.
fn report_without_names(out: &std::process::Output) -> serde_json::Value {
    let mut v = json(out);
    v["captures"][0]["file"] = serde_json::Value::Null;
    for f in v["findings"].as_array_mut().expect("findings") {
        f["file"] = serde_json::Value::Null;
    }
    v
}

#[test]
fn a_gzipped_capture_reads_like_the_plain_one_whatever_its_name() {
    let plain = capture(NAGLE);
    let gz = gzip(&plain);
    // Detected by its magic, not its name: `.pcap` holding gzip, `.gz` holding a plain pcap.
    let gz_path = scratch_file("gzip", "compressed.pcap", &gz);
    let plain_path = scratch_file("gzip", "not-compressed.pcap.gz", &plain);
    let a = common::tcpdoctor(&["analyze", "--format", "json", arg(&gz_path)]);
    let b = common::tcpdoctor(&["analyze", "--format", "json", arg(&plain_path)]);
    assert_eq!(a.status.code(), Some(0), "{}", stderr(&a));
    assert_eq!(stderr(&a), "");
    let (a, b) = (report_without_names(&a), report_without_names(&b));
    assert_eq!(a["captures"][0]["frames"], 221);
    assert!(!a["findings"].as_array().expect("findings").is_empty());
    assert_eq!(a, b);
    let out = common::tcpdoctor(&["analyze", "--fail-on", "nagle_delayed_ack", arg(&gz_path)]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
}

#[test]
fn a_gzip_stream_cut_short_is_a_capture_cut_short_in_decompressed_bytes() {
    let plain = capture(NAGLE);
    let offsets = record_offsets(&plain);
    assert_eq!((offsets.len(), offsets[220]), (221, LAST_RECORD));
    let gz = gzip(&plain);
    let path = scratch_file("gzcut", "cut.pcap.gz", &gz[..gz.len() / 2]);
    let out = common::tcpdoctor(&["analyze", "--format", "json", arg(&path)]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    let t = &v["captures"][0]["truncated"];
    assert_eq!(t["decompressed"], true);
    // Wherever the decompressed prefix stops, the warning names the start of the record it
    // stops in, and every record before that one was analysed.
    let at = t["at_byte"].as_u64().expect("at_byte") as usize;
    let before = offsets
        .iter()
        .position(|&o| o == at)
        .expect("a record start");
    assert!(before > 20 && before < 200, "{before}");
    assert_eq!(t["frames_before"], before);
    assert_eq!(v["captures"][0]["frames"], before);
    let e = stderr(&out);
    let want = format!(
        "tcpdoctor: warning: {}: capture ends mid-record at byte {at} of the decompressed data \
         (the pcap record",
        arg(&path)
    );
    assert!(e.starts_with(&want), "{e}");
    assert!(
        e.ends_with(&format!(
            "analysed the {before} complete frames before it\n"
        )),
        "{e}"
    );

    // Only the 8-byte trailer (CRC and length) missing: every record is there.
    let path = scratch_file("gzcut", "no-trailer.pcap.gz", &gz[..gz.len() - 8]);
    let out = common::tcpdoctor(&["analyze", arg(&path)]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        format!(
            "tcpdoctor: warning: {}: the gzip data ends early, after 24921 decompressed bytes, \
             between two records (its checksum is missing); analysed the 221 complete frames \
             before it\n",
            arg(&path)
        )
    );
}

#[test]
fn corrupt_gzip_is_an_error_in_decompressed_offsets() {
    let mut gz = gzip(&capture(NAGLE));
    let n = gz.len();
    gz[n - 8] ^= 0xff; // the CRC-32 of the whole capture
    let path = scratch_file("gzbad", "bad-crc.pcap.gz", &gz);
    let out = common::tcpdoctor(&["analyze", arg(&path)]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(
        e.contains("(gzip-compressed: byte offsets count decompressed bytes): read error at byte")
            && e.contains("checksum"),
        "{e}"
    );
    // gzip around something that is not a capture.
    let path = scratch_file("gzbad", "text.gz", &gzip(b"GET / HTTP/1.1\r\n\r\n"));
    let out = common::tcpdoctor(&["analyze", arg(&path)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("gzip-compressed"));
    assert!(stderr(&out).contains("not a pcap or pcapng file (first bytes [47, 45, 54, 20]"));
}

/// testdata/wire/tunnels: TCP inside VXLAN and GRE is analysed, and the report says where it
/// came from. Counts from tshark (see that folder's README).
#[test]
fn tunnelled_tcp_is_analysed_and_the_report_says_it_was_unwrapped() {
    let out = common::tcpdoctor(&["analyze", "testdata/wire/tunnels/vxlan_http.pcap"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("\n  12 TCP segments decapsulated from VXLAN\n"),
        "{text}"
    );
    assert!(text.contains("1 flow"), "{text}");

    let out = common::tcpdoctor(&["analyze", "testdata/wire/tunnels/gre_ip.pcap"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("\n  22 TCP segments decapsulated from GRE\n"),
        "{text}"
    );
    assert!(
        text.contains("\n  not analysed: 18 frames (18 GRE packets without TCP inside)\n"),
        "{text}"
    );

    let out = common::tcpdoctor(&[
        "analyze",
        "--format",
        "json",
        "testdata/wire/tunnels/mpls_vlan_mixed.pcap",
        "testdata/wire/tunnels/pppoe_over_qinq.pcap",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    let c = &v["captures"];
    assert_eq!(c[0]["tcp_segments"], 47);
    assert_eq!(
        c[0]["tunnels"],
        serde_json::json!([{ "tunnel": "MPLS", "tcp_segments": 11, "not_tcp": 0 }])
    );
    assert_eq!(c[1]["tcp_segments"], 86);
    assert_eq!(
        c[1]["tunnels"],
        serde_json::json!([{ "tunnel": "PPPoE", "tcp_segments": 86, "not_tcp": 0 }])
    );
    assert_eq!(c[1]["skipped"]["not_tcp"], 0);
}

/// A capture without TCP: the error counts what it held instead (tshark: 6 DHCP, 5 ICMPv6, 8
/// LLDP; 10 VXLAN packets holding ARP and ICMP).
#[test]
fn no_tcp_says_what_the_capture_held_instead() {
    let cases = [
        (
            "testdata/wire/no_tcp/udp_icmpv6_lldp.pcap",
            "19 frames — 6 UDP, 5 ICMP, 8 not IP; link type Ethernet",
        ),
        (
            "testdata/wire/tunnels/vxlan_no_tcp.pcap",
            "10 frames — 10 VXLAN packets without TCP inside; link type Ethernet",
        ),
        (
            "testdata/wire/tunnels/erspan3_no_tcp.pcap",
            "9 frames — 9 ERSPAN packets without TCP inside; link type Ethernet",
        ),
    ];
    for (file, seen) in cases {
        let out = common::tcpdoctor(&["analyze", file]);
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(
            stderr(&out),
            format!(
                "tcpdoctor: error: {file}: no TCP packets in this capture: {seen}; capture with \
                 a filter such as 'tcp port 8080'\n"
            )
        );
        assert!(out.stdout.is_empty());
    }
}

/// A capture piped in (`cat x.pcap | tcpdoctor analyze /dev/stdin`) cannot be read twice: the
/// findings come out unaudited, with a note, instead of the whole capture failing.
#[test]
fn a_piped_capture_is_analysed_and_says_its_findings_are_unaudited() {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args([
            "analyze",
            "--format",
            "json",
            "--fail-on",
            "nagle_delayed_ack",
            "/dev/stdin",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tcpdoctor");
    let bytes = capture(NAGLE);
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || stdin.write_all(&bytes));
    let out = child.wait_with_output().expect("wait");
    writer.join().expect("writer").expect("write capture");
    assert_eq!(out.status.code(), Some(1), "stderr: {}", stderr(&out));
    assert!(
        stderr(&out).contains("not a regular file"),
        "{}",
        stderr(&out)
    );
    let report = json(&out);
    assert!(report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .any(|f| f["kind"] == "nagle_delayed_ack"));
    assert!(report["captures"][0].get("audit").is_none());
}
