//! A traced program's calls joined to a capture's frames and cited by the findings that
//! quote that capture (`tcpdoctor_core::syscalls::{join, cite}`): one more read of the file.

use std::fs::File;
use std::path::Path;

use anyhow::Context;
use tcpdoctor_core::report::Finding;
use tcpdoctor_core::syscalls::{cite, join, Trace};
use tcpdoctor_core::wire::CaptureReader;

use crate::capture_file::Input;

/// Joins `trace` to the frames of `file` and adds what it shows to `findings` (which quote
/// `file`'s frame numbers). Returns how many findings were cited.
pub fn cite_from(findings: &mut [Finding], trace: &Trace, file: &Path) -> anyhow::Result<usize> {
    if trace.calls.is_empty() || findings.is_empty() {
        return Ok(0);
    }
    let name = file.display().to_string();
    let f = File::open(file).with_context(|| format!("joining the trace to {name}"))?;
    let input = Input::new(f).with_context(|| format!("joining the trace to {name}"))?;
    let mut reader = CaptureReader::with_buffer_size(input, 4 << 20)
        .with_context(|| format!("joining the trace to {name}"))?;
    let joins = join::join_capture(trace, &mut reader)
        .with_context(|| format!("joining the trace to {name}"))?;
    Ok(cite::cite(findings, trace, &joins))
}
