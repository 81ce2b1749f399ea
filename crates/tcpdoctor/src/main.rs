//! tcpdoctor: names the TCP interactions that make request/response services slow.
//!
//! This binary is the thin shell: argument parsing, files, terminals, exit codes. Everything
//! that can be computed from evidence alone lives in `tcpdoctor-core`.

mod ab;
mod bench;
mod capture;
mod capture_file;
mod cli;
mod heap;
mod inspect;
mod limits;
mod output;
mod procfs;
mod proxy;
mod read_ahead;
mod run;
mod sandbox;
mod scratch;
mod shards;
mod specimen;
mod spin;
mod stream;
mod trace;
mod wan;
mod watch;

use std::process::ExitCode;

use clap::Parser;

/// Exit codes (ripgrep's policy): 0 clean, 1 found what you asked to fail on, 2 error.
pub const EXIT_CLEAN: u8 = 0;
pub const EXIT_FOUND: u8 = 1;
pub const EXIT_ERROR: u8 = 2;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            if output::is_broken_pipe(&e) {
                return ExitCode::from(EXIT_CLEAN);
            }
            eprintln!("tcpdoctor: error: {e:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}
