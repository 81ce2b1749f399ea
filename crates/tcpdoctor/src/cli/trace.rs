//! `tcpdoctor trace`: run a command traced and say what it asked of its TCP sockets.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;
use tcpdoctor_core::syscalls::{Trace, TraceStatus};

use crate::trace::{self, Spawned};

/// Run a command traced, and report the socket system calls it made.
///
/// Without root: tcpdoctor starts COMMAND as its own child, traced from its first instruction
/// (ptrace), with a seccomp filter that stops it only at the calls that matter — the write and
/// send families, the read and receive families, setsockopt/getsockopt, ioctl, epoll_wait,
/// poll, select, shutdown, close, connect, accept — so everything else runs at full speed.
/// Forks and threads are followed. When COMMAND exits, the report says, per TCP socket, how
/// many of each call it made, how many writes each response took, and whether TCP_NODELAY
/// was ever set (see docs/syscalls.md).
///
///   tcpdoctor trace -- ./server --port 7000
///   tcpdoctor trace --format json -o calls.json -- python3 client.py 127.0.0.1:7000
///
/// The tracer stays with COMMAND for its life: if tcpdoctor is killed, COMMAND is killed too
/// (a program left with the filter and no tracer would see every trapped call fail).
/// Exit status: COMMAND's own (128 + N when a signal N ended it); 2 on tcpdoctor's errors.
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct TraceArgs {
    /// Report format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: super::analyze::Format,

    /// Write the report to this file instead of standard output (text goes to stderr when
    /// COMMAND shares the terminal's standard output).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// The command (after `--`); one argument runs through /bin/sh -c.
    #[arg(required = true, last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

pub fn run(args: TraceArgs) -> anyhow::Result<u8> {
    if args.command[0].is_empty() {
        bail!("trace: the command is empty");
    }
    let words = args.command.clone();
    if words.len() > 1 && !trace::found(&words[0]) {
        bail!(
            "trace: {}: no such program (not a file, not on PATH)",
            words[0]
        );
    }
    let spawned = trace::spawn(crate::sandbox::command(&words))
        .with_context(|| format!("trace: starting `{}`", args.command.join(" ")))?;
    let (status, report) = match spawned {
        Spawned::Traced(tracer) => {
            let status = loop {
                if let Some(s) = tracer.try_wait() {
                    break s;
                }
                std::thread::sleep(Duration::from_millis(5));
            };
            (status, tracer.finish(Duration::from_secs(5)))
        }
        Spawned::Untraced(mut child, why) => {
            eprintln!("tcpdoctor: trace: not traced: {why}");
            let status = child.wait()?;
            (
                status,
                Trace::not_traced(TraceStatus::Unavailable { reason: why }),
            )
        }
    };
    let text = super::trace_report::render(&report, args.format)?;
    match &args.output {
        Some(path) => std::fs::write(path, text)
            .with_context(|| format!("trace: writing {}", path.display()))?,
        None => eprint!("{text}"),
    }
    use std::os::unix::process::ExitStatusExt;
    Ok(match (status.code(), status.signal()) {
        (Some(c), _) => u8::try_from(c).unwrap_or(u8::MAX),
        (None, Some(sig)) => u8::try_from(128 + sig).unwrap_or(u8::MAX),
        _ => u8::MAX,
    })
}
