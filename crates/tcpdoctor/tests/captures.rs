//! Every real capture in `testdata/captures/` and `testdata/public/` against its `.expect` file.
//!
//! The expectations were written from what each specimen did and from the physics, not from
//! tcpdoctor's output. Format, one directive per line (`#` starts a comment):
//! - `must KIND [DIRECTION]` — this finding must be reported (in that direction);
//! - `must_not KIND [DIRECTION]` — this kind must not be reported (in that direction);
//! - `clean` — nothing at all may be reported;
//! - `stalls_at_least N` — a finding named by a `must` line counts at least N stalls (stalled
//!   turns for `nagle_delayed_ack`, timeout stalls for `retransmission_stall`);
//! - `rtt_ms X` — the configured path RTT; a reported `rtt_bound` must measure it within 25%;
//! - `rtt_fix multiplex|pipeline` — a reported `rtt_bound` must advise multiplexing (the client
//!   already spreads its requests over parallel connections) or pipelining on the connection,
//!   and promise less saving than the time its flows covered;
//! - `limiter sender|receiver_window` — a reported `window_limited` must name that limiter;
//! - `hop PORT splits|passes` — the capture holds both legs of a hop listening on PORT: every
//!   Nagle or fragmented-writes finding on it must name the hop, and say that the upstream's
//!   own leg carries whole messages (the hop splits them) or pieces (the hop passes them on);
//! - `hop PORT forwards UPSTREAM_PORT` — the hop on PORT forwarded every piece at once: no
//!   Nagle or fragmented-writes finding is about its leg, and the upstream's `nagle_delayed_ack`
//!   finding says that the hop passes the holds on.

mod common;

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The `.expect` files of our own recordings and of the public captures (`testdata/public/`).
fn expectation_files() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = ["testdata/captures", "testdata/public"]
        .iter()
        .flat_map(|dir| {
            std::fs::read_dir(common::repo().join(dir))
                .unwrap_or_else(|e| panic!("{dir}: {e}"))
                .filter_map(|e| e.ok().map(|e| e.path()))
        })
        .filter(|p| p.extension().is_some_and(|x| x == "expect"))
        .collect();
    v.sort();
    v
}

fn capture_for(expect: &Path) -> PathBuf {
    for ext in ["pcap", "pcapng"] {
        let p = expect.with_extension(ext);
        if p.exists() {
            return p;
        }
    }
    panic!("{} has no capture next to it", expect.display());
}

fn findings(report: &Value) -> Vec<&Value> {
    report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .collect()
}

fn describe(report: &Value) -> String {
    findings(report)
        .iter()
        .map(|f| {
            format!(
                "{} {} — {}",
                f["kind"].as_str().unwrap_or("?"),
                f["direction"].as_str().unwrap_or("?"),
                f["verdict"].as_str().unwrap_or("?")
            )
        })
        .collect::<Vec<_>>()
        .join("\n    ")
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

/// Checks one capture; returns the violated expectations.
fn check(expect: &Path) -> Vec<String> {
    let capture = capture_for(expect);
    let (report, _) = common::analyze_json(&capture);
    let text = std::fs::read_to_string(expect).expect("read .expect");
    let name = capture
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let mut problems = audit_problems(&name, &report);
    let all = findings(&report);
    fn find<'a>(all: &'a [&'a Value], kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        all.iter().copied().filter(move |f| f["kind"] == kind)
    }
    for (lineno, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = format!("{}:{}", expect.display(), lineno + 1);
        match words.as_slice() {
            ["must", kind, dir] => {
                if !find(&all, kind).any(|f| f["direction"] == *dir) {
                    problems.push(format!("{name}: expected {kind} {dir} ({at})"));
                }
            }
            ["must", kind] => {
                if find(&all, kind).next().is_none() {
                    problems.push(format!("{name}: expected {kind} ({at})"));
                }
            }
            ["must_not", kind] => {
                if find(&all, kind).next().is_some() {
                    problems.push(format!("{name}: {kind} must not be reported ({at})"));
                }
            }
            ["must_not", kind, dir] => {
                if find(&all, kind).any(|f| f["direction"] == *dir) {
                    problems.push(format!("{name}: {kind} {dir} must not be reported ({at})"));
                }
            }
            ["severity_at_most", kind, level] => {
                let rank = |s: &str| match s {
                    "info" => 0,
                    "warning" => 1,
                    "critical" => 2,
                    _ => panic!("{at}: severity info|warning|critical, not `{s}`"),
                };
                let most = rank(level);
                for f in find(&all, kind) {
                    let got = f["severity"].as_str().unwrap_or("?");
                    if rank(got) > most {
                        problems.push(format!("{name}: {kind} is {got}, at most {level} ({at})"));
                    }
                }
            }
            ["clean"] => {
                if !all.is_empty() {
                    problems.push(format!("{name}: expected no findings ({at})"));
                }
            }
            ["stalls_at_least", n] => {
                let n: u64 = n.parse().expect("stalls_at_least N");
                let musts: Vec<&str> = text
                    .lines()
                    .filter_map(|l| l.split('#').next()?.trim().strip_prefix("must "))
                    .filter_map(|rest| rest.split_whitespace().next())
                    .collect();
                let got = all
                    .iter()
                    .filter(|f| musts.iter().any(|k| f["kind"] == *k))
                    .flat_map(|f| {
                        let c = &f["evidence"]["counts"];
                        [c["stalled_turns"].as_u64(), c["stalls"].as_u64()]
                    })
                    .flatten()
                    .max()
                    .unwrap_or(0);
                if got < n {
                    problems.push(format!("{name}: {got} stalls, expected ≥ {n} ({at})"));
                }
            }
            ["rtt_ms", x] => {
                let want: f64 = x.parse().expect("rtt_ms X");
                for f in find(&all, "rtt_bound") {
                    let got = f["evidence"]["values"]["rtt_ms"].as_f64().unwrap_or(0.0);
                    if (got - want).abs() > want * 0.25 {
                        problems.push(format!("{name}: RTT {got} ms, expected ≈{want} ({at})"));
                    }
                }
            }
            ["rtt_fix", which] => {
                let (say, not) = match *which {
                    "multiplex" => ("Multiplex the requests", "pipeline (send"),
                    "pipeline" => ("pipeline (send", "Multiplex the requests"),
                    _ => panic!("{at}: rtt_fix multiplex|pipeline"),
                };
                for f in find(&all, "rtt_bound") {
                    let fix = f["fix"].as_str().unwrap_or("");
                    if !fix.contains(say) || fix.contains(not) {
                        problems.push(format!("{name}: rtt_bound's fix is not to {which} ({at})"));
                    }
                    let v = &f["evidence"]["values"];
                    let (saves, elapsed) = (num(&v["pipelining_saves_ms"]), num(&v["elapsed_ms"]));
                    if saves.partial_cmp(&elapsed) != Some(std::cmp::Ordering::Less) {
                        problems.push(format!(
                            "{name}: rtt_bound saves {saves} ms of {elapsed} ms: the first answer \
                             still takes a round trip ({at})"
                        ));
                    }
                }
            }
            ["churn_closed_by", side] => {
                // Rule 5: who sent the first FIN or RST of most short connections, and the
                // wording and fix that follow from it.
                let (verdict_says, fix_starts) = match *side {
                    "server" => ("closed first by the server", "Find out why the server"),
                    "client" => ("A new connection per request:", "Reuse connections"),
                    _ => panic!("{at}: churn_closed_by server|client"),
                };
                let mut seen = false;
                for f in find(&all, "connection_churn") {
                    seen = true;
                    let c = &f["evidence"]["counts"];
                    let short = c["short_connections"].as_u64().unwrap_or(0);
                    let by = c[format!("closed_by_{side}")].as_u64().unwrap_or(0);
                    let verdict = f["verdict"].as_str().unwrap_or("");
                    let fix = f["fix"].as_str().unwrap_or("");
                    if by * 2 <= short
                        || !verdict.contains(verdict_says)
                        || !fix.starts_with(fix_starts)
                    {
                        problems.push(format!(
                            "{name}: connection_churn not told of the {side} closing {by} of \
                             {short}: {verdict} / {fix} ({at})"
                        ));
                    }
                }
                if !seen {
                    problems.push(format!("{name}: no connection_churn to check ({at})"));
                }
            }
            ["limiter", which] => {
                let want = match *which {
                    "receiver_window" => 1,
                    "sender" => 0,
                    _ => panic!("{at}: limiter sender|receiver_window"),
                };
                for f in find(&all, "window_limited") {
                    let got = &f["evidence"]["counts"]["example_limited_by_receiver_window"];
                    if got.as_u64() != Some(want) {
                        problems.push(format!("{name}: limiter is not {which} ({at})"));
                    }
                }
            }
            ["hop", port, "forwards", upstream] => {
                let nagle_kinds = ["nagle_delayed_ack", "nagle_round_trip", "fragmented_writes"];
                for f in all.iter().filter(|f| {
                    f["server"]
                        .as_str()
                        .is_some_and(|s| s.ends_with(&format!(":{port}")))
                        && nagle_kinds.iter().any(|k| f["kind"] == *k)
                }) {
                    problems.push(format!(
                        "{name}: {} names the hop on {port}, which forwarded at once ({at})",
                        f["kind"]
                    ));
                }
                let passed = all.iter().any(|f| {
                    f["kind"] == "nagle_delayed_ack"
                        && f["server"]
                            .as_str()
                            .is_some_and(|s| s.ends_with(&format!(":{upstream}")))
                        && f["evidence"]["facts"]
                            .to_string()
                            .contains("the hop passes these holds on")
                });
                if !passed {
                    problems.push(format!(
                        "{name}: no nagle_delayed_ack on {upstream} saying the hop passed the \
                         holds on ({at})"
                    ));
                }
            }
            ["hop", port, how] => {
                let said = match *how {
                    "splits" => "the hop splits them",
                    "passes" => "the hop passes every piece on",
                    _ => panic!("{at}: hop PORT splits|passes"),
                };
                let on_hop: Vec<&Value> = all
                    .iter()
                    .copied()
                    .filter(|f| {
                        f["server"]
                            .as_str()
                            .is_some_and(|s| s.ends_with(&format!(":{port}")))
                            && f["direction"] == "server_to_client"
                            && ["nagle_delayed_ack", "nagle_round_trip", "fragmented_writes"]
                                .iter()
                                .any(|k| f["kind"] == *k)
                    })
                    .collect();
                if on_hop.is_empty() {
                    problems.push(format!(
                        "{name}: no finding on the hop's port {port} ({at})"
                    ));
                }
                for f in on_hop {
                    let facts = f["evidence"]["facts"].to_string();
                    let verdict = f["verdict"].as_str().unwrap_or("");
                    if !facts.contains(said) || verdict.contains("the server writes") {
                        problems.push(format!(
                            "{name}: {} does not name the hop on {port} as `{said}` ({at})",
                            f["kind"]
                        ));
                    }
                }
            }
            _ => panic!("{at}: unknown directive `{line}`"),
        }
    }
    if !problems.is_empty() {
        problems.push(format!("  {name} reported:\n    {}", describe(&report)));
    }
    problems
}

/// The evidence audit ran, withdrew nothing, and passed every claim; every Nagle and
/// `rtt_bound` finding states at least one claim.
fn audit_problems(name: &str, report: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    for w in report["withdrawn"].as_array().into_iter().flatten() {
        problems.push(format!(
            "{name}: the evidence audit withdrew {} {}: {}",
            w["kind"], w["direction"], w["reasons"]
        ));
    }
    let claims: u64 = findings(report)
        .iter()
        .map(|f| {
            let n = f["evidence"]["claims"]
                .as_array()
                .map_or(0, |c| c.len() as u64);
            let claimed = ["nagle_delayed_ack", "nagle_round_trip", "rtt_bound"];
            if claimed.iter().any(|k| f["kind"] == *k) && n == 0 {
                problems.push(format!("{name}: {} states no claim to audit", f["kind"]));
            }
            n
        })
        .sum();
    let audit = &report["captures"][0]["audit"];
    if !findings(report).is_empty() && audit.is_null() {
        problems.push(format!("{name}: the evidence audit did not run"));
    }
    let passed = audit["claims_passed"].as_u64().unwrap_or(0);
    if passed != claims {
        problems.push(format!(
            "{name}: {passed} of {claims} claims passed the audit"
        ));
    }
    problems
}

#[test]
fn every_capture_meets_its_expectations() {
    let files = expectation_files();
    assert!(!files.is_empty(), "no .expect files in testdata/captures");
    let problems: Vec<String> = files.iter().flat_map(|f| check(f)).collect();
    assert!(
        problems.is_empty(),
        "{} of {} captures disagree:\n{}",
        problems.iter().filter(|p| !p.starts_with("  ")).count(),
        files.len(),
        problems.join("\n")
    );
}

/// Every capture file under `testdata/` (with or without an `.expect`; `malformed/` holds
/// files that are not captures): the evidence audit withdraws nothing and every claim it
/// checks holds. The only refusal allowed is a capture with no TCP in it.
#[test]
fn the_evidence_audit_holds_on_every_capture_in_the_repo() {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                if !p.ends_with("malformed") {
                    walk(&p, out);
                }
            } else if [".pcap", ".pcapng", ".pcap.gz", ".pcapng.gz", ".cap"]
                .iter()
                .any(|x| p.to_string_lossy().ends_with(x))
            {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(&common::repo().join("testdata"), &mut files);
    files.sort();
    assert!(
        files.len() >= 90,
        "only {} captures under testdata/",
        files.len()
    );
    let mut problems = Vec::new();
    let mut audited = 0;
    for file in &files {
        let name = file.display().to_string();
        let out = common::tcpdoctor(&["analyze", "--format", "json", &name]);
        if out.status.code() == Some(2)
            && String::from_utf8_lossy(&out.stderr).contains("no TCP packets in this capture")
        {
            continue;
        }
        if out.status.code() != Some(0) {
            problems.push(format!("{name}: exit {:?}", out.status.code()));
            continue;
        }
        let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        audited += report["captures"][0]["audit"]["claims_passed"]
            .as_u64()
            .unwrap_or(0);
        problems.extend(audit_problems(&name, &report));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        audited > 0,
        "no claim was audited in {} captures",
        files.len()
    );
}

/// Each detector has at least one capture that must trigger it and one that must not.
#[test]
fn every_detector_has_a_positive_and_a_negative_capture() {
    let kinds = [
        "nagle_delayed_ack",
        "nagle_round_trip",
        "fragmented_writes",
        "rtt_bound",
        "connection_churn",
        "zero_window",
        "retransmission_stall",
        "window_limited",
        "unbatched_messages",
    ];
    let texts: Vec<String> = expectation_files()
        .iter()
        .map(|f| std::fs::read_to_string(f).expect("read"))
        .collect();
    for kind in kinds {
        let positive = texts.iter().any(|t| {
            t.lines().any(|l| {
                let l = l.split('#').next().unwrap_or("").trim();
                l == format!("must {kind}") || l.starts_with(&format!("must {kind} "))
            })
        });
        let negative = texts.iter().any(|t| {
            t.lines().any(|l| {
                let l = l.split('#').next().unwrap_or("").trim();
                l == format!("must_not {kind}") || l == "clean"
            })
        });
        assert!(positive, "no capture must trigger {kind}");
        assert!(negative, "no capture must stay clear of {kind}");
    }
}
