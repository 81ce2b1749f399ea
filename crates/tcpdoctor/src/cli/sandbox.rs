//! `tcpdoctor sandbox`: capture without privileges, in a private network namespace.

use std::path::PathBuf;

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

    /// The command to run (after `--`).
    #[arg(required = true, last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

pub fn run(mut args: SandboxArgs) -> anyhow::Result<u8> {
    if args.opts.write.is_none() && !args.opts.analyze {
        args.opts.write = Some(PathBuf::from(DEFAULT_FILE));
    }
    if args.command[0].is_empty() {
        bail!("sandbox: the command is empty");
    }
    let cfg = args.opts.config("lo")?;
    let done = sandbox::run(&cfg, &args.command, || {
        eprintln!("tcpdoctor: sandbox: {}", describe(&cfg));
    })?;
    if done.status != 0 {
        eprintln!(
            "tcpdoctor: sandbox: the command exited with status {}",
            done.status
        );
    }
    let code = args.opts.report(done.capture)?;
    Ok(if done.status != 0 {
        u8::try_from(done.status).unwrap_or(u8::MAX)
    } else {
        code
    })
}
