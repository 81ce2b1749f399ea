//! `tcpdoctor demo`: every pathology of PHYSICS.md reproduced on this machine with the
//! built-in specimens, diagnosed, and fixed — nothing to install.
//!
//! Each case starts a specimen server (this binary, `tcpdoctor specimen …`, as a subprocess in
//! its own process group, ready when it prints `listening ADDR`), runs the scenario that shows
//! the pathology, then its fixed twin, and checks that the expected finding is named in the
//! first and not in the second.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use tcpdoctor_core::impair::ChunkMode;
use tcpdoctor_core::report::FindingKind;
use tcpdoctor_core::run::{Comparison, DemoCase, ScenarioResult};
use tcpdoctor_core::script::Script;

use super::scenario::{self, Driver, Hop, Path as ScenarioPath};
use super::server::Server;
use super::Plan;
use crate::bench::SplitWrites;

/// A server, a scenario, and the scenario's fixed twin.
struct Case {
    title: &'static str,
    setup: &'static str,
    expected: FindingKind,
    /// `tcpdoctor specimen` arguments of the server before and after the fix.
    server: &'static [&'static str],
    fixed_server: Option<&'static [&'static str]>,
    script: Script,
    requests: u64,
    before: ScenarioPath,
    after: ScenarioPath,
    /// What the twin changed.
    change: &'static str,
    /// Both scenarios over this real path (`wan:…`): the specimen runs at its far end.
    wan: Option<&'static str>,
}

fn whole() -> Driver {
    Driver {
        pipeline: 1,
        nagle: false,
        split: SplitWrites::Whole,
        rate: None,
    }
}

/// 100 requests a second: the client's ACK of each reply rides on its next request, 10 ms
/// later, so a server that waits for its queue to empty spins for those 10 ms. (At 200 a
/// second a loaded 2-core machine let answers take longer than the 5 ms between requests:
/// the server then always owed one, and no waiting time was left to see the spin in.)
fn paced() -> Driver {
    Driver {
        rate: Some(100.0),
        ..whole()
    }
}

fn path(name: &str, describe: &str, hop: Option<Hop>, driver: Driver) -> ScenarioPath {
    ScenarioPath {
        name: name.into(),
        describe: describe.into(),
        definition: name.into(),
        hop,
        driver,
    }
}

fn listing() -> anyhow::Result<Script> {
    Ok(Script::preset(
        "line",
        &[
            ("request".into(), "LIST".into()),
            ("terminator".into(), "\\n".into()),
            ("until_line".into(), "^\\.\\r?$".into()),
        ],
    )?)
}

fn cases() -> anyhow::Result<Vec<Case>> {
    let echo = Script::preset("echo", &[("size".into(), "64".into())])?;
    let middlebox = |nagle: bool| Hop {
        nagle_to_driver: nagle,
        s2c_chunks: ChunkMode::Split(64),
        delay: Duration::ZERO,
    };
    Ok(vec![
        Case {
            title: "1. A per-line server with Nagle on",
            setup: "a line server writes each reply line with its own write(2), Nagle on \
                    (no TCP_NODELAY); the driver connects directly",
            expected: FindingKind::NagleDelayedAck,
            server: &["--protocol", "line", "--writes", "per-line"],
            fixed_server: Some(&["--protocol", "line", "--writes", "whole"]),
            script: listing()?,
            requests: 40,
            before: path(
                "per-line-server",
                "driver → server (per-line writes)",
                None,
                whole(),
            ),
            after: path(
                "per-line-fixed",
                "driver → server (whole replies)",
                None,
                whole(),
            ),
            change: "the server builds each reply and writes it once",
            wan: None,
        },
        Case {
            title: "2. A Nagle middlebox in front of a healthy server",
            setup: "the server writes whole replies with TCP_NODELAY; a hop re-emits them in \
                    64-byte writes with Nagle on towards the client",
            expected: FindingKind::NagleDelayedAck,
            server: &[
                "--protocol",
                "line",
                "--writes",
                "whole",
                "--nodelay",
                "--lines",
                "8",
            ],
            fixed_server: None,
            script: listing()?,
            requests: 40,
            before: path(
                "nagle-middlebox",
                "driver → hop (64-byte writes, Nagle ON) → server",
                Some(middlebox(true)),
                whole(),
            ),
            after: path(
                "middlebox-nodelay",
                "driver → hop (64-byte writes, TCP_NODELAY) → server",
                Some(middlebox(false)),
                whole(),
            ),
            change: "the hop sets TCP_NODELAY on its client-facing socket",
            wan: None,
        },
        Case {
            title: "3. A client that writes each request in two pieces",
            setup: "the client writes the 4-byte length, then the body, with Nagle on; the \
                    server answers only a whole request",
            expected: FindingKind::NagleDelayedAck,
            server: &["--protocol", "length-prefixed"],
            fixed_server: None,
            script: echo.clone(),
            requests: 40,
            before: path(
                "write-write-read",
                "driver (header, then body; Nagle on) → server",
                None,
                Driver {
                    pipeline: 1,
                    nagle: true,
                    split: SplitWrites::Header,
                    rate: None,
                },
            ),
            after: path(
                "one-write",
                "driver (one write per request; Nagle on) → server",
                None,
                Driver {
                    pipeline: 1,
                    nagle: true,
                    split: SplitWrites::Whole,
                    rate: None,
                },
            ),
            change: "the client writes each request with one call",
            wan: None,
        },
        Case {
            title: "4. One round trip per command under 10 ms of delay each way",
            setup: "a healthy server 20 ms of round trip away; the client waits for each \
                    reply before sending the next request",
            expected: FindingKind::RttBound,
            server: &["--protocol", "line", "--writes", "whole", "--nodelay"],
            fixed_server: None,
            script: listing()?,
            requests: 30,
            before: path(
                "round-trip-bound",
                "driver → a real path (wan:10ms: 10 ms each way) → server, one request at a time",
                None,
                whole(),
            ),
            after: path(
                "pipelined",
                "driver → a real path (wan:10ms) → server, 10 requests in flight",
                None,
                Driver {
                    pipeline: 10,
                    nagle: false,
                    split: SplitWrites::Whole,
                    rate: None,
                },
            ),
            change: "the client pipelines: 10 requests in flight (what the initial congestion window carries in one round trip), replies read in order",
            wan: Some("wan:10ms"),
        },
        Case {
            title: "5. A server that spins on its send queue",
            setup: "after each reply the server polls SIOCOUTQ until its send queue is empty, \
                    as busy event loops do",
            expected: FindingKind::BusyPoll,
            server: &["--protocol", "length-prefixed", "--drain", "spin"],
            fixed_server: Some(&["--protocol", "length-prefixed", "--drain", "none"]),
            script: echo,
            requests: 100,
            before: path(
                "busy-poll",
                "driver (100 req/s) → server (spins after each reply)",
                None,
                paced(),
            ),
            after: path(
                "no-spin",
                "driver (100 req/s) → server (trusts the kernel)",
                None,
                paced(),
            ),
            change: "the server writes and moves on (it would wait for EPOLLOUT if the queue \
                     were full)",
            wan: None,
        },
        Case {
            title: "6. The per-line server 15 ms away",
            setup: "the Nagle-on per-line server of case 1 at the far end of a real 15 ms path \
                    (kernel TCP at both ends): each reply's rest waits for the client's delayed \
                    ACK, which takes a round trip to arrive — ato + 2 RTT per exchange, a cost \
                    only a real path shows",
            expected: FindingKind::NagleDelayedAck,
            server: &["--protocol", "line", "--writes", "per-line"],
            fixed_server: Some(&["--protocol", "line", "--writes", "whole"]),
            script: listing()?,
            requests: 20,
            before: path(
                "per-line-15ms-away",
                "driver → a real path (wan:15ms) → server (per-line writes)",
                None,
                whole(),
            ),
            after: path(
                "whole-15ms-away",
                "driver → a real path (wan:15ms) → server (whole replies)",
                None,
                whole(),
            ),
            change: "the server builds each reply and writes it once: one round trip per \
                     exchange",
            wan: Some("wan:15ms"),
        },
    ])
}

/// A port for a specimen at the far end of a path (whose namespace has nothing listening yet).
fn free_port() -> anyhow::Result<SocketAddr> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("choosing a port")?;
    Ok(l.local_addr()?)
}

/// The shell command that starts a specimen on `addr` (for the far end of a path).
fn specimen_command(args: &[&str], addr: SocketAddr) -> anyhow::Result<String> {
    let exe = std::env::current_exe().context("finding the tcpdoctor binary")?;
    Ok(format!(
        "exec '{}' specimen --idle-timeout 120s --listen {addr} {}",
        exe.display(),
        args.join(" ")
    ))
}

/// Starts a specimen and waits for its readiness line.
fn specimen(args: &[&str], out_dir: &Path, name: &str) -> anyhow::Result<(Server, SocketAddr)> {
    let log = out_dir.join(format!("{name}.server.log"));
    let mut words: Vec<String> = vec!["specimen".into(), "--idle-timeout".into(), "120s".into()];
    words.extend(args.iter().map(|a| a.to_string()));
    let mut server = Server::start_self(&words, &log, true)?;
    let start = Instant::now();
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(addr) = text
            .lines()
            .find_map(|l| l.strip_prefix("listening "))
            .and_then(|a| a.trim().parse().ok())
        {
            return Ok((server, addr));
        }
        if !server.running() || start.elapsed() > Duration::from_secs(10) {
            bail!(
                "the specimen `{}` did not start; its output:\n{}",
                server.command,
                super::server::tail(&log)
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// What the demo produced.
pub struct DemoOutcome {
    pub scenarios: Vec<ScenarioResult>,
    pub cases: Vec<DemoCase>,
    pub comparisons: Vec<Comparison>,
    /// The cases a stop signal (Ctrl-C) kept from running, or from finishing.
    pub not_run: Vec<String>,
}

/// Runs every case.
pub fn run(
    rt: &tokio::runtime::Runtime,
    out_dir: &Path,
    live: bool,
    no_capture_reason: &str,
    wan_ok: &Result<(), String>,
) -> anyhow::Result<DemoOutcome> {
    let mut out = DemoOutcome {
        scenarios: Vec::new(),
        cases: Vec::new(),
        comparisons: Vec::new(),
        not_run: Vec::new(),
    };
    for case in cases()? {
        // Ctrl-C: stop where we are (each scenario's server was stopped after it) and
        // report what was measured.
        if crate::capture::stop::interrupted() {
            out.not_run.push(case.title.to_string());
            continue;
        }
        eprintln!("tcpdoctor demo: {}…", case.title);
        let script = Arc::new(case.script);
        let mut results = Vec::new();
        for (i, p) in [&case.before, &case.after].into_iter().enumerate() {
            let args = match (i, case.fixed_server) {
                (1, Some(fixed)) => fixed,
                _ => case.server,
            };
            if let (Some(_), Err(why)) = (case.wan, wan_ok) {
                out.not_run
                    .push(format!("{} (no WAN path here: {why})", case.title));
                results.clear();
                break;
            }
            let (mut server, addr) = match case.wan {
                Some(_) => (None, free_port()?),
                None => {
                    let (s, a) = specimen(args, out_dir, &p.name)?;
                    (Some(s), a)
                }
            };
            let plan = Plan {
                target: crate::proxy::Addr::Tcp(addr),
                script: Arc::clone(&script),
                requests: case.requests,
                repeat: 1,
                connections: 1,
                timeout: Duration::from_secs(5),
                out_dir: out_dir.to_path_buf(),
                no_capture_reason: no_capture_reason.to_string(),
                trace: true,
            };
            let far = match case.wan {
                Some(def) => {
                    let spec = tcpdoctor_core::impair::PathSpec::parse(def)
                        .map_err(|e| anyhow::anyhow!("{def}: {e}"))?;
                    let cmd = specimen_command(args, addr)?;
                    Some(super::far::FarEnd::open(
                        &plan,
                        &p.name,
                        &spec,
                        &cmd,
                        Duration::from_secs(10),
                    )?)
                }
                None => None,
            };
            let r = rt.block_on(scenario::run(&plan, p, server.as_ref(), live, far));
            if let Some(s) = server.as_mut() {
                s.stop();
            }
            results.push(r.with_context(|| format!("demo scenario {}", p.name))?);
            if crate::capture::stop::interrupted() {
                break;
            }
        }
        if results.len() < 2 {
            if !crate::capture::stop::interrupted() {
                // Could not run here (no WAN path): said in not_run, with the reason.
                continue;
            }
            // Interrupted in the pathology's scenario: keep what it measured, compare nothing.
            out.not_run.push(case.title.to_string());
            out.scenarios.append(&mut results);
            continue;
        }
        let after = results.pop().context("after")?;
        let before = results.pop().context("before")?;
        let found = before.findings.iter().find(|f| f.kind == case.expected);
        let reproduced = found.is_some();
        let fixed = !after.has(case.expected);
        let diagnosis = match found {
            Some(f) => f.verdict.clone(),
            None if before.capture.is_none() && case.expected != FindingKind::BusyPoll => {
                format!(
                    "{} not named: {}",
                    case.expected,
                    before.capture_note.clone().unwrap_or_default()
                )
            }
            None => format!("{} was not named in this run", case.expected),
        };
        let fix = match found {
            Some(f) => format!("{} — the twin: {}", f.fix, case.change),
            None => format!("the twin: {}", case.change),
        };
        out.comparisons.push(Comparison::of(
            case.title,
            (&before.name, &before.figures),
            (&after.name, &after.figures),
        ));
        out.cases.push(DemoCase {
            title: case.title.to_string(),
            setup: case.setup.to_string(),
            expected: case.expected,
            before: before.name.clone(),
            after: after.name.clone(),
            requests: case.requests,
            reproduced,
            fixed,
            diagnosis,
            fix,
        });
        out.scenarios.push(before);
        out.scenarios.push(after);
    }
    Ok(out)
}
