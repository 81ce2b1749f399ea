//! The command line's contract: exit codes, error messages that name the file and offset,
//! `--fail-on`, JSON that matches the schema, pipes that close early.

mod common;

use std::io::Read;
use std::process::{Command, Stdio};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

fn a_stall_capture() -> String {
    "testdata/captures/nagle_perline_server.pcap".to_string()
}

#[test]
fn missing_file_is_exit_2_and_names_the_file() {
    let out = common::tcpdoctor(&["analyze", "no/such/capture.pcap"]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(e.contains("no/such/capture.pcap"), "{e}");
    assert_eq!(e.lines().count(), 1, "one clear line: {e}");
}

#[test]
fn a_directory_is_exit_2_with_the_cause_said_once() {
    let out = common::tcpdoctor(&["analyze", "testdata"]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(e.contains("testdata") && e.contains("byte 0"), "{e}");
    assert_eq!(e.matches("os error").count(), 1, "{e}");
}

#[test]
fn not_a_capture_is_exit_2_and_names_the_offset() {
    let out = common::tcpdoctor(&["analyze", "Cargo.toml"]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(e.contains("Cargo.toml") && e.contains("byte 0"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
}

/// testdata/malformed: each file in `EXPECTED` is refused (exit 2); each in
/// `EXPECTED_WARNINGS` ends mid-record and is analysed up to there, with that warning and exit
/// status (2 only when no complete TCP frame came before the cut).
#[test]
fn malformed_corpus_never_panics_and_exits_2_unless_merely_cut_short() {
    let dir = common::repo().join("testdata/malformed");
    let listing = std::fs::read_to_string(dir.join("EXPECTED_WARNINGS")).expect("listing");
    let warnings: Vec<(&str, i32, &str)> = listing
        .lines()
        .filter_map(|l| {
            let mut c = l.splitn(3, '\t');
            Some((c.next()?, c.next()?.parse().ok()?, c.next()?))
        })
        .collect();
    assert_eq!(warnings.len(), 3, "{listing}");
    let (mut n, mut warned) = (0, 0);
    for entry in std::fs::read_dir(&dir).expect("testdata/malformed") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .to_string();
        if name.starts_with("EXPECTED") {
            continue;
        }
        n += 1;
        let arg = path.to_str().expect("utf-8");
        let out = common::tcpdoctor(&["analyze", "--fail-on", "any", arg]);
        let e = stderr(&out);
        assert!(!e.contains("panicked"), "{}: {e}", path.display());
        assert!(e.contains(&name), "the message must name the file: {e}");
        match warnings.iter().find(|w| w.0 == name) {
            None => {
                assert_eq!(out.status.code(), Some(2), "{}: {e}", path.display());
                assert!(!e.contains("warning"), "{e}");
            }
            Some(&(_, code, warning)) => {
                warned += 1;
                assert_eq!(out.status.code(), Some(code), "{}: {e}", path.display());
                let line = format!("tcpdoctor: warning: {arg}: {warning}");
                assert_eq!(e.lines().next(), Some(line.as_str()), "{e}");
            }
        }
    }
    assert!(n >= 5, "malformed corpus has {n} files");
    assert_eq!(warned, warnings.len());
}

#[test]
fn unknown_fail_on_kind_is_a_usage_error() {
    let out = common::tcpdoctor(&["analyze", "--fail-on", "nagle", &a_stall_capture()]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(
        e.contains("nagle_delayed_ack"),
        "lists the valid kinds: {e}"
    );
}

#[test]
fn fail_on_sets_exit_1_only_for_the_kinds_named() {
    let cap = a_stall_capture();
    let out = common::tcpdoctor(&["analyze", "--fail-on", "nagle_delayed_ack", &cap]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let out = common::tcpdoctor(&["analyze", "--fail-on", "zero_window,connection_churn", &cap]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = common::tcpdoctor(&["analyze", "--fail-on", "any", &cap]);
    assert_eq!(out.status.code(), Some(1));
    let out = common::tcpdoctor(&["analyze", &cap]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "without --fail-on, findings exit 0"
    );
}

#[test]
fn text_report_leads_with_the_verdict_and_quotes_frames() {
    let out = common::tcpdoctor(&["analyze", &a_stall_capture()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("nagle_delayed_ack"), "{text}");
    assert!(text.contains("delayed ACK"), "{text}");
    assert!(text.contains("frame "), "{text}");
    assert!(text.contains("fix: "), "{text}");
}

#[test]
fn several_files_in_one_run_name_their_file() {
    let a = a_stall_capture();
    let b = "testdata/captures/nagle_perline_server_fixed.pcap";
    let (report, _) = {
        let out = common::tcpdoctor(&["analyze", "--format", "json", &a, b]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        common::validate(&v);
        (v, ())
    };
    assert_eq!(report["captures"].as_array().map(Vec::len), Some(2));
    for f in report["findings"].as_array().expect("findings") {
        assert_eq!(f["file"], a.as_str(), "the fixed twin has no findings");
    }
}

#[test]
fn a_bad_file_among_several_is_reported_and_the_others_still_analysed() {
    let a = a_stall_capture();
    let out = common::tcpdoctor(&["analyze", "--format", "json", "no-such.pcap", &a]);
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(e.contains("no-such.pcap"), "{e}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json for the good file");
    common::validate(&v);
    assert_eq!(v["captures"].as_array().map(Vec::len), Some(1));
    assert!(v["findings"].as_array().is_some_and(|f| !f.is_empty()));

    let none = common::tcpdoctor(&["analyze", "a.pcap", "b.pcap"]);
    assert_eq!(none.status.code(), Some(2));
    assert!(none.stdout.is_empty());
    let e = stderr(&none);
    assert!(
        e.contains("a.pcap") && e.contains("b.pcap") && e.contains("none of the 2"),
        "{e}"
    );
}

#[test]
fn closed_pipe_is_not_an_error() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(["analyze", "--format", "json", &a_stall_capture()])
        .current_dir(common::repo())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut first = [0u8; 1];
    child
        .stdout
        .take()
        .expect("stdout")
        .read_exact(&mut first)
        .expect("read one byte");
    // stdout is dropped (closed) here, before the rest is written.
    let status = child.wait().expect("wait");
    let mut err = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("stderr");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        status.code() == Some(0) || status.code() == Some(1),
        "{status:?} {err}"
    );
}
