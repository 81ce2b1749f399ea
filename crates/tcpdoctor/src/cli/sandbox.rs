//! `tcpdoctor sandbox`: capture without privileges, in a private network namespace.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use clap::Args;

use super::capture::{describe, CaptureOpts};
use crate::sandbox;

/// The file written when neither -w nor --analyze is given.
const DEFAULT_FILE: &str = "sandbox.pcap";

/// Run a server and its clients in a private network namespace and capture their loopback.
///
/// Needs no root and no CAP_NET_RAW: tcpdoctor creates a user namespace, a network namespace
/// with only a loopback interface, and a PID namespace, runs COMMAND there, and captures
/// everything the commands send on 127.0.0.1 (nothing else on the host is seen or touched).
/// When COMMAND exits, every process it started is gone and the namespaces with it.
///
///   tcpdoctor sandbox -w run.pcap -- sh -c './server --port 7000 & ./client 127.0.0.1:7000'
///   tcpdoctor sandbox --analyze -- ./integration-test.sh
///   tcpdoctor sandbox --delay 15ms --server './srv --port 7000' --analyze -- ./client 198.18.0.1:7000
///
/// One argument runs through /bin/sh -c; several are executed as they are. Writes
/// sandbox.pcap when neither -w nor --analyze is given. Exit status: the command's when it
/// fails; otherwise 1 when --fail-on finds something, else 0 (2: tcpdoctor's own error).
/// Fails, naming the sysctl, when user namespaces are disabled.
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct SandboxArgs {
    #[command(flatten)]
    pub opts: CaptureOpts,

    /// Put a WAN path between the server and the command: this one-way delay each way
    /// (e.g. 15ms: a 30 ms round trip), real kernel TCP at both ends. The server (--server)
    /// runs in a far network namespace, the command in a near one; the command reaches the
    /// server at 198.18.0.1 (also in $TCPDOCTOR_SERVER_HOST, and $TCPDOCTOR_SERVER once the
    /// port is known), even when the server listens on 127.0.0.1. -w FILE writes the client's
    /// end to FILE and the server's end to FILE's stem + .server.pcapng; --analyze analyses
    /// both ends as `analyze --ends` does (in a temporary directory without -w).
    #[arg(long, value_name = "DURATION")]
    pub delay: Option<String>,

    /// With --delay: drop this share of the packets each way, seeded (e.g. 1%; 1%:burst=4
    /// for bursts of 4 on average). See docs/wan.md for the loss models.
    #[arg(long, value_name = "PERCENT", requires = "delay")]
    pub loss: Option<String>,

    /// With --delay: a bottleneck of this rate each way, with a bounded drop-tail queue
    /// (e.g. 10mbit).
    #[arg(long, value_name = "RATE", requires = "delay")]
    pub rate: Option<String>,

    /// With --delay: more of the path definition, as `run --scenarios wan:` takes it after
    /// the delay (e.g. 'jitter=2ms,seed=7' or 'c2s:delay=40ms,mtu=1400'; see docs/wan.md).
    #[arg(long, value_name = "OPTIONS", requires = "delay")]
    pub path: Option<String>,

    /// With --delay: the server command, run with sh -c in the far namespace, stopped (its
    /// whole process group) when COMMAND exits.
    #[arg(long, value_name = "CMD", requires = "delay")]
    pub server: Option<String>,

    /// With --server: wait until the server listens on this port before running COMMAND.
    /// Without it, COMMAND runs once the server listens on any port (the one port it
    /// listens on is then in $TCPDOCTOR_SERVER).
    #[arg(long, value_name = "PORT", requires = "server")]
    pub server_port: Option<u16>,

    /// Do not trace the system calls of the command (and of --server). By default both are
    /// traced without root (ptrace with a seccomp filter that stops them only at the socket
    /// calls that matter), so --analyze can say which write() produced which frame and
    /// whether TCP_NODELAY was ever set (docs/syscalls.md).
    #[arg(long)]
    pub no_trace: bool,

    /// The command to run (after `--`).
    #[arg(required = true, last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

pub fn run(mut args: SandboxArgs) -> anyhow::Result<u8> {
    if let Some(d) = &args.delay {
        let mut text = format!("wan:{d}");
        for (name, v) in [("loss", &args.loss), ("rate", &args.rate)] {
            if let Some(v) = v {
                text.push_str(&format!(",{name}={v}"));
            }
        }
        if let Some(more) = &args.path {
            text.push_str(&format!(",{more}"));
        }
        let spec = tcpdoctor_core::impair::PathSpec::parse(&text)
            .map_err(|e| anyhow::anyhow!("sandbox --delay: the path {text}: {e}"))?;
        if !args.opts.port.is_empty() {
            bail!(
                "sandbox --delay: --port is not available with --delay: the line captures \
                 every packet of the path, both ends (-w FILE, --analyze)"
            );
        }
        if !args.opts.fail_on.is_empty() && !args.opts.analyze {
            bail!("sandbox --delay: --fail-on judges the analysis: give --analyze too");
        }
        return super::sandbox_wan::run(super::sandbox_wan::WanSandbox {
            spec,
            server: args.server.as_deref(),
            server_port: args.server_port,
            ready_timeout: Duration::from_secs(10),
            write: args.opts.write.as_deref(),
            analyze: args
                .opts
                .analyze
                .then(|| (args.opts.format, args.opts.fail_on.clone())),
            command: &args.command,
            trace: !args.no_trace,
        });
    }
    if args.opts.write.is_none() && !args.opts.analyze {
        args.opts.write = Some(PathBuf::from(DEFAULT_FILE));
    }
    if args.command[0].is_empty() {
        bail!("sandbox: the command is empty");
    }
    let cfg = args.opts.config("lo")?;
    let done = sandbox::run(&cfg, &args.command, !args.no_trace, || {
        eprintln!("tcpdoctor: sandbox: {}", describe(&cfg));
    })?;
    if done.status != 0 {
        eprintln!(
            "tcpdoctor: sandbox: the command exited with status {}",
            done.status
        );
    }
    let traces: Vec<(&str, tcpdoctor_core::syscalls::Trace)> =
        done.trace.into_iter().map(|t| ("command", t)).collect();
    let code = args.opts.report_traced(done.capture, &traces)?;
    Ok(if done.status != 0 {
        u8::try_from(done.status).unwrap_or(u8::MAX)
    } else {
        code
    })
}
