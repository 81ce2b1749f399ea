//! The command line: one file per subcommand.

pub mod ab;
pub mod analyze;
mod audit_pass;
pub mod bench;
pub mod capture;
pub mod demo;
pub mod inspect;
mod inspect_trace;
pub mod proxy;
pub mod run;
pub mod sandbox;
mod sandbox_wan;
pub mod specimen;
pub mod stream;
pub mod trace;
mod trace_report;
mod watch;

use clap::{Parser, Subcommand};

/// Finds the TCP interactions that make request/response services fast on localhost and slow
/// everywhere else — Nagle's algorithm waiting on a delayed ACK, responses written one line per
/// syscall, one round trip per command, connection churn, zero windows, timeout stalls — and
/// says, with frame numbers you can check in Wireshark, what it costs and how to fix it.
#[derive(Debug, Parser)]
#[command(
    name = "tcpdoctor",
    version,
    propagate_version = true,
    max_term_width = 100
)]
pub struct Cli {
    /// Parse the command line, say whether it parses, and run nothing (before the
    /// subcommand: `tcpdoctor --check-args run …`). For the test that every example in every
    /// --help parses as written (tests/help_examples.rs); hidden from the help.
    #[arg(long, hide = true)]
    pub check_args: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    Analyze(analyze::AnalyzeArgs),
    Ab(Box<ab::AbArgs>),
    Bench(Box<bench::BenchArgs>),
    Proxy(Box<proxy::ProxyArgs>),
    Specimen(specimen::SpecimenArgs),
    Capture(capture::CaptureArgs),
    Sandbox(sandbox::SandboxArgs),
    Run(Box<run::RunArgs>),
    Demo(demo::DemoArgs),
    Inspect(inspect::InspectArgs),
    Stream(Box<stream::StreamArgs>),
    Trace(trace::TraceArgs),
    Watch(watch::WatchArgs),
}

/// Runs the chosen subcommand and returns the process exit code.
pub fn run(cli: Cli) -> anyhow::Result<u8> {
    if cli.check_args {
        println!("the command line parses");
        return Ok(crate::EXIT_CLEAN);
    }
    match cli.command {
        Command::Analyze(args) => analyze::run(args),
        Command::Ab(args) => ab::run(*args),
        Command::Bench(args) => bench::run(*args),
        Command::Proxy(args) => proxy::run(*args),
        Command::Specimen(args) => specimen::run(args),
        Command::Capture(args) => capture::run(args),
        Command::Sandbox(args) => sandbox::run(args),
        Command::Run(args) => run::run(*args),
        Command::Demo(args) => demo::run(args),
        Command::Inspect(args) => inspect::run(args),
        Command::Stream(args) => stream::run(*args),
        Command::Trace(args) => trace::run(args),
        Command::Watch(args) => watch::run(args),
    }
}

/// The tokio runtime of a command: the current thread for one worker, else that many workers.
/// A thread that goes to sleep drops its spin mark (`crate::spin` rule 4).
pub(crate) fn runtime(threads: usize) -> anyhow::Result<tokio::runtime::Runtime> {
    use anyhow::Context;
    let mut b = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    if threads > 1 {
        b.worker_threads(threads);
    }
    b.enable_all()
        .on_thread_park(crate::spin::drop_mark)
        .build()
        .context("starting the runtime")
}
