//! `tcpdoctor ab`: two implementations compared — how much faster, how sure, and why.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use clap::Args;
use tcpdoctor_core::ab::{
    compare_figure, count_hangs, describe_order, gate, order, render_text, AbReport, AbSettings,
    Better, FigureSpec, GateResult, RunRecord, Side, SideFindings, Why, AB_SCHEMA_VERSION,
};

use super::analyze::Format;
use super::run::OutDir;
use crate::ab::{command, server, stream, RunResult};
use crate::output;

/// A/B of two implementations (A the reference): how much faster, how sure, and why
///
/// Runs alternate A B, B A, A B, … (after warm-up runs that are discarded), so a drift of the
/// machine falls on both. Each figure's result is the ratio B/A over the rounds with its
/// confidence interval (a paired t-interval on log ratios, docs/ab.md says why) and a
/// verdict: B faster, B slower, or no difference the noise can show. A run that makes no
/// progress for --hang-after is a hang: recorded with its sockets as they were, stopped, and
/// the comparison goes on. Each side's traffic is captured and analysed, and what differs
/// (a Nagle stall in B only, more segments per request, …) is named with frames.
///
/// Two servers, driven by the same script as `run` drives one:
///   tcpdoctor ab --server-a './old --port 7000' --server-b './new --port 7000' \
///       --target 127.0.0.1:7000 --preset resp --scenarios direct,wan:15ms --rounds 10
///
/// Two benchmark commands you already have (a client and the server it starts, or a client
/// against servers already running), a figure read from their output (and the wall time):
///   tcpdoctor ab --command-a 'redis-benchmark -p 7000 -t ping -n 20000 -q' \
///       --command-b 'redis-benchmark -p 7001 -t ping -n 20000 -q' \
///       --figure 'rps:higher=([0-9.]+) requests per second' --fail-if-slower=1.05
///
/// Exit status: 0, or 1 with --fail-if-slower when B is slower than RATIO × A beyond the noise
/// in any figure, a figure could not be compared, or a measured run of either side hung or
/// failed; 2 (after the report) when every run of a side failed or the comparison was
/// interrupted, and for bad input or tcpdoctor's own error. JSON (--format json):
/// schema/ab-report.schema.json.
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct AbArgs {
    /// A's benchmark command (sh -c; it starts what it needs and exits when done).
    #[arg(long, value_name = "CMD", requires = "command_b", conflicts_with_all = ["server_a", "server_b"])]
    pub command_a: Option<String>,

    /// B's benchmark command.
    #[arg(long, value_name = "CMD", requires = "command_a")]
    pub command_b: Option<String>,

    /// With --command-a/-b: a figure read from the command's standard output, NAME:higher=REGEX
    /// (a rate: higher is better) or NAME:lower=REGEX (a time); the regex's first group, else
    /// its whole match, is the number (its last match in the output; commas ignored).
    /// Repeatable. The wall time is always compared too.
    #[arg(long, value_name = "NAME:DIR=REGEX", requires = "command_a")]
    pub figure: Vec<String>,

    /// A's server command (sh -c), started for each of A's runs as `run --server` starts it.
    #[arg(long, value_name = "CMD", requires_all = ["server_b", "target"])]
    pub server_a: Option<String>,

    /// B's server command; it must listen on the same --target.
    #[arg(long, value_name = "CMD", requires = "server_a")]
    pub server_b: Option<String>,

    /// With --server-a/-b: the address both listen on, as `run --target` takes it.
    #[arg(long, value_name = "ADDR")]
    pub target: Option<String>,

    /// With --server-a/-b: a conversation script (docs/scripts.md).
    #[arg(long, value_name = "FILE", conflicts_with = "preset")]
    pub script: Option<PathBuf>,

    /// With --server-a/-b: a built-in script (echo, echo-line, resp, http1, memcache, line).
    #[arg(long, value_name = "NAME")]
    pub preset: Option<String>,

    /// A preset's parameter or a script's `[vars]` entry, KEY=VALUE (repeatable).
    #[arg(long, value_name = "KEY=VALUE")]
    pub param: Vec<String>,

    /// With --server-a/-b: the paths, as `run --scenarios` takes them (direct, proxy,
    /// proxy-nagle, proxy-delay:D, wan:PATH).
    /// [default: direct]
    #[arg(long)]
    pub scenarios: Option<String>,

    /// With --server-a/-b: exchanges per scenario and run [default: 200].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: Option<u64>,

    /// With --server-a/-b: concurrent connections [default: 1].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10000))]
    pub connections: Option<u64>,

    /// With --server-a/-b: requests in flight per connection [default: 1].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub pipeline: Option<u64>,

    /// With --server-a/-b: compare a one-way stream instead of a conversation, each run
    /// `tcpdoctor stream` (docs/stream.md): from-server (the servers send, tcpdoctor counts
    /// whole messages) or to-server (tcpdoctor sends as fast as they take). Figures:
    /// messages/s, bytes/s, data segments and server CPU per message; one traced run per
    /// side after the rounds gives the server's calls per message.
    #[arg(long, value_name = "DIRECTION", requires = "server_a",
          value_parser = ["from-server", "to-server"])]
    pub stream: Option<String>,

    /// With --stream: how the stream is cut into messages (u8, u16be, u16le, u32be, u32le,
    /// line, crlf, fixed) [default: u32be].
    #[arg(long, value_name = "FRAMING", requires = "stream")]
    pub framing: Option<String>,

    /// With --stream: bytes of each message tcpdoctor writes (to-server), or of every message
    /// with `fixed` framing.
    #[arg(long, value_name = "SIZE", requires = "stream")]
    pub size: Option<String>,

    /// With --stream: bytes sent once on each connection first (escapes \r \n \xNN).
    #[arg(long, value_name = "TEXT", requires = "stream")]
    pub hello: Option<String>,

    /// With --stream: each run's measured window [default: 2s].
    #[arg(long, value_name = "DURATION", requires = "stream")]
    pub duration: Option<String>,

    /// With --stream: each run's warm-up before its window [default: 0.5s].
    #[arg(long, value_name = "DURATION", requires = "stream")]
    pub stream_warmup: Option<String>,

    /// Measured rounds (each one run of A and one of B).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub rounds: u32,

    /// Warm-up rounds run first and discarded.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=1000))]
    pub warmup: u32,

    /// Two-sided confidence of the intervals, percent.
    #[arg(long, default_value_t = 99.0, value_name = "PERCENT")]
    pub confidence: f64,

    /// The smallest difference worth showing, percent: when the spread hides one this large,
    /// the report says about how many rounds would show it.
    #[arg(long, default_value_t = 5.0, value_name = "PERCENT")]
    pub resolution: f64,

    /// A run with no progress for this long (no byte acknowledged or received on its TCP
    /// sockets, no I/O by processes holding Unix sockets, no output line) is a hang: its
    /// sockets are recorded, it is stopped, and the next run starts.
    #[arg(long, default_value = "30s", value_name = "DURATION")]
    pub hang_after: String,

    /// Exit 1 when B is slower than RATIO × A beyond the noise in any figure, when a figure
    /// could not be compared (fewer than 3 complete rounds), or when a measured run of either
    /// side hung or failed.
    #[arg(long, value_name = "RATIO", num_args = 0..=1, default_missing_value = "1.0")]
    pub fail_if_slower: Option<f64>,

    /// With --command-a/-b: runs per side captured in a private network namespace and
    /// analysed for the side-by-side findings (not measured: capturing costs CPU). 0: none
    /// [default: 1].
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub why_runs: Option<u32>,

    /// Where runs' outputs, captures and logs go [default: a new directory under the
    /// temporary directory, named on stderr].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

enum Mode {
    Commands {
        a: String,
        b: String,
        figures: Vec<command::OutputFigure>,
    },
    Servers {
        a: String,
        b: String,
        run_args: Vec<String>,
        scenarios: Vec<String>,
    },
    Stream {
        a: String,
        b: String,
        stream_args: Vec<String>,
    },
}

/// `--stream`: the `tcpdoctor stream` arguments both sides run with, checked now as
/// `stream` itself checks them.
fn stream_mode(args: &AbArgs, direction: &str, a: &str, b: &str) -> anyhow::Result<Mode> {
    let conversation_only = [
        ("--script", args.script.is_some()),
        ("--preset", args.preset.is_some()),
        ("--param", !args.param.is_empty()),
        ("--scenarios", args.scenarios.is_some()),
        ("--requests", args.requests.is_some()),
        ("--pipeline", args.pipeline.is_some()),
    ];
    if let Some((flag, _)) = conversation_only.iter().find(|(_, given)| *given) {
        bail!(
            "ab: {flag} drives a conversation; --stream measures a one-way stream (see --framing)"
        );
    }
    let target = args.target.clone().expect("clap requires it");
    let mut v = vec![
        "--target".to_string(),
        target,
        "--direction".into(),
        direction.to_string(),
        "--framing".into(),
        args.framing.clone().unwrap_or_else(|| "u32be".into()),
        "--connections".into(),
        args.connections.unwrap_or(1).to_string(),
        "--duration".into(),
        args.duration.clone().unwrap_or_else(|| "2s".into()),
        "--warmup".into(),
        args.stream_warmup.clone().unwrap_or_else(|| "0.5s".into()),
    ];
    if let Some(s) = &args.size {
        v.extend(["--size".into(), s.clone()]);
    }
    if let Some(h) = &args.hello {
        v.extend(["--hello".into(), h.clone()]);
    }
    use clap::FromArgMatches;
    let cmd = <super::stream::StreamArgs as clap::Args>::augment_args(clap::Command::new("stream"));
    let matches = cmd
        .try_get_matches_from(std::iter::once("stream".to_string()).chain(v.iter().cloned()))
        .map_err(|e| anyhow::anyhow!("ab --stream: {}", e.to_string().trim()))?;
    let parsed = super::stream::StreamArgs::from_arg_matches(&matches)
        .map_err(|e| anyhow::anyhow!("ab --stream: {e}"))?;
    super::stream::config(&parsed)?;
    Ok(Mode::Stream {
        a: a.to_string(),
        b: b.to_string(),
        stream_args: v,
    })
}

fn mode(args: &AbArgs) -> anyhow::Result<Mode> {
    match (
        &args.command_a,
        &args.command_b,
        &args.server_a,
        &args.server_b,
    ) {
        (Some(a), Some(b), None, None) => {
            let server_only = [
                ("--script", args.script.is_some()),
                ("--preset", args.preset.is_some()),
                ("--target", args.target.is_some()),
                ("--param", !args.param.is_empty()),
                ("--scenarios", args.scenarios.is_some()),
                ("--requests", args.requests.is_some()),
                ("--connections", args.connections.is_some()),
                ("--pipeline", args.pipeline.is_some()),
            ];
            if let Some((flag, _)) = server_only.iter().find(|(_, given)| *given) {
                bail!(
                    "ab: {flag} goes with --server-a/--server-b (a script driving two servers); \
                     a benchmark command drives itself"
                );
            }
            let figures = args
                .figure
                .iter()
                .map(|f| command::parse_figure(f))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| anyhow::anyhow!(e))?;
            Ok(Mode::Commands {
                a: a.clone(),
                b: b.clone(),
                figures,
            })
        }
        (None, None, Some(a), Some(b)) if args.stream.is_some() => {
            if args.why_runs.is_some() {
                bail!("ab: --why-runs goes with --command-a/--command-b; --stream traces one run per side");
            }
            stream_mode(args, args.stream.as_deref().unwrap_or_default(), a, b)
        }
        (None, None, Some(a), Some(b)) => {
            if args.why_runs.is_some() {
                bail!(
                    "ab: --why-runs goes with --command-a/--command-b; with servers every \
                     run's own captures are analysed"
                );
            }
            let target = args.target.clone().expect("clap requires it");
            let mut run_args = vec!["--target".to_string(), target];
            if let Some(s) = &args.script {
                run_args.extend(["--script".into(), s.display().to_string()]);
            }
            if let Some(p) = &args.preset {
                run_args.extend(["--preset".into(), p.clone()]);
            }
            if args.script.is_none() && args.preset.is_none() {
                bail!("ab: --server-a/--server-b need --script FILE or --preset NAME (what to drive them with)");
            }
            for p in &args.param {
                run_args.extend(["--param".into(), p.clone()]);
            }
            let timeout = hang_after(args)? + Duration::from_secs(5);
            let listed = args.scenarios.clone().unwrap_or_else(|| "direct".into());
            run_args.extend([
                "--scenarios".into(),
                listed.clone(),
                "--requests".into(),
                args.requests.unwrap_or(200).to_string(),
                "--connections".into(),
                args.connections.unwrap_or(1).to_string(),
                "--pipeline".into(),
                args.pipeline.unwrap_or(1).to_string(),
                "--timeout".into(),
                format!("{}ms", timeout.as_millis()),
            ]);
            let scenarios: Vec<String> = tcpdoctor_core::run::Scenario::parse_list(&listed)
                .map_err(|e| anyhow::anyhow!("--scenarios: {e}"))?
                .into_iter()
                .map(|s| s.name)
                .collect();
            Ok(Mode::Servers {
                a: a.clone(),
                b: b.clone(),
                run_args,
                scenarios,
            })
        }
        _ => bail!(
            "ab: give either --command-a CMD --command-b CMD (two benchmark commands) or \
             --server-a CMD --server-b CMD --target ADDR (two servers driven by a script)"
        ),
    }
}

fn hang_after(args: &AbArgs) -> anyhow::Result<Duration> {
    super::bench::positive_duration("hang-after", &args.hang_after)
}

fn percent(flag: &str, v: f64, max: f64) -> anyhow::Result<f64> {
    if !(v.is_finite() && v > 0.0 && v < max) {
        bail!("--{flag} {v}: a percentage above 0 and below {max}");
    }
    Ok(v / 100.0)
}

pub fn run(args: AbArgs) -> anyhow::Result<u8> {
    let mode = mode(&args)?;
    let hang = hang_after(&args)?;
    let confidence = percent("confidence", args.confidence, 100.0)?;
    let resolution = percent("resolution", args.resolution, 1000.0)?;
    if let Some(r) = args.fail_if_slower {
        if !(r.is_finite() && r >= 1.0) {
            bail!("--fail-if-slower={r}: a ratio of 1 or more (1.05: B may be up to 5 % slower)");
        }
    }
    if let Mode::Servers { a, run_args, .. } = &mode {
        server::check(a, run_args)?;
    }
    let out_dir = OutDir::new(args.out.as_deref(), "ab")?;
    let dir = out_dir.path.clone();
    let slots = order(args.rounds, args.warmup);
    let (side_text, specs): ([String; 2], Vec<FigureSpec>) = match &mode {
        Mode::Commands { a, b, figures } => {
            let mut specs = vec![FigureSpec {
                name: command::WALL.into(),
                better: Better::Lower,
                unit: Some("s".into()),
            }];
            specs.extend(figures.iter().map(|f| f.spec.clone()));
            ([a.clone(), b.clone()], specs)
        }
        Mode::Servers {
            a, b, scenarios, ..
        } => ([a.clone(), b.clone()], server::figure_specs(scenarios)),
        Mode::Stream { a, b, .. } => (
            [a.clone(), b.clone()],
            stream::figure_specs(args.stream.as_deref().unwrap_or_default()),
        ),
    };
    let mut runs: Vec<RunRecord> = Vec::new();
    // Per scenario (server mode), or one for the commands' traffic: (A's, B's).
    let per = match &mode {
        Mode::Commands { .. } => "turn",
        Mode::Servers { .. } | Mode::Stream { .. } => "request",
    };
    let mut whys: Vec<(Option<String>, SideFindings, SideFindings)> = Vec::new();
    let why_of = |whys: &mut Vec<(Option<String>, SideFindings, SideFindings)>,
                  scenario: &Option<String>|
     -> usize {
        match whys.iter().position(|w| &w.0 == scenario) {
            Some(i) => i,
            None => {
                whys.push((
                    scenario.clone(),
                    SideFindings::new(Side::A, per),
                    SideFindings::new(Side::B, per),
                ));
                whys.len() - 1
            }
        }
    };
    let total = slots.len();
    // Ctrl-C stops the run under way (and what it started) and reports what was measured.
    crate::capture::stop::install();
    crate::ab::tree::become_subreaper();
    let mut left_behind: [Vec<String>; 2] = [Vec::new(), Vec::new()];
    let mut interrupted: Option<String> = None;
    for (i, slot) in slots.iter().enumerate() {
        let tag = format!(
            "{}{:03}-{}",
            if slot.warmup { "warmup-" } else { "round-" },
            slot.round,
            slot.side.letter().to_lowercase()
        );
        eprintln!(
            "tcpdoctor ab: run {}/{total}: {} {} {}",
            i + 1,
            if slot.warmup { "warm-up" } else { "round" },
            slot.round,
            slot.side.letter()
        );
        let which = match slot.side {
            Side::A => 0,
            Side::B => 1,
        };
        let result = match &mode {
            Mode::Commands { a, b, figures } => {
                let cmd = if which == 0 { a } else { b };
                command::run_once(cmd, &dir.join(format!("{tag}.out")), hang, figures)
            }
            Mode::Servers { a, b, run_args, .. } => {
                let srv = if which == 0 { a } else { b };
                server::run_once(srv, run_args, &dir.join(&tag), hang)
            }
            Mode::Stream {
                a, b, stream_args, ..
            } => {
                let srv = if which == 0 { a } else { b };
                stream::run_once(srv, stream_args, &dir, &tag, hang)
            }
        };
        let result: RunResult = match result {
            Ok(r) => r,
            Err(e) if crate::capture::stop::interrupted() => {
                interrupted = Some(format!(
                    "interrupted during run {}/{total} ({e:#}): the report covers the {} runs \
                     before it",
                    i + 1,
                    i
                ));
                break;
            }
            Err(e) => return Err(e),
        };
        if !result.leftovers.is_empty() {
            eprintln!(
                "tcpdoctor ab:   {}'s run left {} running after it ended: stopped",
                slot.side.letter(),
                result.leftovers.join(", ")
            );
            left_behind[which].extend(result.leftovers.iter().cloned());
        }
        if let tcpdoctor_core::ab::Outcome::Failed { reason } = &result.outcome {
            eprintln!("tcpdoctor ab:   {} failed: {reason}", slot.side.letter());
        }
        if let tcpdoctor_core::ab::Outcome::Hang { .. } = &result.outcome {
            eprintln!(
                "tcpdoctor ab:   {} HUNG: no progress for {} s; stopped, going on",
                slot.side.letter(),
                hang.as_secs_f64()
            );
        }
        if !slot.warmup {
            for w in &result.why {
                let i = why_of(&mut whys, &w.scenario);
                let side = if which == 0 {
                    &mut whys[i].1
                } else {
                    &mut whys[i].2
                };
                side.add(&w.source, &w.findings, w.flows, w.exchanges, w.tcp_segments);
            }
        }
        runs.push(RunRecord {
            round: slot.round,
            side: slot.side,
            warmup: slot.warmup,
            outcome: result.outcome,
            wall_s: result.wall_s,
            figures: result.figures,
        });
    }
    let mut warnings: Vec<String> = interrupted.iter().cloned().collect();
    for (k, left) in left_behind.iter_mut().enumerate() {
        left.sort();
        left.dedup();
        if !left.is_empty() {
            warnings.push(format!(
                "{}'s runs left processes running after they ended ({}): stopped after each \
                 run, so the next run did not meet them; a benchmark command should stop what \
                 it starts",
                if k == 0 { "A" } else { "B" },
                left.join(", ")
            ));
        }
    }
    if let (Mode::Commands { a, b, .. }, None) = (&mode, &interrupted) {
        let i = why_of(&mut whys, &None);
        let (_, why_a, why_b) = &mut whys[i];
        for (k, (cmd, side)) in [(a, why_a), (b, why_b)].into_iter().enumerate() {
            let letter = if k == 0 { "a" } else { "b" };
            let why_runs = args.why_runs.unwrap_or(1);
            for n in 1..=why_runs {
                eprintln!(
                    "tcpdoctor ab: capturing {} for why ({n}/{why_runs})",
                    letter.to_uppercase()
                );
                let pcap = dir.join(format!("why-{letter}-{n}.pcap"));
                let analysed = match crate::ab::why::capture_and_analyse(cmd, &pcap, hang) {
                    Err(e) if crate::capture::stop::interrupted() => {
                        warnings.push(format!("interrupted while capturing for why: {e:#}"));
                        break;
                    }
                    other => other?,
                };
                match analysed {
                    Ok(w) => side.add(&w.source, &w.findings, w.flows, w.exchanges, w.tcp_segments),
                    Err(why) => warnings.push(format!(
                        "{}'s traffic was not analysed: {why}",
                        letter.to_uppercase()
                    )),
                }
            }
        }
    }
    let mut stream_why = None;
    if let (
        Mode::Stream {
            a, b, stream_args, ..
        },
        None,
    ) = (&mode, &interrupted)
    {
        let mut sides = [None, None];
        for (k, srv) in [a, b].into_iter().enumerate() {
            let letter = if k == 0 { "A" } else { "B" };
            eprintln!("tcpdoctor ab: a traced run of {letter} for why (not measured)");
            let json = dir.join(format!("why-{}.json", letter.to_lowercase()));
            match stream::why_once(srv, stream_args, &json, hang) {
                Err(e) if crate::capture::stop::interrupted() => {
                    warnings.push(format!("interrupted while tracing for why: {e:#}"));
                    break;
                }
                Err(e) => return Err(e),
                Ok(Ok(side)) => sides[k] = Some(side),
                Ok(Err(why)) => warnings.push(format!("{letter}'s traced run gave nothing: {why}")),
            }
        }
        let [sa, sb] = sides;
        stream_why = Some(tcpdoctor_core::ab::StreamWhy::of(sa, sb));
    }
    let why: Vec<Why> = whys
        .into_iter()
        .filter(|(_, a, b)| a.runs_analysed + b.runs_analysed > 0)
        .map(|(scenario, a, b)| Why::of(scenario, a, b))
        .collect();
    let figures: Vec<_> = specs
        .iter()
        .map(|s| compare_figure(s, &runs, confidence, resolution))
        // Server CPU that no run of either side could read is not a row; every other figure
        // is, measured or not (a gate must see what it did not get).
        .filter(|f| f.a.is_some() || f.b.is_some() || !f.name.starts_with("server CPU"))
        .collect();
    let mut nothing = Vec::new();
    for side in [Side::A, Side::B] {
        let measured: Vec<&RunRecord> = runs
            .iter()
            .filter(|r| !r.warmup && r.side == side)
            .collect();
        let first_failure = measured.iter().find_map(|r| match &r.outcome {
            tcpdoctor_core::ab::Outcome::Failed { reason } => Some(reason.clone()),
            _ => None,
        });
        let all_failed = !measured.is_empty()
            && measured
                .iter()
                .all(|r| matches!(r.outcome, tcpdoctor_core::ab::Outcome::Failed { .. }));
        if let (true, Some(reason)) = (all_failed, first_failure) {
            nothing.push(format!(
                "every run of {} failed (the first: {reason})",
                side.letter()
            ));
        }
    }
    warnings.extend(nothing.iter().cloned());
    let hangs = count_hangs(&runs);
    let (mut result, mut reasons) = gate(&figures, &runs, args.fail_if_slower, confidence);
    if let Some(why) = &interrupted {
        // An interrupted comparison is never a pass (a cancelled CI job must not go green).
        if result != GateResult::NotGated {
            result = GateResult::Failed;
            reasons.push(why.clone());
        }
    }
    let report = AbReport {
        schema_version: AB_SCHEMA_VERSION,
        tool: tcpdoctor_core::report::ToolInfo::current(),
        command: "ab".into(),
        settings: AbSettings {
            mode: match mode {
                Mode::Commands { .. } => "command".into(),
                Mode::Servers { .. } => "server".into(),
                Mode::Stream { .. } => "stream".into(),
            },
            a: side_text[0].clone(),
            b: side_text[1].clone(),
            rounds: args.rounds,
            warmup: args.warmup,
            order: describe_order(&slots),
            confidence,
            resolution,
            hang_after_s: hang.as_secs_f64(),
            method: format!(
                "B/A per round (A and B back to back, alternating which goes first); the ratio \
                 is the geometric mean over complete rounds, its {} % interval a paired \
                 t-interval on ln(B/A)",
                tcpdoctor_core::numfmt::num(100.0 * confidence)
            ),
        },
        figures,
        hangs,
        runs,
        why,
        stream: stream_why,
        result: result.clone(),
        reasons,
        warnings,
    };
    let text = match args.format {
        Format::Text => render_text(&report),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&report)?;
            s.push('\n');
            s
        }
    };
    output::print(&text)?;
    drop(out_dir);
    if let Some(why) = &interrupted {
        bail!("{why}");
    }
    if !nothing.is_empty() {
        // Not a comparison: a side that never ran is a setup error, not a result.
        bail!("{}", nothing.join("; "));
    }
    Ok(if result == GateResult::Failed { 1 } else { 0 })
}
