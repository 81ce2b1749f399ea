//! Server mode: one run is `tcpdoctor run` (this same binary) against one side's server,
//! untraced, with the same script, scenarios and load for both sides; its JSON report gives
//! the figures (per scenario: p50, p99, mean, throughput, server CPU per request) and the
//! findings of each scenario's capture.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::Value;
use tcpdoctor_core::ab::{Better, Brief, FigureSpec, Outcome};

use super::watch::{watch, Stop};
use super::{RunResult, WhyRun};

/// The figures each scenario gives: (metric, JSON field, direction, unit).
const METRICS: [(&str, &str, Better, &str); 5] = [
    ("p50", "p50_ms", Better::Lower, "ms"),
    ("p99", "p99_ms", Better::Lower, "ms"),
    ("mean", "mean_ms", Better::Lower, "ms"),
    ("throughput", "throughput_rps", Better::Higher, "1/s"),
    (
        "server CPU/request",
        "server_cpu_per_request_us",
        Better::Lower,
        "µs",
    ),
];

/// The figure specs for `scenarios`, in table order.
pub fn figure_specs(scenarios: &[String]) -> Vec<FigureSpec> {
    let mut out = Vec::new();
    for s in scenarios {
        for (metric, _, better, unit) in METRICS {
            out.push(FigureSpec {
                name: format!("{metric} {s}"),
                better,
                unit: Some(unit.to_string()),
            });
        }
    }
    out
}

/// Before any round: `tcpdoctor run --dry-run` with the same arguments validates the script,
/// its parameters and the scenarios as `run` itself would (exit 2 with its message), so a bad
/// `--preset` or script is one clear error, not a failure in every round.
pub fn check(server: &str, run_args: &[String]) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("finding this tcpdoctor's own binary")?;
    let out = Command::new(&exe)
        .args(["run", "--dry-run", "--server", server])
        .args(run_args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("starting {} run --dry-run", exe.display()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let said = err.trim().trim_start_matches("tcpdoctor: error: ");
        anyhow::bail!("{said}");
    }
    Ok(())
}

/// Runs `tcpdoctor run ARGS --server SERVER --out DIR` once.
pub fn run_once(
    server: &str,
    run_args: &[String],
    dir: &Path,
    hang_after: Duration,
) -> anyhow::Result<RunResult> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let err_path = dir.join("run.err");
    let mut args: Vec<std::ffi::OsString> = [
        "run",
        "--format",
        "json",
        "--no-trace",
        "--server",
        server,
        "--out",
    ]
    .iter()
    .map(Into::into)
    .collect();
    args.push(dir.into());
    args.extend(run_args.iter().map(Into::into));
    let (w, json) = run_self(&args, &err_path, hang_after)?;
    let wall_s = w.wall.as_secs_f64();
    if let Some(sockets) = w.hung {
        return Ok(RunResult {
            outcome: Outcome::Hang {
                after_s: hang_after.as_secs_f64(),
                sockets,
            },
            wall_s,
            figures: BTreeMap::new(),
            why: Vec::new(),
            leftovers: w.leftovers,
        });
    }
    let status = w.status.expect("ended by itself");
    let leftovers = w.leftovers;
    let failed = |reason: String| RunResult {
        outcome: Outcome::Failed { reason },
        wall_s,
        figures: BTreeMap::new(),
        why: Vec::new(),
        leftovers: leftovers.clone(),
    };
    let report: Value = match serde_json::from_str(&json) {
        Ok(v) => v,
        Err(_) => {
            let tail = last_line(&err_path);
            return Ok(failed(format!("`tcpdoctor run` {status}: {tail}")));
        }
    };
    let mut figures = BTreeMap::new();
    let mut why = Vec::new();
    let mut problems = Vec::new();
    for s in report["scenarios"].as_array().into_iter().flatten() {
        let name = s["name"].as_str().unwrap_or("?");
        let f = &s["figures"];
        for key in ["errors", "timeouts"] {
            if let Some(n) = f[key].as_u64().filter(|&n| n > 0) {
                problems.push(format!("{n} {key} in {name}"));
            }
        }
        for (metric, field, _, _) in METRICS {
            if let Some(v) = f[field].as_f64() {
                figures.insert(format!("{metric} {name}"), v);
            }
        }
        let findings: Vec<Brief> = s["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| serde_json::from_value(brief_json(x)).ok())
            .collect();
        let summary = &s["capture"]["summary"];
        if let Some(file) = s["capture"]["file"].as_str() {
            why.push(WhyRun {
                scenario: Some(name.to_string()),
                source: file.to_string(),
                findings,
                flows: summary["flows"].as_u64().unwrap_or(0),
                // The driver's own count: the requests, whatever the turns were.
                exchanges: f["exchanges"].as_u64().unwrap_or(0),
                tcp_segments: summary["tcp_segments"].as_u64().unwrap_or(0),
            });
        }
    }
    let outcome = if !problems.is_empty() {
        Outcome::Failed {
            reason: format!("exchanges failed: {}", problems.join(", ")),
        }
    } else if figures.is_empty() {
        Outcome::Failed {
            reason: format!(
                "`tcpdoctor run` {status} measured nothing: {}",
                last_line(&err_path)
            ),
        }
    } else {
        Outcome::Ok
    };
    Ok(RunResult {
        outcome,
        wall_s,
        figures,
        why,
        leftovers,
    })
}

/// Runs this tcpdoctor binary with `args`, its stderr to `err_path`, watched for hangs like
/// any measured run (stopped with SIGINT, as a tcpdoctor child cleans up after itself):
/// what the watch saw, and its standard output.
pub(super) fn run_self(
    args: &[std::ffi::OsString],
    err_path: &Path,
    hang_after: Duration,
) -> anyhow::Result<(super::watch::Watched, String)> {
    let exe = std::env::current_exe().context("finding this tcpdoctor's own binary")?;
    let err = std::fs::File::create(err_path)
        .with_context(|| format!("creating {}", err_path.display()))?;
    let started = Instant::now();
    let mut child = {
        use std::os::unix::process::CommandExt;
        Command::new(&exe)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(err)
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {}", exe.display()))?
    };
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let w = watch(
        &mut child,
        started,
        hang_after,
        None,
        Stop::Interrupt(Duration::from_secs(10)),
    )?;
    Ok((w, reader.join().unwrap_or_default()))
}

/// A finding of the run report as [`Brief`] reads it.
fn brief_json(f: &Value) -> Value {
    serde_json::json!({
        "kind": f["kind"],
        "verdict": f["verdict"],
        "time_lost_ms": f["time_lost_ms"],
        "frames": f["evidence"]["frames"],
        "file": f["file"],
        "fix": f["fix"],
    })
}

pub(super) fn last_line(path: &Path) -> String {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| {
            t.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| format!("(nothing in {})", path.display()))
}
