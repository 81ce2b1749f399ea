//! The path of `tcpdoctor analyze --format json` over one capture held in memory, shared by the
//! `analyze_pipeline` and `analyze_structured` targets: the capture reader, the analyzer (flows,
//! turns, detectors) with the end-of-file handling of `cli/analyze.rs` (`analyze_file_as`),
//! `finish`, the evidence audit over a second read of the same bytes (`cli/audit_pass.rs`:
//! `Auditor::read_capture` and `settle`), then the report, its JSON (checked against
//! `schema/analyze-report.schema.json`) and its text. With `--ends` in mind, the TCP segments
//! are also kept as two ends of one path (the second missing some frames, later by a fixed
//! delay) and compared.
//!
//! Gzip is the shell's (`capture_file::Input`): inputs are uncompressed captures.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tcpdoctor_core::analysis::{Analyzer, ScriptedClient};
use tcpdoctor_core::audit::{settle, Auditor};
use tcpdoctor_core::ends::{compare, render_ends, EndCapture};
use tcpdoctor_core::message_ends::MessageEnds;
use tcpdoctor_core::report::{render_text, Report, Truncation};
use tcpdoctor_core::wire::{decode_tcp, CaptureReader};

/// What the run was told about the traffic's client, as `tcpdoctor run` tells it.
#[derive(Default)]
pub struct Driver {
    pub client: Option<ScriptedClient>,
    pub ends: Option<Arc<MessageEnds>>,
}

/// A scripted client from four bytes, within what `run`'s flags accept.
pub fn client_from(b: [u8; 4]) -> ScriptedClient {
    ScriptedClient {
        pipeline: 1 + u32::from(b[0] % 64),
        connections: 1 + u32::from(b[1]) * 7,
        requests: u64::from(b[2]) * 997,
        rate: (b[3] & 1 == 1).then(|| 0.01 * 10f64.powf(f64::from(b[3] >> 1) / 127.0 * 11.0)),
    }
}

fn schema() -> &'static jsonschema::Validator {
    static SCHEMA: OnceLock<jsonschema::Validator> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let text = include_str!("../../../schema/analyze-report.schema.json");
        let schema: serde_json::Value = serde_json::from_str(text).expect("schema is JSON");
        jsonschema::validator_for(&schema).expect("schema compiles")
    })
}

/// Runs `data` through the whole pipeline. `drop` picks which frames the second end of the
/// path misses (frame numbers whose low bits, masked by it, are zero).
pub fn run(data: &[u8], driver: Driver, drop: u8) {
    let name = "fuzz.pcap";
    let Ok(mut reader) = CaptureReader::with_buffer_size(data, data.len() + 64) else {
        return;
    };
    let format = reader.format();
    let mut analyzer = match (driver.client, driver.ends) {
        (None, None) => Analyzer::default(),
        (client, ends) => Analyzer::with_driver(client, ends),
    };
    let mut near = EndCapture::new("near.pcap");
    let mut far = EndCapture::new("far.pcap");
    let delay = Duration::from_micros(u64::from(drop) * 37);
    let truncated = loop {
        let frame = match reader.next_frame() {
            Ok(Some(frame)) => frame,
            Ok(None) => break None,
            Err(e) if e.is_cut_short() => {
                break Truncation::from_error(&e, reader.frames_read(), false)
            }
            // The shell fails the file with the reader's message.
            Err(e) => {
                let _ = e.to_string();
                return;
            }
        };
        if let Some(seg) = decode_tcp(frame.link, frame.data, frame.orig_len).tcp() {
            near.on_segment(frame.number, frame.ts, seg);
            if frame.number & u64::from(drop >> 4) != 0 || drop >> 4 == 0 {
                far.on_segment(frame.number, frame.ts.plus(delay), seg);
            }
        }
        analyzer.on_frame(
            frame.number,
            frame.ts,
            frame.link,
            frame.data,
            frame.orig_len,
        );
    };
    let (mut summary, findings) = analyzer.finish(name, format.name());
    if summary.tcp_segments == 0 {
        let _ = summary.no_tcp_message();
        return;
    }
    summary.truncated = truncated;

    // The evidence audit, as `cli/audit_pass.rs` runs it.
    let duration = Duration::from_secs_f64(summary.duration_ms.max(0.0) / 1e3);
    let mut auditor = Auditor::new(&findings, duration);
    let mut frames_read = 0;
    if auditor.last_wanted().is_some() {
        let mut again = CaptureReader::with_buffer_size(data, 4096)
            .expect("the second read opens what the first did");
        frames_read = auditor
            .read_capture(&mut again)
            .expect("the second read fails nowhere the first did not");
    }
    let verdicts = auditor.finish();
    let findings = settle(&mut summary, findings, verdicts, frames_read);

    let mut report = Report::new(vec![summary], findings);
    let ends = compare(near, far);
    let _ = render_ends(&ends);
    report.ends = Some(ends);
    let json = serde_json::to_string_pretty(&report).expect("the report serialises");
    let value: serde_json::Value = serde_json::from_str(&json).expect("the JSON parses back");
    let errors: Vec<String> = schema()
        .iter_errors(&value)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "report violates the schema: {errors:#?}\n{json}"
    );
    let text = render_text(&report);
    // To see what an input does: run the target's binary on the file with this set.
    if std::env::var_os("TCPDOCTOR_FUZZ_SHOW").is_some() {
        eprintln!("{text}\n{json}");
    }
}
