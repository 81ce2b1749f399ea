//! What a newcomer meets first: help that points to the right schema and says how long the
//! demo takes, errors that say what is missing (a duration's unit, a script), and the demo's
//! own report read as a person reads it — counts as counts, every finding by its kind.

mod common;

use common::run::scratch;
use common::tcpdoctor;

fn text(out: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every flag that takes a duration, given a bare `15`: exit 2 with "has no unit" and the
/// spelling to use, never the old "unknown unit ``".
#[test]
fn a_duration_without_a_unit_says_so_on_every_flag() {
    let t = ["--target", "127.0.0.1:9"];
    let runs: Vec<Vec<&str>> = vec![
        [
            &["bench"][..],
            &t,
            &["--preset", "echo", "--duration", "15"],
        ]
        .concat(),
        [&["bench"][..], &t, &["--preset", "echo", "--timeout", "15"]].concat(),
        [&["bench"][..], &t, &["--preset", "echo", "--warmup", "15"]].concat(),
        [
            &["bench"][..],
            &t,
            &["--preset", "echo", "--hang-after", "15"],
        ]
        .concat(),
        [&["run"][..], &t, &["--preset", "echo", "--timeout", "15"]].concat(),
        [
            &["run"][..],
            &t,
            &["--preset", "echo", "--ready-timeout", "15"],
        ]
        .concat(),
        [
            &["run"][..],
            &t,
            &["--preset", "echo", "--scenarios", "wan:15"],
        ]
        .concat(),
        [&["run"][..], &t, &["--preset", "echo", "--check", "p99<15"]].concat(),
        vec![
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            "127.0.0.1:9",
            "--delay",
            "15",
        ],
        vec![
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            "127.0.0.1:9",
            "--jitter",
            "15",
        ],
        vec!["specimen", "--idle-timeout", "15"],
        vec![
            "capture",
            "--duration",
            "15",
            "-w",
            "/nonexistent-dir/x.pcap",
        ],
    ];
    for args in runs {
        let out = tcpdoctor(&args);
        let (_, err) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("`15` has no unit: write `15s`"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn bench_without_a_script_names_the_presets() {
    let out = tcpdoctor(&["bench", "--target", "127.0.0.1:9"]);
    let (_, err) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--script FILE"), "{err}");
    assert!(
        err.contains("--preset NAME (built in: echo, echo-line, resp, http1, memcache, line)"),
        "{err}"
    );
}

#[test]
fn run_and_demo_help_point_to_the_run_schema_and_demo_says_how_long() {
    for cmd in ["run", "demo"] {
        let (help, _) = text(&tcpdoctor(&[cmd, "--help"]));
        assert!(
            help.contains("schema/run-report.schema.json"),
            "{cmd}: {help}"
        );
        assert!(
            !help.contains("analyze-report.schema.json"),
            "{cmd} --help names the analyze schema: {help}"
        );
    }
    let (help, _) = text(&tcpdoctor(&["demo", "--help"]));
    assert!(help.contains("about 12 s"), "{help}");
    let (short, _) = text(&tcpdoctor(&["demo", "-h"]));
    assert!(short.contains("about 12 s"), "{short}");
}

/// The demo as a newcomer reads it: a header with the cases, the exchanges of each and the
/// time; each case's finding named by the kind `--fail-on` takes, with every other finding
/// listed; counts that print as counts. Its saved JSON has integer counts.
#[test]
fn the_demo_report_reads_right() {
    let dir = scratch("demo-text");
    let json = dir.join("demo.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(["demo", "--out"])
        .arg(&dir)
        .arg("--save")
        .arg(&json)
        .output()
        .expect("run the demo");
    let (report, err) = text(&out);
    if common::wan_unavailable("demo text", &format!("{err} {report}")) {
        return;
    }
    assert_eq!(out.status.code(), Some(0), "{err}\n{report}");
    let mut lines = report.lines();
    assert_eq!(
        lines.next(),
        Some(
            "tcpdoctor demo: 6 cases, each a scenario and its fixed twin, on built-in \
             specimens on 127.0.0.1"
        ),
        "{report}"
    );
    let second = lines.next().unwrap_or_default();
    assert!(
        second.starts_with(
            "exchanges per scenario, case by case: 40, 40, 40, 30, 100, 20; over 1 connection; "
        ) && second.ends_with(" s in all"),
        "{second}"
    );
    for kind in ["nagle_delayed_ack", "rtt_bound", "busy_poll"] {
        assert!(
            report.contains(&format!("   diagnosis ({kind}): ")),
            "{kind}: {report}"
        );
    }
    assert!(
        report.contains("   also found in per-line-server:\n     fragmented_writes ("),
        "every finding of a case is listed: {report}"
    );
    for line in report.lines() {
        let t = line.trim_start();
        if t.starts_with("stalls") || t.starts_with("errors") {
            assert!(
                !t.contains(".0") && !t.contains("0.000"),
                "a count printed as a float: {line}"
            );
        }
    }
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("--save wrote")).expect("json");
    common::validate_with("run-report.schema.json", &v);
    assert!(v["elapsed_s"].as_f64().is_some_and(|t| t > 0.0));
    assert_eq!(v["cases"][3]["requests"], 30);
    for cmp in v["comparisons"].as_array().expect("comparisons") {
        for row in cmp["rows"].as_array().expect("rows") {
            if row["metric"] == "errors" || row["metric"] == "stalls" {
                assert!(row["before"].is_u64() && row["after"].is_u64(), "{row}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
