//! The HTML report in a real browser: a demo-like report built from shipped captures (the
//! per-line server before and after its fix) is rendered by headless Chromium, which must
//! lay out every chart and show the text; the screenshots are left in /tmp/tcpdoctor-html/
//! for a person to look at.
//!
//! Without Chromium the test says SKIPPED loudly and passes, unless
//! `TCPDOCTOR_REQUIRE_CHROMIUM` is set (CI sets it). `TCPDOCTOR_CHROMIUM` names the binary
//! when it is not `chromium` on PATH.

mod common;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use tcpdoctor_core::analysis::Analyzer;
use tcpdoctor_core::bench::{LatencyHistogram, RunMeasurements, RunResult};
use tcpdoctor_core::report::{Bucket, FindingKind};
use tcpdoctor_core::run::{
    log_buckets, render_html, CaptureInfo, Check, ChunkView, Comparison, DemoCase, Figures,
    RunReport, RunSettings, ScenarioResult, ServerCpu, StepFigures,
};
use tcpdoctor_core::wire::CaptureReader;

const OUT_DIR: &str = "/tmp/tcpdoctor-html";
const HOSTILE: &str = "<script>alert(1)</script>";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn scenario(name: &str, path: &str, latencies: &[Duration]) -> ScenarioResult {
    let mut m = RunMeasurements {
        measured: Duration::from_secs(1),
        elapsed: Duration::from_secs(1),
        per_step: vec![LatencyHistogram::default()],
        ..Default::default()
    };
    for l in latencies {
        m.overall.record(*l);
        m.per_step[0].record(*l);
    }
    let bench = RunResult::new(1, &["line".to_string()], &m);
    ScenarioResult {
        name: name.to_string(),
        definition: name.to_string(),
        path: path.to_string(),
        figures: Figures::of(&bench, &m.overall),
        latency_histogram: log_buckets(&m.overall),
        bench,
        repeat: None,
        capture: None,
        capture_note: Some("no capture".into()),
        server_end: None,
        chunks: None,
        server_cpu: None,
        server_sockets: None,
        syscalls: None,
        findings: Vec::new(),
    }
}

/// Analyses a shipped capture into the scenario, as `run` does with the one it records.
fn diagnose(s: &mut ScenarioResult, capture: &str) {
    let path = repo().join("testdata/captures").join(capture);
    let file = File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut reader = CaptureReader::new(file).expect("capture header");
    let format = reader.format();
    let mut analyzer = Analyzer::default();
    while let Some(f) = reader.next_frame().expect("frame") {
        analyzer.on_frame(f.number, f.ts, f.link, f.data, f.orig_len);
    }
    let name = format!("testdata/captures/{capture}");
    let (summary, findings) = analyzer.finish(&name, format.name());
    s.capture = Some(CaptureInfo {
        file: name,
        source: "tcpdump on lo".into(),
        summary,
    });
    s.capture_note = None;
    s.findings = findings;
}

fn chunks(sizes: &[(&str, u64)]) -> ChunkView {
    ChunkView {
        c2s_chunks: 40,
        s2c_chunks: sizes.iter().map(|(_, n)| n).sum(),
        s2c_sizes: sizes
            .iter()
            .map(|(v, n)| Bucket {
                value: v.to_string(),
                count: *n,
            })
            .collect(),
        c2s_sizes: Vec::new(),
    }
}

fn report() -> RunReport {
    let mut slow = vec![Duration::from_micros(43_600); 39];
    slow.push(Duration::from_micros(95));
    let mut before = scenario("perline", "driver → server (writes each line)", &slow);
    diagnose(&mut before, "nagle_perline_server.pcap");
    before.chunks = Some(chunks(&[("19", 320), ("3", 40)]));
    before.figures.set_chunks(360);
    before.server_cpu = Some(ServerCpu::new(0.004, 0.006, 1.75, 40, 1));
    before.figures.server_cpu_per_request_us = Some(250.0);
    let mut after = scenario(
        "perline-fixed",
        "driver → server (one write per response)",
        &[Duration::from_micros(82); 40],
    );
    diagnose(&mut after, "nagle_perline_server_fixed.pcap");
    after.chunks = Some(chunks(&[("155", 40)]));
    after.figures.set_chunks(40);
    after.server_cpu = Some(ServerCpu::new(0.003, 0.004, 0.02, 40, 1));
    after.figures.server_cpu_per_request_us = Some(175.0);
    let hostile = scenario(HOSTILE, HOSTILE, &[Duration::from_micros(300); 10]);
    let settings = RunSettings {
        command: "demo".into(),
        target: "127.0.0.1:36885".into(),
        script: "line-echo".into(),
        script_digest: None,
        server: Some(format!("python3 server.py --banner '{HOSTILE}'")),
        scenarios: vec!["perline".into(), "perline-fixed".into(), HOSTILE.into()],
        requests: 40,
        repeat: 1,
        connections: 1,
        pipeline: 1,
        output_dir: "tcpdoctor-demo".into(),
    };
    let mut r = RunReport::new(settings, vec![before, after, hostile]);
    r.comparisons.push(Comparison::of(
        "Nagle × delayed ACK: one write per response",
        ("perline", &r.scenarios[0].figures),
        ("perline-fixed", &r.scenarios[1].figures),
    ));
    let before = &r.scenarios[0];
    let nagle = before
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::NagleDelayedAck)
        .expect("the per-line capture shows nagle_delayed_ack");
    r.cases.push(DemoCase {
        title: "Nagle × delayed ACK".into(),
        setup: "a server that writes each response line by line, Nagle on".into(),
        expected: FindingKind::NagleDelayedAck,
        before: "perline".into(),
        after: "perline-fixed".into(),
        requests: 40,
        reproduced: true,
        fixed: !r.scenarios[1].has(FindingKind::NagleDelayedAck),
        diagnosis: nagle.verdict.clone(),
        fix: "the fixed twin builds each response in a buffer and writes it once".into(),
    });
    let checks = [
        Check::parse("p99<5ms").expect("check"),
        Check::parse("stalls==0@perline-fixed").expect("check"),
    ];
    r.gate(&checks, &[], false);
    r
}

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TCPDOCTOR_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |d| d.join(name)))
        .find(|p| p.is_file())
}

/// Runs Chromium headless with `args` on `page`, with a private profile, within two minutes.
fn run_chromium(bin: &Path, args: &[String], page: &Path) -> Output {
    // One profile per page and per test process: tests run in parallel, a profile admits one
    // browser, and a profile left locked by an earlier run (or another checkout's tests
    // running at the same time) must not fail this one.
    let stem = page.file_stem().and_then(|s| s.to_str()).unwrap_or("page");
    let profile = Path::new(OUT_DIR).join(format!("profile-{stem}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&profile);
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
    // Chromium has no timeout of its own; a hung browser must fail the test, not stall CI.
    let deadline = Instant::now() + Duration::from_secs(120);
    let stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let mut stdout = stdout;
        std::io::Read::read_to_end(&mut stdout, &mut buf).map(|_| buf)
    });
    loop {
        if child.try_wait().expect("wait chromium").is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{} did not finish within 120 s", bin.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("chromium output");
    let stdout = reader.join().expect("reader").expect("read stdout");
    let _ = std::fs::remove_dir_all(&profile);
    Output { stdout, ..out }
}

/// A `run` of a client that writes each request in two pieces, on loopback and over a 30 ms
/// path: no chunk view, no demo cases, no checks, a client→server timeline.
fn wan_report() -> RunReport {
    let mut direct = scenario(
        "direct",
        "driver → server",
        &[Duration::from_micros(70); 30],
    );
    diagnose(&mut direct, "nagle_wwr_client_fixed.pcap");
    let mut wan = scenario(
        "wan:30ms",
        "driver → proxy (30 ms RTT) → server",
        &[Duration::from_millis(72); 30],
    );
    diagnose(&mut wan, "nagle_wwr_client_wan30ms.pcap");
    let settings = RunSettings {
        command: "run".into(),
        target: "127.0.0.1:9000".into(),
        script: "http-post".into(),
        script_digest: None,
        server: None,
        scenarios: vec!["direct".into(), "wan:30ms".into()],
        requests: 30,
        repeat: 1,
        connections: 1,
        pipeline: 1,
        output_dir: "tcpdoctor-run".into(),
    };
    let mut r = RunReport::new(settings, vec![direct, wan]);
    r.comparisons.push(Comparison::of(
        "wan:30ms against direct",
        ("direct", &r.scenarios[0].figures),
        ("wan:30ms", &r.scenarios[1].figures),
    ));
    r.gate(&[], &[], false);
    r
}

/// Writes the page, checks the DOM Chromium built from it, and takes the screenshots.
/// Returns the DOM, or None when there is no Chromium (and that is allowed).
fn render_in_chromium(name: &str, report: &RunReport) -> Option<String> {
    let html = render_html(report);
    std::fs::create_dir_all(OUT_DIR).expect("output dir");
    let page = Path::new(OUT_DIR).join(format!("{name}.html"));
    std::fs::write(&page, &html).expect("write page");
    let Some(bin) = chromium() else {
        let required = std::env::var_os("TCPDOCTOR_REQUIRE_CHROMIUM").is_some();
        common::skipped(
            name,
            &format!(
                "no chromium on PATH (set TCPDOCTOR_CHROMIUM); the page is at {}",
                page.display()
            ),
        );
        assert!(
            !required,
            "TCPDOCTOR_REQUIRE_CHROMIUM is set but chromium was not found"
        );
        return None;
    };
    let dom = run_chromium(&bin, &["--dump-dom".to_string()], &page);
    let text = String::from_utf8_lossy(&dom.stdout).into_owned();
    assert!(
        dom.status.success() && text.contains("</html>"),
        "chromium --dump-dom failed ({:?}): {}",
        dom.status,
        String::from_utf8_lossy(&dom.stderr)
    );
    assert!(!text.contains("<script"), "a script element in the DOM");
    for (suffix, size) in [("", "1200,3000"), ("-full", "1200,7000")] {
        let shot = Path::new(OUT_DIR).join(format!("{name}{suffix}.png"));
        let _ = std::fs::remove_file(&shot);
        let out = run_chromium(
            &bin,
            &[
                format!("--screenshot={}", shot.display()),
                format!("--window-size={size}"),
            ],
            &page,
        );
        let len = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
        assert!(
            out.status.success() && len > 20_000,
            "screenshot {} ({len} bytes, {:?}): {}",
            shot.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("screenshot: {}", shot.display());
    }
    Some(text)
}

#[test]
fn chromium_renders_the_demo_report() {
    let Some(text) = render_in_chromium("report", &report()) else {
        return;
    };
    // The browser parsed what we meant: every chart an <svg>, the hostile name as text.
    let svgs = text.matches("<svg").count();
    assert_eq!(
        svgs,
        3 * 2 + 1 + 2,
        "3 histograms (each for a wide page and a phone), 1 timeline, 2 chunk charts"
    );
    assert!(text.matches("<rect class=\"bar").count() >= 5);
    assert!(text.contains("42.6 ms of silence"));
    assert!(text.contains("delayed ACK: the client held it 42.6 ms"));
    assert!(text.contains("frame.number in {25, 26, 27}"));
    assert!(text.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(text.contains("FAILED"));
}

#[test]
fn chromium_renders_a_run_over_a_wan_path() {
    let r = wan_report();
    let nagle = r.scenarios[1]
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::NagleDelayedAck)
        .expect("the 30 ms capture shows nagle_delayed_ack");
    let frames: Vec<String> = nagle
        .evidence
        .frames
        .iter()
        .map(|n| n.to_string())
        .collect();
    let filter = format!("frame.number in {{{}}}", frames.join(", "));
    let Some(text) = render_in_chromium("run-wan", &r) else {
        return;
    };
    assert_eq!(
        text.matches("<svg").count(),
        2 * 2 + 1,
        "2 histograms (each for a wide page and a phone), 1 timeline"
    );
    assert!(text.contains(&filter), "{filter}");
    assert!(text.contains("of silence"));
    assert!(
        text.contains("NO GATE") && !text.contains("GATE PASSED"),
        "no --check and no --fail-on: the badge says there was no gate"
    );
    assert!(
        !text.contains("id=\"chunks\""),
        "no chunk view was measured"
    );
}

/// The report `run` gives with its default scenarios and a three-step script, at its widest:
/// every row of the side-by-side table filled (steps, chunks, CPU, captures with long paths,
/// several finding kinds), a gate of two checks and `--fail-on any`, and a baseline whose rows
/// moved within the noise (`better: null`).
fn four_scenario_report() -> RunReport {
    let ms = |v: u64| Duration::from_micros(v);
    let specs = [
        (
            "direct",
            "driver → server",
            44_100,
            "nagle_perline_server.pcap",
        ),
        (
            "proxy",
            "driver → proxy (Nagle off, chunks as read) → server",
            44_000,
            "nagle_perline_server.pcap",
        ),
        (
            "proxy-nagle",
            "driver → proxy (Nagle ON towards the driver, chunks as read) → server",
            44_000,
            "hop_splits_whole_responses.pcap",
        ),
        (
            "wan:15ms",
            "driver → proxy (+15.0 ms each way, round trip +30.0 ms) → server",
            72_500,
            "nagle_wwr_client_wan30ms.pcap",
        ),
    ];
    let mut scenarios = Vec::new();
    for (name, path, us, capture) in specs {
        let mut lat = vec![ms(us); 190];
        lat.extend([ms(us * 3); 10]);
        let mut s = scenario(name, path, &lat);
        diagnose(&mut s, capture);
        if let Some(c) = &mut s.capture {
            c.file = format!(
                "/tmp/tcpdoctor-run.4194304/{}.lo.pcap",
                name.replace(':', "_")
            );
            c.source = "AF_PACKET on lo (1,204 packets, 0 dropped)".into();
        }
        s.figures.steps = ["login", "get-user-profile", "logout"]
            .iter()
            .map(|step| StepFigures {
                name: step.to_string(),
                mean_ms: us as f64 / 1000.0 + 0.123,
                p50_ms: us as f64 / 1000.0,
                p99_ms: us as f64 / 1000.0 * 3.0 + 0.456,
            })
            .collect();
        if name != "direct" {
            s.chunks = Some(chunks(&[("19", 320), ("3", 40), ("155", 7)]));
            s.figures.set_chunks(367);
        }
        s.server_cpu = Some(ServerCpu::new(0.012, 0.034, 8.8, 200, 3));
        s.figures.server_cpu_per_request_us = Some(230.0);
        s.figures.errors = 2;
        scenarios.push(s);
    }
    let settings = RunSettings {
        command: "run".into(),
        target: "127.0.0.1:7000".into(),
        script: "app-login-profile-logout.toml".into(),
        script_digest: None,
        server: Some("cd /srv/app && exec ./myserver --port 7000 --workers 4".into()),
        scenarios: specs.iter().map(|s| s.0.to_string()).collect(),
        requests: 200,
        repeat: 1,
        connections: 1,
        pipeline: 1,
        output_dir: "/tmp/tcpdoctor-run.4194304".into(),
    };
    let mut r = RunReport::new(settings, scenarios);
    let mut before = r.scenarios[0].figures.clone();
    before.p50_ms *= 1.004;
    let mut cmp = Comparison::of(
        "direct: baseline → now",
        ("before.json", &before),
        ("now", &r.scenarios[0].figures),
    );
    for row in &mut cmp.rows {
        row.better = None; // within the noise: no verdict
    }
    r.comparisons.push(cmp);
    let checks = [
        Check::parse("stalls==0@direct").expect("check"),
        Check::parse("errors<=5").expect("check"),
    ];
    r.gate(&checks, &[], true);
    r
}

/// Measures `page` laid out `width` px wide in Chromium: the page sits in an iframe of that
/// width (headless Chromium will not make a window narrower than 500 px), and a script in
/// the wrapper — never in the report, which has none — reads the layout: how wide the page
/// is, which boxes scroll sideways, which boxes stick out of the page outside any box that
/// scrolls, and every piece of text drawn under 10 px (SVG text scaled as it is drawn).
fn layout_at(bin: &Path, name: &str, html: &str, width: u32) -> serde_json::Value {
    const MEASURE: &str = r#"
var w = document.getElementById('f').contentWindow, d = w.document, de = d.documentElement;
var r = {viewport: w.innerWidth, page_width: de.scrollWidth, scrolls: [], sticks_out: [], small: [], bars_hidden: [], bars: 0};
var all = d.querySelectorAll('body *');
function what(el) { return el.tagName + '.' + (el.getAttribute('class') || '') + ' "' + (el.textContent || '').trim().slice(0, 40) + '"'; }
for (var i = 0; i < all.length; i++) {
  var el = all[i], cs = w.getComputedStyle(el), b = el.getBoundingClientRect();
  if ((cs.overflowX === 'auto' || cs.overflowX === 'scroll') && el.scrollWidth > el.clientWidth + 1)
    r.scrolls.push(what(el) + ' ' + el.scrollWidth + ' > ' + el.clientWidth);
  if (b.width > 0 && b.right > w.innerWidth + 1) {
    var p = el.parentElement, held = false;
    while (p) { var o = w.getComputedStyle(p).overflowX; if (o === 'auto' || o === 'scroll' || o === 'hidden') { held = true; break; } p = p.parentElement; }
    if (!held) r.sticks_out.push(what(el) + ' right ' + Math.round(b.right));
  }
}
var bars = d.querySelectorAll('figure rect.bar');
for (var i = 0; i < bars.length; i++) {
  var b = bars[i].getBoundingClientRect();
  if (b.width === 0 && b.height === 0) continue;
  r.bars++;
  if (b.left < -1 || b.right > w.innerWidth + 1) r.bars_hidden.push(what(bars[i].parentElement.parentElement) + ' bar ' + bars[i].textContent + ' at ' + Math.round(b.left) + '..' + Math.round(b.right));
}
var walk = d.createTreeWalker(d.body, NodeFilter.SHOW_TEXT), n;
while ((n = walk.nextNode())) {
  if (!n.textContent.trim()) continue;
  var el = n.parentElement;
  if (!el.getClientRects().length) continue;
  var px = parseFloat(w.getComputedStyle(el).fontSize), t = el.closest('text');
  if (t && t.getScreenCTM()) px = px * Math.abs(t.getScreenCTM().a);
  if (px < 10) r.small.push(what(el) + ' ' + px.toFixed(1) + ' px');
}
var pre = document.createElement('pre'); pre.id = 'measure'; pre.textContent = JSON.stringify(r);
document.body.appendChild(pre);
"#;
    let attr = html
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let wrapper = format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head><body style=\"margin:0\">\
         <iframe id=\"f\" style=\"border:0;width:{width}px;height:900px\" srcdoc=\"{attr}\">\
         </iframe><script>document.getElementById('f').addEventListener('load', function () \
         {{{MEASURE}}});</script></body></html>"
    );
    let page = Path::new(OUT_DIR).join(format!("{name}-layout-{width}.html"));
    std::fs::write(&page, wrapper).expect("write wrapper");
    let out = run_chromium(
        bin,
        &[
            "--dump-dom".to_string(),
            "--window-size=1500,1000".to_string(),
        ],
        &page,
    );
    let dom = String::from_utf8_lossy(&out.stdout);
    let json = dom
        .split("<pre id=\"measure\">")
        .nth(1)
        .and_then(|t| t.split("</pre>").next())
        .unwrap_or_else(|| panic!("no measurement in the DOM of {}", page.display()))
        .replace("&gt;", ">")
        .replace("&lt;", "<")
        .replace("&quot;", "\"")
        .replace("&amp;", "&");
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

fn list(v: &serde_json::Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {v}"))
        .iter()
        .map(|x| x.as_str().unwrap_or_default().to_string())
        .collect()
}

/// The four-scenario table fits a 1400-px window with no scrollbar anywhere; on a 390-px
/// phone nothing sticks out of the page (the charts and wide tables scroll inside their own
/// box) and no label is drawn under 10 px. The demo's cases, on a phone, are stacked so their
/// diagnosis is never cut off. The gate badge names the gate; a row within the noise reads
/// "no change", never "worse".
#[test]
fn four_scenarios_fit_1400_px_and_a_phone_can_read_every_report() {
    let run = four_scenario_report();
    let html = render_html(&run);
    assert!(html.contains("GATE FAILED"), "stalls==0 fails on direct");
    assert!(html.contains("2 checks, --fail-on any"));
    assert!(html.contains("no change") && !html.contains(">worse<"));
    let Some(bin) = chromium() else {
        let _ = render_in_chromium("four-scenarios", &run);
        return;
    };
    std::fs::create_dir_all(OUT_DIR).expect("output dir");
    let wide = layout_at(&bin, "four-scenarios", &html, 1400);
    assert_eq!(wide["viewport"], 1400, "{wide}");
    assert!(
        wide["page_width"].as_u64() <= Some(1400),
        "the page is wider than the window: {wide}"
    );
    assert!(
        list(&wide, "scrolls").is_empty(),
        "a horizontal scrollbar at 1400 px: {:?}",
        list(&wide, "scrolls")
    );
    assert!(
        list(&wide, "small").is_empty(),
        "{:?}",
        list(&wide, "small")
    );
    for (name, page) in [
        ("four-scenarios", html.clone()),
        ("demo", render_html(&report())),
    ] {
        let phone = layout_at(&bin, name, &page, 390);
        assert_eq!(phone["viewport"], 390, "{phone}");
        assert!(
            phone["page_width"].as_u64() <= Some(390),
            "{name}: the page is wider than the phone: {:?}",
            list(&phone, "sticks_out")
        );
        assert!(
            list(&phone, "sticks_out").is_empty(),
            "{name}: cut off at 390 px: {:?}",
            list(&phone, "sticks_out")
        );
        let small = list(&phone, "small");
        assert!(small.is_empty(), "{name}: text under 10 px: {small:?}");
        // Every bar of every histogram and chunk chart on the screen, not scrolled away (the
        // 40 ms bars sit at the right of a log axis: scrolled off, a stalled scenario looked
        // healthy).
        assert!(
            phone["bars"].as_u64() >= Some(4),
            "{name}: bars drawn: {phone}"
        );
        let hidden = list(&phone, "bars_hidden");
        assert!(
            hidden.is_empty(),
            "{name}: bars off the screen at 390 px: {hidden:?}"
        );
        eprintln!(
            "{name} at 390 px, boxes that scroll: {:?}",
            list(&phone, "scrolls")
        );
    }
    // And the screenshots, for a person to look at.
    let _ = render_in_chromium("four-scenarios", &run);
}
