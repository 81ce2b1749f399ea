//! The evidence audit's pass over a capture: read the file again and hand the audit only the
//! frames the findings cite (and the ranges their claims must scan), stopping after the last.

use std::fs::File;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use tcpdoctor_core::audit::{settle, Auditor};
use tcpdoctor_core::report::{CaptureSummary, Finding};
use tcpdoctor_core::wire::CaptureReader;

use crate::capture_file::Input;

/// Audits `findings` against the frames of `path`; the refuted ones go to `summary.withdrawn`.
pub(crate) fn audit_findings(
    path: &Path,
    summary: &mut CaptureSummary,
    findings: Vec<Finding>,
) -> anyhow::Result<Vec<Finding>> {
    let name = path.display().to_string();
    let duration = Duration::from_secs_f64(summary.duration_ms.max(0.0) / 1e3);
    let mut auditor = Auditor::new(&findings, duration);
    let mut frames_read = 0;
    if auditor.last_wanted().is_some() {
        // A pipe or a process substitution cannot be read twice: say so and keep the findings
        // unaudited (the report then has no `audit` line) rather than fail the capture.
        if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
            eprintln!(
                "tcpdoctor: note: {name} is not a regular file (a pipe?), so the evidence audit \
                 could not read its frames again: its findings are shown unaudited. Save the \
                 capture to a file to have them checked."
            );
            return Ok(findings);
        }
        let file = File::open(path).with_context(|| format!("auditing {name}"))?;
        let input = Input::new(file).with_context(|| format!("auditing {name}"))?;
        let mut reader = CaptureReader::with_buffer_size(input, 4 << 20)
            .with_context(|| format!("auditing {name}"))?;
        frames_read = auditor
            .read_capture(&mut reader)
            .with_context(|| format!("auditing {name}"))?;
    }
    let verdicts = auditor.finish();
    Ok(settle(summary, findings, verdicts, frames_read))
}
