//! `analyze` reads the captures people actually have: cut short by a killed tcpdump, gzipped,
//! tunnelled (VXLAN, GRE, MPLS, …), or holding no TCP at all. Each test starts from a real
//! capture (testdata/) and checks the command line's whole answer: exit status, stderr, report.

mod common;

use std::path::{Path, PathBuf};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// `name` under a scratch folder of this test process, holding `bytes`.
fn scratch_file(test: &str, name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tcpdoctor-ingest-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write scratch capture");
    path
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
