//! Stream mode: one run is `tcpdoctor stream` (this same binary) against one side's server,
//! untraced, with the same stream for both sides; its JSON report gives the figures
//! (messages/s, bytes/s, data segments per message, server CPU per message). After the
//! rounds, one traced run per side gives the calls per message for the side-by-side why.

use std::collections::BTreeMap;
use std::path::Path;

use std::time::Duration;

use serde_json::Value;
use tcpdoctor_core::ab::{Better, FigureSpec, Outcome, StreamSide};

use super::server::{last_line, run_self};
use super::RunResult;

/// The figures a stream run gives: (name, JSON path, direction, unit).
const METRICS: [(&str, &[&str], Better, &str); 4] = [
    ("messages/s", &["messages_per_s"], Better::Higher, "1/s"),
    ("bytes/s", &["bytes_per_s"], Better::Higher, "B/s"),
    (
        "segments/message",
        &["segments", "per_message"],
        Better::Lower,
        "",
    ),
    (
        "server CPU/message",
        &["server_cpu_us_per_message"],
        Better::Lower,
        "µs",
    ),
];

/// The figures of a stream `direction`: to the server, tcpdoctor is the sender and its own
/// segments say nothing of the server (no row).
pub fn figure_specs(direction: &str) -> Vec<FigureSpec> {
    METRICS
        .iter()
        .filter(|(name, ..)| direction == "from-server" || *name != "segments/message")
        .map(|(name, _, better, unit)| FigureSpec {
            name: name.to_string(),
            better: *better,
            unit: (!unit.is_empty()).then(|| unit.to_string()),
        })
        .collect()
}

fn at<'a>(v: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(v, |v, k| &v[*k])
}

/// Runs `tcpdoctor stream --server SERVER ARGS` once, its JSON to `json`; `traced` keeps
/// the tracer on (the why run).
fn stream_once(
    server: &str,
    args: &[String],
    json: &Path,
    hang_after: Duration,
    traced: bool,
) -> anyhow::Result<(RunResult, Option<Value>)> {
    let err_path = json.with_extension("err");
    let mut argv: Vec<std::ffi::OsString> = [
        "stream",
        "--format",
        "json",
        "--server",
        server,
        "--server-log",
    ]
    .iter()
    .map(Into::into)
    .collect();
    argv.push(json.with_extension("server.log").into());
    if !traced {
        argv.push("--no-trace".into());
    }
    argv.extend(args.iter().map(Into::into));
    let (w, text) = run_self(&argv, &err_path, hang_after)?;
    let _ = std::fs::write(json, &text);
    let wall_s = w.wall.as_secs_f64();
    let mut result = RunResult {
        outcome: Outcome::Ok,
        wall_s,
        figures: BTreeMap::new(),
        why: Vec::new(),
        leftovers: w.leftovers,
    };
    if let Some(sockets) = w.hung {
        result.outcome = Outcome::Hang {
            after_s: hang_after.as_secs_f64(),
            sockets,
        };
        return Ok((result, None));
    }
    let status = w.status.expect("ended by itself");
    let report: Option<Value> = serde_json::from_str(&text).ok();
    match (&report, status.success()) {
        (Some(r), true) => {
            for (name, path, _, _) in METRICS {
                if let Some(v) = at(r, path).as_f64() {
                    result.figures.insert(name.to_string(), v);
                }
            }
        }
        _ => {
            result.outcome = Outcome::Failed {
                reason: format!("`tcpdoctor stream` {status}: {}", last_line(&err_path)),
            }
        }
    }
    Ok((result, report))
}

pub fn run_once(
    server: &str,
    args: &[String],
    dir: &Path,
    tag: &str,
    hang_after: Duration,
) -> anyhow::Result<RunResult> {
    Ok(stream_once(
        server,
        args,
        &dir.join(format!("{tag}.json")),
        hang_after,
        false,
    )?
    .0)
}

/// The traced run of one side for the why, or why it gave nothing.
pub fn why_once(
    server: &str,
    args: &[String],
    json: &Path,
    hang_after: Duration,
) -> anyhow::Result<Result<StreamSide, String>> {
    let (result, report) = stream_once(server, args, json, hang_after, true)?;
    Ok(match (result.outcome, report) {
        (Outcome::Ok, Some(r)) => Ok(StreamSide {
            source: json.display().to_string(),
            family: r["calls"]["family"].as_str().map(str::to_string),
            calls_per_message: r["calls"]["per_message"].as_f64(),
            reading: r["reading"].as_str().map(str::to_string),
            calls_unknown: r["calls_unknown"].as_str().map(str::to_string),
        }),
        (Outcome::Failed { reason }, _) => Err(reason),
        (Outcome::Hang { after_s, .. }, _) => Err(format!("no progress for {after_s} s")),
        (Outcome::Ok, None) => Err("no report".into()),
    })
}
