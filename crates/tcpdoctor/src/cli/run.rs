//! `tcpdoctor run`: start the target, drive it through each scenario, capture, diagnose,
//! compare with a baseline, and gate CI on the result.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context};
use clap::Args;
use tcpdoctor_core::report::FindingKind;
use tcpdoctor_core::run::{
    render_run_text, Check, RunReport, RunSettings, Scenario, ScenarioKind, ScenarioResult,
};

use super::analyze::{parse_fail_on, FailOn, Format};
use super::proxy::{check_unix_dir, parse_addr};
use crate::bench::SplitWrites;
use crate::proxy::Addr;
use crate::run::baseline::{baseline_fits, compare, definitions_fit, load_baseline};
use crate::run::far::FarEnd;
use crate::run::scenario::{self, Driver, Path as ScenarioPath};
use crate::run::server::Server;
use crate::run::{live, Plan};
use crate::{output, EXIT_CLEAN, EXIT_FOUND};

/// Drive a target through several network paths and say what each costs, and why.
///
/// Starts the server (--server, in its own process group, output to a log, ready when
/// --target accepts), then for each scenario runs the script --requests times (--repeat K:
/// K runs in a row, pooled), captures the traffic of all runs (live on lo when permitted —
/// root, CAP_NET_RAW or --sandbox — else the scenario proxy's recording), accounts the
/// server's CPU from /proc, and diagnoses. Prints a side-by-side table, the findings with
/// evidence and fixes, the comparison with --baseline, and the checks.
///
/// Exit 0 passed, or not gated (no --check, --fail-on or --fail-on-worse: the result says
/// "not gated", never "passed"); 1 a --check failed or could not be evaluated, a --fail-on
/// kind was found (or could not be: no capture, no server CPU), a --fail-on-worse figure got WORSE than the --baseline, a scenario
/// measured nothing (or hung), or Ctrl-C interrupted the run (the report of what was
/// measured is printed, marked INTERRUPTED); 2 bad usage, a server that never got ready or
/// exited, an unreachable target.
///
/// --dry-run prints the script's first conversation as it would be sent (secrets masked)
/// and exits 0 without starting or contacting anything; a script with an `exec` (a value
/// from an outside command) runs only with --allow-exec, one that reads `{env:NAME}` only
/// with --allow-env NAME.
///
/// Scenarios: direct; proxy (a transparent hop); proxy-nagle (a hop that re-emits each chunk
/// with Nagle on towards the driver: the middlebox stall); wan:DELAY (DELAY each way).
///
/// A Unix-socket target (--target unix:PATH): direct has no packets to capture (figures,
/// server CPU and busy_poll still hold; `stalls`, a capture's count, cannot be evaluated
/// there); the hops listen on TCP 127.0.0.1 and forward
/// to the socket, so proxy-nagle shows what a Nagle middlebox in front of the service costs.
///
/// Examples:
///   tcpdoctor run --server './myserver --port 7000' --target 127.0.0.1:7000 --preset echo-line
///   tcpdoctor run --server 'redis-server --port 6379' --target 127.0.0.1:6379 --preset resp \
///       --scenarios direct,wan:15ms --save after.json --baseline before.json \
///       --check 'p99<5ms@direct' --fail-on nagle_delayed_ack
///   tcpdoctor run --server 'python3 daemon.py' --target unix:/run/app/app.sock \
///       --script app.toml --scenarios direct,proxy-nagle
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct RunArgs {
    /// The server command line (run with sh -c: `cd dir && ./srv` works); a daemon it forks
    /// is waited for and stopped too. Omit to drive a target that is already running.
    #[arg(long, value_name = "CMD")]
    pub server: Option<String>,

    /// The address the server listens on: IP:PORT, or unix:PATH (a Unix socket; its
    /// directory must exist, and with --server, ready means PATH accepts a connection).
    #[arg(long, value_name = "ADDR", required_unless_present = "dry_run")]
    pub target: Option<String>,

    /// A conversation script (TOML; see docs/scripts.md).
    #[arg(long, value_name = "FILE", conflicts_with = "preset")]
    pub script: Option<PathBuf>,

    /// A built-in script: echo, echo-line, resp, http1, memcache, line.
    #[arg(long, value_name = "NAME")]
    pub preset: Option<String>,

    /// A preset's parameter, or a script's `[vars]` entry, KEY=VALUE (repeatable).
    #[arg(long, value_name = "KEY=VALUE")]
    pub param: Vec<String>,

    /// Comma-separated: direct, proxy, proxy-nagle, proxy-delay:DELAY, wan:PATH.
    /// wan:15ms is a real path (the server restarted in a far network namespace behind a
    /// delay line, real kernel TCP at both ends; needs --server; options as in docs/wan.md:
    /// wan:15ms,loss=1%, wan:c2s=40ms,s2c=5ms, wan:15ms,rate=10mbit). proxy-delay:15ms delays
    /// bytes at a local hop instead (any target, but neither kernel sees the delay).
    /// [default: direct,proxy,proxy-nagle,wan:15ms with --server, else
    /// direct,proxy,proxy-nagle,proxy-delay:15ms]
    #[arg(long)]
    pub scenarios: Option<String>,

    /// Exchanges per scenario.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: u64,

    /// Run each scenario K times in a row (server, hop and capture kept up across the runs).
    /// Figures, checks, baselines and JSON pool all K runs; the table adds each scenario's
    /// spread (min–max of the per-run p50 and throughput); JSON adds `repeat` per scenario.
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub repeat: u64,

    /// Concurrent connections.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=10000))]
    pub connections: u64,

    /// Requests in flight per connection.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub pipeline: u64,

    /// A response slower than this is a timeout.
    #[arg(long, default_value = "5s")]
    pub timeout: String,

    /// How long the server may take to accept its first connection.
    #[arg(long, default_value = "10s")]
    pub ready_timeout: String,

    /// A report saved by an earlier --save: each scenario gets a before/after table, marked
    /// better/WORSE only beyond the noise (sharper with --repeat 5 on both sides). A baseline
    /// of another script, or with no scenario in common, is refused.
    #[arg(long, value_name = "FILE.json")]
    pub baseline: Option<PathBuf>,

    /// Also write the report as one self-contained HTML page (histograms, a stalled
    /// exchange's timeline, chunk sizes, findings).
    #[arg(long, value_name = "FILE.html")]
    pub html: Option<PathBuf>,

    /// Do not trace the server's system calls. By default the server `run` starts is traced
    /// without root (ptrace with a seccomp filter: only the write/send, read/recv, socket
    /// option, ioctl, readiness-wait, accept/connect/shutdown/close calls stop it), so the
    /// findings can say which write() produced which frame and what a busy loop was calling
    /// (JSON `syscalls`; docs/syscalls.md). Where ptrace is refused the run goes on untraced
    /// and says why. A run that saves or compares a baseline (--save, --baseline) is not
    /// traced unless --trace is given: a ptrace stop costs tens of µs per call, machine- and
    /// load-dependent, and would enter every timing and CPU figure it records or compares.
    #[arg(long, conflicts_with = "trace")]
    pub no_trace: bool,

    /// Trace the server even with --save or --baseline (its figures then carry the tracer's
    /// cost; a baseline saved traced is compared with a warning against one that was not).
    #[arg(long)]
    pub trace: bool,

    /// Write this run's report as JSON (a later run's --baseline).
    #[arg(long, value_name = "FILE.json")]
    pub save: Option<PathBuf>,

    /// A threshold, e.g. 'p99<5ms', 'stalls==0@proxy-nagle', 'throughput>=1000' (repeatable).
    /// Figures: p50 p99 mean max throughput stalls (turns a TCP timer held, from the capture)
    /// over30ms errors (with timeouts) timeouts cpu chunks; @SCENARIO limits it. A figure not
    /// measured (no exchange; stalls without a capture) cannot be evaluated: the check fails.
    #[arg(long, value_name = "EXPR")]
    pub check: Vec<String>,

    /// Print the first conversation's requests as they would be sent (escaped, secrets shown
    /// as ***) and exit 0: no server is started, nothing is connected, no `exec` is run.
    #[arg(long)]
    pub dry_run: bool,

    /// Let the script's `[[setup]]` run its `exec` commands (once, before the run, each
    /// under its timeout). Without it such a script is refused.
    #[arg(long)]
    pub allow_exec: bool,

    /// The environment variables the script may read with `{env:NAME}` (comma-separated or
    /// repeated); a variable not named here is refused.
    #[arg(long, value_name = "NAME[,NAME]", value_delimiter = ',')]
    pub allow_env: Vec<String>,

    /// Exit 1 when any of these finding kinds is found (comma-separated, or `any`).
    #[arg(long, value_name = "KINDS", value_delimiter = ',', value_parser = parse_fail_on)]
    pub fail_on: Vec<FailOn>,

    /// With --baseline: exit 1 when the comparison marks a figure WORSE beyond the noise
    /// (two runs of the same build pass). Alone, every figure of the table; or a list:
    /// --fail-on-worse=p50,p99,stalls (throughput mean p50 p99 stalls chunks cpu errors
    /// timeouts STEP.p50). A listed figure not measured on both sides fails the run.
    #[arg(
        long,
        value_name = "FIGURES",
        num_args = 0..=1,
        require_equals = true,
        value_delimiter = ',',
        requires = "baseline",
        value_parser = parse_worse_figure
    )]
    pub fail_on_worse: Option<Vec<String>>,

    /// Run everything inside a private network namespace (user namespace, no root): live
    /// capture works there without privileges. Needs --server: the namespace cannot see a
    /// server started outside it.
    #[arg(long, requires = "server")]
    pub sandbox: bool,

    /// Where captures and the server log go, kept (default: a new directory under the temp
    /// dir, removed when the run passes, kept and named on stderr when it fails).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Output format on stdout: text (for people) or json (schema/run-report.schema.json).
    #[arg(long, value_enum, default_value_t = Format::Text, hide_possible_values = true)]
    pub format: Format,
}

/// The directory for this run's files (captures, the server's log): `--out DIR`, kept; or a
/// new one under the temp dir, removed when the run passed and kept, and named on stderr, when
/// it failed or ended in an error (there the files explain what went wrong).
pub(crate) struct OutDir {
    pub path: PathBuf,
    /// Made by us under the temp dir (not asked for with `--out`).
    temporary: bool,
    /// `settle` ran.
    settled: bool,
    /// `run` or `demo`, for the stderr line.
    what: &'static str,
}

impl OutDir {
    pub(crate) fn new(given: Option<&Path>, what: &'static str) -> anyhow::Result<OutDir> {
        let (path, temporary) = match given {
            Some(d) => {
                std::fs::create_dir_all(d)
                    .with_context(|| format!("--out: creating {}", d.display()))?;
                (d.to_path_buf(), false)
            }
            None => (
                crate::scratch::private_dir(&std::env::temp_dir(), &format!("tcpdoctor-{what}"))
                    .context("creating the run's directory under the temporary directory")?,
                true,
            ),
        };
        Ok(OutDir {
            path,
            temporary,
            settled: false,
            what,
        })
    }

    /// At the end of a run: a temporary directory goes when the run passed (`failed` false),
    /// and stays, named on stderr, when it did not.
    pub(crate) fn settle(&mut self, failed: bool) {
        self.settled = true;
        if !self.temporary {
            return;
        }
        if failed {
            self.keep();
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
            eprintln!(
                "tcpdoctor {}: captures and logs were temporary and are removed (keep them \
                 with --out DIR)",
                self.what
            );
        }
    }

    fn keep(&self) {
        // An empty directory (the run stopped before writing anything) explains nothing.
        if std::fs::remove_dir(&self.path).is_err() {
            eprintln!(
                "tcpdoctor {}: captures and logs kept in {}",
                self.what,
                self.path.display()
            );
        }
    }
}

impl Drop for OutDir {
    /// An error ended the run before `settle`: keep what it wrote.
    fn drop(&mut self) {
        if self.temporary && !self.settled {
            self.keep();
        }
    }
}

/// Live capture when this process may open a packet socket; otherwise the reason, for the
/// report.
pub(crate) fn live_capture() -> (bool, String) {
    match live::available() {
        Ok(()) => (true, String::new()),
        Err(e) => (
            false,
            format!(
                "no capture of the direct path: live capture needs root, CAP_NET_RAW or \
                 --sandbox ({e})"
            ),
        ),
    }
}

/// FNV-1a 64 of a script's source, as hex.
fn digest(source: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in source.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The digest of the source the script was built from: the file's text, or the preset's
/// with its parameters.
fn script_digest(args: &RunArgs, script: &tcpdoctor_core::script::Script) -> Option<String> {
    match (&args.script, &args.preset) {
        // `--param` changes a script's `[vars]`: a different value is a different script. A
        // secret's value is left out (a digest of it could be tried against guesses).
        (Some(path), _) => std::fs::read_to_string(path).ok().map(|s| {
            digest(&args.param.iter().fold(s, |s, p| {
                let shown = match p.split_once('=') {
                    Some((k, _)) if script.is_secret(k.trim()) => format!("{}=***", k.trim()),
                    _ => p.clone(),
                };
                s + "\n#param " + &shown
            }))
        }),
        (None, Some(name)) => {
            let params: Vec<(String, String)> = args
                .param
                .iter()
                .filter_map(|p| p.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            tcpdoctor_core::script::Script::preset_source(name, &params)
                .ok()
                .map(|s| digest(&s))
        }
        (None, None) => None,
    }
}

/// Whether the server is traced: on by default, off with --no-trace, and off for a run that
/// saves or compares a baseline unless --trace asks for it (its figures are the point).
fn traced(args: &RunArgs) -> bool {
    if args.no_trace {
        return false;
    }
    args.trace || (args.save.is_none() && args.baseline.is_none())
}

/// Before any work: `--save`/`--html` (`flag`) must name a file whose directory exists, so a
/// long run is not lost to a typo at the end.
pub(crate) fn check_output_file(flag: &str, p: Option<&Path>) -> anyhow::Result<()> {
    let Some(p) = p else {
        return Ok(());
    };
    if p.is_dir() {
        bail!("{flag} {}: is a directory; name a file", p.display());
    }
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        bail!("{flag} {}: no directory {}", p.display(), dir.display());
    }
    Ok(())
}

/// Prints the report, then writes --save and --html, and returns the exit code.
pub(crate) fn finish(
    report: &RunReport,
    format: Format,
    save: Option<&Path>,
    html: Option<&Path>,
) -> anyhow::Result<u8> {
    let text = match format {
        Format::Text => render_run_text(report),
        Format::Json => serde_json::to_string_pretty(report)? + "\n",
    };
    output::print(&text)?;
    if let Some(p) = save {
        let json = serde_json::to_string_pretty(report)?;
        std::fs::write(p, json + "\n").with_context(|| format!("--save {}", p.display()))?;
    }
    if let Some(p) = html {
        write_html(report, p)?;
    }
    Ok(if report.failed {
        EXIT_FOUND
    } else {
        EXIT_CLEAN
    })
}

fn write_html(report: &RunReport, p: &Path) -> anyhow::Result<()> {
    std::fs::write(p, tcpdoctor_core::run::render_html(report))
        .with_context(|| format!("--html {}", p.display()))?;
    eprintln!("tcpdoctor: report written to {}", p.display());
    Ok(())
}

/// `--scenarios` (or the default for this target and `--server`), parsed, and refused when a
/// `wan:` path cannot be built for them: before any I/O, and in a dry run too.
fn scenario_list(args: &RunArgs, target: &Addr) -> anyhow::Result<(String, Vec<Scenario>)> {
    let listed = args.scenarios.clone().unwrap_or_else(|| {
        if args.server.is_some() && matches!(*target, Addr::Tcp(_)) {
            "direct,proxy,proxy-nagle,wan:15ms".into()
        } else {
            "direct,proxy,proxy-nagle,proxy-delay:15ms".into()
        }
    });
    let scenarios = Scenario::parse_list(&listed).map_err(|e| anyhow!("--scenarios: {e}"))?;
    if let Some(s) = scenarios
        .iter()
        .find(|s| matches!(s.kind, ScenarioKind::Wan(_)))
    {
        if args.server.is_none() {
            bail!(
                "--scenarios {}: a wan: path puts the server at its far end, in a network \
                 namespace of its own, so run must start it: give --server CMD (the command \
                 that starts the server listening on {target}); or use proxy-delay:D, which \
                 delays an already-running target's bytes at a local hop",
                s.name
            );
        }
        if matches!(*target, Addr::Unix(_)) {
            bail!(
                "--scenarios {}: a wan: path carries TCP/IP and the target is a Unix socket; use \
                 proxy-delay:D",
                s.name
            );
        }
    }
    Ok((listed, scenarios))
}

pub fn run(args: RunArgs) -> anyhow::Result<u8> {
    if args.dry_run {
        let script = super::bench::load_script(
            args.script.as_deref(),
            args.preset.as_deref(),
            &args.param,
            &args.allow_env,
        )?;
        // A dry run refuses the scenarios the run would refuse (it reads nothing for them).
        if let Some(t) = args.target.as_deref() {
            scenario_list(&args, &parse_addr("target", t)?)?;
        }
        return super::bench::dry_run(&script, 1);
    }
    let target = parse_target(args.target.as_deref().unwrap_or_default())?;
    let (listed, scenarios) = scenario_list(&args, &target)?;
    let any_wan = scenarios
        .iter()
        .any(|s| matches!(s.kind, ScenarioKind::Wan(_)));
    let mut script = super::bench::load_script(
        args.script.as_deref(),
        args.preset.as_deref(),
        &args.param,
        &args.allow_env,
    )?;
    crate::bench::exec::run_execs(
        &mut script,
        args.allow_exec,
        &super::bench::script_source(args.script.as_deref(), args.preset.as_deref()),
    )?;
    let checks = args
        .check
        .iter()
        .map(|c| Check::parse(c).map_err(|e| anyhow!("--check: {e}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if let Some(c) = checks.iter().find(|c| {
        c.scenario
            .as_ref()
            .is_some_and(|n| !scenarios.iter().any(|s| &s.name == n))
    }) {
        bail!(
            "--check {}: no scenario `{}` in --scenarios {}",
            c.text,
            c.scenario.as_deref().unwrap_or_default(),
            listed
        );
    }
    let timeout = super::bench::positive_duration("timeout", &args.timeout)?;
    let ready = super::bench::positive_duration("ready-timeout", &args.ready_timeout)?;
    check_output_file("--save", args.save.as_deref())?;
    check_output_file("--html", args.html.as_deref())?;
    let mut out_dir = OutDir::new(args.out.as_deref(), "run")?;
    let out = out_dir.path.clone();
    let settings = RunSettings {
        command: "run".into(),
        target: target.to_string(),
        script: script.name().to_string(),
        script_digest: script_digest(&args, &script),
        server: args.server.clone(),
        scenarios: scenarios.iter().map(|s| s.name.clone()).collect(),
        requests: args.requests,
        repeat: args.repeat,
        connections: args.connections,
        pipeline: args.pipeline,
        output_dir: out.display().to_string(),
    };
    let baseline = args.baseline.as_deref().map(load_baseline).transpose()?;
    let mut baseline_warnings = Vec::new();
    if let (Some(b), Some(p)) = (&baseline, &args.baseline) {
        baseline_warnings = baseline_fits(&b.settings, &settings, &p.display().to_string())?;
        definitions_fit(&b.scenarios, &scenarios, &p.display().to_string())?;
        for w in &baseline_warnings {
            eprintln!("tcpdoctor run: WARNING: --baseline {}: {w}", p.display());
        }
    }
    if args.sandbox {
        crate::sandbox::namespace::enter_net().context("--sandbox")?;
    } else if any_wan {
        // A wan: path's far namespace is made from a near one this process enters while still
        // single-threaded (through a user namespace unless root: as root the server keeps its
        // real uids and groups); the driver's sockets live in the near one.
        crate::sandbox::namespace::enter_net_as_root()
            .context("a wan: scenario (the path is built between two network namespaces)")?;
    }
    if any_wan {
        // Before any scenario runs: a path that cannot be built is an error now, not after
        // minutes of other scenarios.
        crate::wan::tun::probe()?;
    }
    let (live, reason) = live_capture();
    // Ctrl-C ends the scenario under way and prints what was measured (and, with --server,
    // stops the server's group at once).
    crate::capture::stop::install();
    // One server at a time: the one in this namespace serves the scenarios that are not
    // wan: (consecutive ones share it), each wan: scenario starts its own at the far end,
    // and the near one is stopped before that and started again for the next scenario that
    // needs it — a server that owns a pid file, a lock, a Unix socket or a data directory
    // cannot run twice. With only wan: scenarios it is never started.
    let mut server: Option<Server> = None;
    let mut near_starts = 0;
    let plan = Plan {
        target: target.clone(),
        script: Arc::new(script),
        requests: args.requests,
        repeat: args.repeat,
        connections: args.connections,
        timeout,
        out_dir: out.clone(),
        no_capture_reason: reason,
        trace: traced(&args),
    };
    let driver = Driver {
        pipeline: args.pipeline as usize,
        nagle: false,
        split: SplitWrites::Whole,
        rate: None,
    };
    let rt = super::runtime(2)?;
    let mut results: Vec<ScenarioResult> = Vec::new();
    for s in &scenarios {
        if crate::capture::stop::interrupted() {
            break;
        }
        still_running(server.as_mut())?;
        let wan = matches!(s.kind, ScenarioKind::Wan(_));
        match (&args.server, server.as_mut()) {
            (Some(_), Some(near)) if wan => {
                near.stop();
                server = None;
            }
            (Some(cmd), None) if !wan => {
                near_starts += 1;
                let log = match near_starts {
                    1 => out.join("server.log"),
                    n => out.join(format!("server.{n}.log")),
                };
                server = start_near(cmd, &log, &target, ready, plan.trace)?;
                if server.is_none() {
                    break;
                }
            }
            _ => {}
        }
        let path = ScenarioPath::of(s, driver.clone(), &plan.target);
        eprintln!("tcpdoctor run: {} ({})…", s.name, path.describe);
        let far = match (&s.kind, &args.server) {
            (ScenarioKind::Wan(spec), Some(cmd)) => {
                let f = FarEnd::open(&plan, &s.name, spec, cmd, ready);
                if f.is_err() && crate::capture::stop::interrupted() {
                    break;
                }
                Some(f?)
            }
            _ => None,
        };
        let r = rt.block_on(scenario::run(&plan, &path, server.as_ref(), live, far));
        // A Ctrl-C from now on stops the server of the other scenarios again.
        if let Some(s) = server.as_ref() {
            crate::capture::stop::kill_group_on_stop(s.pgid());
        }
        let r = r?;
        results.push(r);
        if crate::capture::stop::interrupted() {
            break;
        }
    }
    // A server that died during the last scenario (in any of its --repeat runs) is an error
    // too, not a report of timeouts; one that Ctrl-C stopped is not.
    if !crate::capture::stop::interrupted() {
        still_running(server.as_mut())?;
    }
    if let Some(s) = server.as_mut() {
        s.stop();
    }
    let mut report = RunReport::new(settings, results);
    // An interrupted run is never passed, whatever it measured before the signal.
    report.interrupted = crate::capture::stop::interrupted();
    report.not_run = scenarios
        .iter()
        .skip(report.scenarios.len())
        .map(|s| s.name.clone())
        .collect();
    if let (Some(b), Some(p)) = (&baseline, &args.baseline) {
        compare(
            &mut report,
            &b.scenarios,
            &p.display().to_string(),
            &baseline_warnings,
        );
    }
    let (kinds, any) = kinds(&args.fail_on);
    let worse = args.fail_on_worse.as_ref().map(|figures| {
        if figures.is_empty() || figures.iter().any(|f| f == tcpdoctor_core::run::worse::ALL) {
            vec![tcpdoctor_core::run::worse::ALL.to_string()]
        } else {
            figures.clone()
        }
    });
    report.gate_with_worse(&checks, &kinds, any, worse.as_deref());
    let code = finish(
        &report,
        args.format,
        args.save.as_deref(),
        args.html.as_deref(),
    )?;
    out_dir.settle(code != EXIT_CLEAN);
    Ok(code)
}

/// `--target`: IP:PORT, or unix:PATH in a directory that exists. (A bare path is taken as
/// a Unix socket too, as `bench` and `proxy` do.)
fn parse_target(text: &str) -> anyhow::Result<Addr> {
    let addr = parse_addr("target", text)?;
    check_unix_dir("target", &addr)?;
    Ok(addr)
}

/// Starts `--server` in this namespace and waits until `target` accepts; None when Ctrl-C
/// came first (the server stopped: nothing was measured, and the report says the run was
/// interrupted, exit 1, not that the server failed, exit 2).
fn start_near(
    cmd: &str,
    log: &std::path::Path,
    target: &Addr,
    ready: std::time::Duration,
    trace: bool,
) -> anyhow::Result<Option<Server>> {
    let mut s = Server::start(cmd, log, trace)?;
    crate::capture::stop::kill_group_on_stop(s.pgid());
    match s.wait_ready(target, ready) {
        Ok(()) => Ok(Some(s)),
        Err(_) if crate::capture::stop::interrupted() => {
            s.stop();
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// The server `run` started is still up; else the error that names it, with its output.
fn still_running(server: Option<&mut Server>) -> anyhow::Result<()> {
    if let Some(srv) = server {
        if !srv.running() {
            bail!(
                "the server exited during the run; its output ({}):\n{}",
                srv.log.display(),
                crate::run::server::tail(&srv.log)
            );
        }
    }
    Ok(())
}

fn parse_worse_figure(s: &str) -> Result<String, String> {
    tcpdoctor_core::run::worse::parse_figure(s)
}

pub(crate) fn kinds(fail_on: &[FailOn]) -> (Vec<FindingKind>, bool) {
    let mut v = Vec::new();
    let mut any = false;
    for f in fail_on {
        match f {
            FailOn::Any => any = true,
            FailOn::Kind(k) => v.push(*k),
        }
    }
    (v, any)
}
