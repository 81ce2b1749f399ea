//! `tcpdoctor demo`: every pathology reproduced on this machine, diagnosed and fixed.

use std::path::PathBuf;

use clap::Args;
use tcpdoctor_core::run::{RunReport, RunSettings};

use super::analyze::Format;
use super::run::{check_output_file, finish, live_capture, OutDir};

/// See every pathology reproduced, diagnosed and fixed in about 12 s — nothing to set up.
///
/// Starts built-in specimen servers (this binary, as subprocesses) and drives each through
/// the case that shows a pathology, then through its fix: a per-line server with Nagle, the
/// same stall made by a Nagle middlebox, a client that writes requests in two pieces, a
/// client that pays one round trip per command over a real 10 ms path, a server that spins on
/// its send queue, and the per-line server 15 ms away (two namespaces and a delay line: real
/// kernel TCP at both ends). For each it prints the diagnosis (the finding's kind, as --fail-on takes it),
/// every finding of both scenarios, the fix and the before/after table.
///
/// Time: 6 cases of 20 to 200 exchanges per scenario; about 12 s in all (12.2 s measured on a
/// 2-core machine), most of it the delayed-ACK stalls and round trips the cases reproduce.
///
/// Packets are captured live on lo when permitted; as an ordinary user the demo first moves
/// into a private network namespace (a user namespace: no root needed) unless --no-sandbox.
/// Exit 0 when every case was reproduced and fixed, 1 otherwise; Ctrl-C stops the case under
/// way and its servers, and reports what was measured as interrupted (exit 1).
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct DemoArgs {
    /// Also write the report as one self-contained HTML file.
    #[arg(long, value_name = "FILE.html")]
    pub html: Option<PathBuf>,

    /// Write the report as JSON too (the format `run --baseline` reads).
    #[arg(long, value_name = "FILE.json")]
    pub save: Option<PathBuf>,

    /// Where captures and server logs go, kept (default: a new directory under the temp dir,
    /// removed when every case was reproduced and fixed, kept and named on stderr otherwise).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Do not enter a private network namespace when live capture needs one.
    #[arg(long)]
    pub no_sandbox: bool,

    /// Output format on stdout: text (for people) or json (schema/run-report.schema.json).
    #[arg(long, value_enum, default_value_t = Format::Text, hide_possible_values = true)]
    pub format: Format,
}

pub fn run(args: DemoArgs) -> anyhow::Result<u8> {
    check_output_file("--save", args.save.as_deref())?;
    check_output_file("--html", args.html.as_deref())?;
    let mut out_dir = OutDir::new(args.out.as_deref(), "demo")?;
    let out = out_dir.path.clone();
    // A private network namespace (through a user namespace unless root): live capture on
    // its loopback, and the WAN cases' paths built from it, nothing on the host touched.
    let mut wan_ok: Result<(), String> =
        Err("--no-sandbox: the WAN cases need network namespaces of their own".into());
    if !args.no_sandbox {
        match crate::sandbox::namespace::enter_net_as_root() {
            Ok(()) => wan_ok = crate::wan::tun::probe().map_err(|e| format!("{e:#}")),
            Err(e) => {
                eprintln!(
                    "tcpdoctor demo: no private network namespace ({e:#}); packets come from \
                     the proxy's recordings only, and the WAN cases cannot run"
                );
                wan_ok = Err(format!("{e:#}"));
            }
        }
    }
    let (live, reason) = live_capture();
    crate::capture::stop::install();
    let rt = super::runtime(2)?;
    let started = std::time::Instant::now();
    let demo = crate::run::demo::run(&rt, &out, live, &reason, &wan_ok)?;
    let settings = RunSettings {
        command: "demo".into(),
        target: "built-in specimens on 127.0.0.1".into(),
        script: "per case".into(),
        script_digest: None,
        server: None,
        scenarios: demo.scenarios.iter().map(|s| s.name.clone()).collect(),
        requests: demo
            .scenarios
            .iter()
            .map(|s| s.figures.exchanges)
            .max()
            .unwrap_or(0),
        repeat: 1,
        connections: 1,
        pipeline: 1,
        output_dir: out.display().to_string(),
    };
    let mut report = RunReport::new(settings, demo.scenarios);
    report.cases = demo.cases;
    report.comparisons = demo.comparisons;
    report.interrupted = crate::capture::stop::interrupted();
    report.not_run = demo.not_run;
    report.gate_demo();
    report.elapsed_s = Some(tcpdoctor_core::stats::round3(
        started.elapsed().as_secs_f64(),
    ));
    let good = report
        .cases
        .iter()
        .filter(|c| c.reproduced && c.fixed)
        .count();
    let all = report.cases.len() + report.not_run.len();
    eprintln!(
        "tcpdoctor demo: {good} of {all} pathologies reproduced and fixed in {:.1} s{}",
        started.elapsed().as_secs_f64(),
        if report.interrupted {
            " (interrupted)"
        } else {
            ""
        }
    );
    let code = finish(
        &report,
        args.format,
        args.save.as_deref(),
        args.html.as_deref(),
    )?;
    out_dir.settle(code != crate::EXIT_CLEAN);
    Ok(code)
}
