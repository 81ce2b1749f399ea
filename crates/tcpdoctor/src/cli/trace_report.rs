//! The report of `tcpdoctor trace`: the core's summary of a trace (docs/syscalls.md), as
//! text or as JSON (the `syscalls` block of `run`'s report, schema/run-report.schema.json
//! `$defs/syscalls`).

use tcpdoctor_core::syscalls::{render_text, summarize, Trace};

use super::analyze::Format;

pub fn render(trace: &Trace, format: Format) -> anyhow::Result<String> {
    let report = summarize(trace, None);
    Ok(match format {
        Format::Json => serde_json::to_string_pretty(&report)? + "\n",
        Format::Text => render_text(&report),
    })
}
