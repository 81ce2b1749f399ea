//! Command mode's "why": each side's command run again inside `tcpdoctor sandbox` (a private
//! network namespace whose loopback is captured, no root needed), untraced, and the capture
//! analysed here. These runs are not measured: recording every packet costs CPU.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use tcpdoctor_core::ab::Brief;

use super::watch::{watch, Stop};
use super::WhyRun;

/// Runs `cmd` in the sandbox writing `pcap`, then analyses it; `None` with the reason when
/// the run or the capture failed.
pub fn capture_and_analyse(
    cmd: &str,
    pcap: &Path,
    hang_after: Duration,
) -> anyhow::Result<Result<WhyRun, String>> {
    let exe = std::env::current_exe().context("finding this tcpdoctor's own binary")?;
    let log = pcap.with_extension("log");
    let out = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let err = out.try_clone()?;
    let started = Instant::now();
    let mut child = {
        use std::os::unix::process::CommandExt;
        Command::new(&exe)
            .args(["sandbox", "--no-trace", "-w"])
            .arg(pcap)
            .args(["--", cmd])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {} sandbox", exe.display()))?
    };
    let w = watch(
        &mut child,
        started,
        hang_after,
        None,
        Stop::Interrupt(Duration::from_secs(5)),
    )?;
    if w.hung.is_some() {
        return Ok(Err(format!(
            "the captured run hung (no progress for {} s); see {}",
            hang_after.as_secs_f64(),
            log.display()
        )));
    }
    if !pcap.exists() {
        return Ok(Err(format!(
            "no capture was written; see {}",
            log.display()
        )));
    }
    match crate::cli::analyze::analyze_file(&pcap.to_path_buf(), None) {
        Ok((summary, findings)) => Ok(Ok(WhyRun {
            scenario: None,
            source: pcap.display().to_string(),
            findings: findings.iter().map(Brief::of).collect(),
            flows: summary.flows,
            exchanges: summary.exchanges,
            tcp_segments: summary.tcp_segments,
        })),
        // The analysis's own words for a capture without TCP (it suggests a capture filter):
        // here the capture is the sandbox's whole loopback, so the command's traffic is
        // simply not TCP.
        Err(e) if format!("{e:#}").contains("no TCP packets in this capture") => Ok(Err(format!(
            "its run sent no TCP packet over the sandbox's loopback (its traffic went over a \
             Unix socket, a pipe or shared memory), so there is nothing on the wire to \
             analyse ({})",
            pcap.display()
        ))),
        Err(e) => Ok(Err(format!("analysing {}: {e:#}", pcap.display()))),
    }
}
