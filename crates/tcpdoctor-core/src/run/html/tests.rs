//! The page rendered from real findings: shipped captures analysed as `tcpdoctor analyze`
//! would, placed in scenarios the way `run` and `demo` place them.

use std::time::Duration;

use super::escape::esc;
use super::render_html;
use crate::analysis::Analyzer;
use crate::report::{CaptureSummary, Finding, FindingKind};
use crate::run::tests::{scenario, settings};
use crate::run::{
    CaptureInfo, Check, ChunkView, Comparison, DemoCase, RunReport, RunSettings, ScenarioResult,
    ServerCpu,
};
use crate::wire::CaptureReader;

const PERLINE: &[u8] = include_bytes!("../../../../../testdata/captures/nagle_perline_server.pcap");
const FIXED: &[u8] =
    include_bytes!("../../../../../testdata/captures/nagle_perline_server_fixed.pcap");
const HOSTILE: &str = "<script>alert(1)</script>";

fn analyze(name: &str, bytes: &[u8]) -> (CaptureSummary, Vec<Finding>) {
    let mut reader = CaptureReader::new(bytes).expect("pcap header");
    let format = reader.format();
    let mut analyzer = Analyzer::default();
    while let Some(f) = reader.next_frame().expect("frame") {
        analyzer.on_frame(f.number, f.ts, f.link, f.data, f.orig_len);
    }
    analyzer.finish(name, format.name())
}

fn with_capture(mut s: ScenarioResult, file: &str, bytes: &[u8]) -> ScenarioResult {
    let (summary, findings) = analyze(file, bytes);
    s.capture = Some(CaptureInfo {
        file: file.to_string(),
        source: "proxy recording (client end)".into(),
        summary,
    });
    s.capture_note = None;
    s.findings = findings;
    s
}

fn chunks(sizes: &[(&str, u64)]) -> ChunkView {
    ChunkView {
        c2s_chunks: 40,
        s2c_chunks: sizes.iter().map(|(_, n)| n).sum(),
        s2c_sizes: sizes
            .iter()
            .map(|(v, n)| crate::report::Bucket {
                value: v.to_string(),
                count: *n,
            })
            .collect(),
        c2s_sizes: Vec::new(),
    }
}

/// A demo-like report: the per-line server before and after its fix, and a third scenario
/// whose name (and the server's command line) try to inject markup.
fn sample() -> RunReport {
    let mut slow = [Duration::from_micros(43_600); 40];
    slow[0] = Duration::from_micros(95);
    let mut before = with_capture(scenario("perline", &slow), "out/perline.pcap", PERLINE);
    before.chunks = Some(chunks(&[("19", 320), ("3", 40)]));
    before.figures.set_chunks(360);
    before.server_cpu = Some(ServerCpu::new(0.004, 0.006, 1.75, 40, 1));
    before.figures.server_cpu_per_request_us = Some(250.0);
    let mut after = with_capture(
        scenario("perline-fixed", &[Duration::from_micros(82); 40]),
        "out/perline-fixed.pcap",
        FIXED,
    );
    after.chunks = Some(chunks(&[("155", 40)]));
    after.figures.set_chunks(40);
    let hostile = scenario(HOSTILE, &[Duration::from_micros(300); 10]);
    let settings = RunSettings {
        command: "demo".into(),
        target: "127.0.0.1:36885".into(),
        script: "line-echo".into(),
        script_digest: None,
        server: Some(format!(
            "python3 server.py --banner '{HOSTILE}' & echo \"done\""
        )),
        scenarios: vec!["perline".into(), "perline-fixed".into(), HOSTILE.into()],
        requests: 40,
        repeat: 1,
        connections: 1,
        pipeline: 1,
        output_dir: "out".into(),
    };
    let mut r = RunReport::new(settings, vec![before, after, hostile]);
    r.comparisons.push(Comparison::of(
        "writing each response whole",
        ("perline", &r.scenarios[0].figures),
        ("perline-fixed", &r.scenarios[1].figures),
    ));
    let diagnosis = r.scenarios[0].findings[0].verdict.clone();
    r.cases.push(DemoCase {
        title: "Nagle × delayed ACK".into(),
        setup: "a server that writes each response line by line".into(),
        expected: FindingKind::NagleDelayedAck,
        before: "perline".into(),
        after: "perline-fixed".into(),
        requests: 40,
        reproduced: true,
        fixed: true,
        diagnosis,
        fix: "write each response with one call".into(),
    });
    r.gate(&[Check::parse("p99<5ms").expect("check")], &[], false);
    r
}

#[test]
fn the_capture_findings_are_what_the_page_shows() {
    let r = sample();
    let before = &r.scenarios[0];
    assert!(
        before.has(FindingKind::NagleDelayedAck),
        "{:?}",
        before.findings
    );
    assert!(
        r.scenarios[1].findings.is_empty(),
        "{:?}",
        r.scenarios[1].findings
    );
    let page = render_html(&r);
    for s in &r.scenarios {
        assert!(page.contains(&esc(&s.name)), "scenario {} missing", s.name);
    }
    for f in &before.findings {
        assert!(
            page.contains(&esc(&f.verdict)),
            "verdict missing: {}",
            f.verdict
        );
        assert!(page.contains(&esc(&f.fix)), "fix missing: {}", f.fix);
        let frames: Vec<String> = f.evidence.frames.iter().map(|n| n.to_string()).collect();
        let filter = format!("frame.number in {{{}}}", frames.join(", "));
        assert!(page.contains(&filter), "{filter} missing");
    }
    assert!(page.contains("frame.number in {25, 26, 27}"));
    // Each histogram drawn for a wide page and for a phone (the stylesheet shows one).
    for class in ["chart wide", "chart narrow"] {
        let drawn = page
            .matches(&format!("<svg class=\"{class}\" viewBox"))
            .count();
        assert_eq!(drawn, r.scenarios.len(), "{class}");
    }
    assert!(
        page.contains("10 µs") && page.contains("1 s<"),
        "log axis labels"
    );
    // The timeline: the ~42.6 ms delayed ACK of frame 26, labelled with the finding's note.
    assert!(page.contains("42.6 ms of silence"), "gap label missing");
    assert!(page.contains("delayed ACK: the client held it 42.6 ms"));
    assert!(page.contains(">#26<"), "frame label missing");
    assert!(page.contains("aria-label=\"server to client chunk sizes of perline\""));
    assert!(page.contains("server mostly sleeping"));
    assert!(page.contains("FAILED"), "p99<5ms fails on perline");
    assert!(page.contains("<span class=\"badge fail\">fail</span>"));
    assert!(page.contains("<span class=\"change better\">better</span>"));
    assert!(page.contains("1 of 1 case"));
}

#[test]
fn the_page_is_self_contained_and_escapes_user_strings() {
    let page = render_html(&sample());
    let lower = page.to_lowercase();
    assert!(!lower.contains("<script"), "raw script tag");
    assert!(!lower.contains("javascript:"));
    assert!(!lower.contains("http://") && !lower.contains("https://"));
    assert!(!lower.contains("src="), "nothing is loaded");
    assert!(!lower.contains("@import") && !lower.contains("url(http"));
    for (at, _) in lower.match_indices("href=") {
        assert!(lower[at..].starts_with("href=\"#"), "only in-page links");
    }
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(
        page.contains("--banner &#39;&lt;script&gt;"),
        "server command line escaped"
    );
    for tag in ["svg", "table", "section", "figure", "article", "p", "ul"] {
        let open =
            page.matches(&format!("<{tag}>")).count() + page.matches(&format!("<{tag} ")).count();
        let close = page.matches(&format!("</{tag}>")).count();
        assert_eq!(open, close, "<{tag}> not balanced");
    }
}

#[test]
fn a_report_without_captures_or_findings_still_renders() {
    let settings = settings(&["direct"], 0, 1);
    let mut empty = scenario("direct", &[]);
    empty.capture_note = Some("capture needs CAP_NET_RAW".into());
    let page = render_html(&RunReport::new(settings, vec![empty]));
    assert!(
        !page.contains("GATE PASSED"),
        "nothing was asked of this run: no green badge"
    );
    assert!(page.contains("capture needs CAP_NET_RAW"));
    assert!(page.contains("No findings"));
    assert!(
        !page.contains("id=\"timeline\""),
        "no timeline without a finding"
    );
    assert!(
        !page.contains("id=\"latency\""),
        "no histogram without exchanges"
    );
}

/// How a capture was read shows under its name, worded as the text report words it: time
/// stepping back, half-open attempts not tracked (a warning), A-MSDUs split and 802.11 frames
/// not analysed. A capture read without any of that shows none of these lines.
#[test]
fn the_capture_cell_says_how_the_capture_was_read() {
    let plain = render_html(&sample());
    for words in [
        "timestamps went backwards",
        "half-open",
        "A-MSDU",
        "not analysed",
    ] {
        assert!(!plain.contains(words), "{words}");
    }
    let mut r = sample();
    let summary = &mut r.scenarios[0].capture.as_mut().expect("capture").summary;
    summary.time_steps_back = Some(crate::report::TimeStepsBack {
        count: 2,
        largest_ms: 1500.0,
        largest_at_frame: 31,
    });
    summary.half_open_untracked = 12;
    summary.amsdu = Some(crate::report::AmsduSplit {
        frames: 1,
        subframes: 2,
    });
    summary.skipped.wlan_bad_subframes = 1;
    summary.skipped.wlan_encrypted = 3;
    let text = crate::report::render_text(&crate::report::Report::new(
        vec![summary.clone()],
        Vec::new(),
    ));
    let lines = [
        summary.time_steps_back_line().expect("steps back"),
        summary.half_open_line().expect("half-open"),
        summary.amsdu_line().expect("A-MSDU"),
        summary.not_analysed_line().expect("skipped"),
    ];
    assert!(lines[3].contains("3 encrypted") && lines[3].contains("A-MSDU with a subframe"));
    let page = render_html(&r);
    for line in &lines {
        assert!(text.contains(line.as_str()), "text: {line}\n{text}");
        assert!(page.contains(&esc(line)), "html: {line}");
    }
    assert!(page.contains(&format!(
        "<span class=\"no small\">warning: {}</span>",
        esc(&lines[1])
    )));
    assert!(
        text.contains(&format!("  warning: {}\n", lines[1])),
        "{text}"
    );
}
