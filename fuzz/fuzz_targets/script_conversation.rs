//! Feeds arbitrary bytes to a conversation as responses, and arbitrary text to the script
//! parser. Nothing may panic; bytes fed whole and fed in small pieces must complete the same
//! exchanges, or fail both (an error drops what its own call completed, so fed whole, fewer
//! exchanges may come before it).
//!
//! Input: byte 0 picks the script (a preset or one framing), byte 1 the piece size; the rest
//! is what the server "sent". When byte 0 is 255 the rest is parsed as a script instead.

#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use tcpdoctor_core::script::{Conversation, Script};
use tcpdoctor_core::Timestamp;

const FRAMED: &[&str] = &[
    "read = { until = \"\\r\\n.\\r\\n\" }",
    "read = { until_line = '^\\.\\r?$', single_line_if = '^5' }",
    "read = { length = 7 }",
    "read = { length_prefix = \"u16le\", counts_itself = true }",
    "read = \"resp\"",
    "read = \"http\"",
];

fn script(pick: u8) -> Option<Script> {
    let presets = ["resp", "http1", "memcache", "line", "echo", "echo-line"];
    let pick = pick as usize % (presets.len() + FRAMED.len());
    if let Some(name) = presets.get(pick) {
        return Script::preset(name, &[]).ok();
    }
    let read = FRAMED[pick - presets.len()];
    let src = format!("max_response = 4096\n[[steps]]\nsend = \"Q {{i}}\\n\"\n{read}\n");
    Script::parse(&src).ok()
}

/// Completed exchanges (step, response bytes) and the first error, feeding `data` in pieces.
fn run(script: &Arc<Script>, data: &[u8], piece: usize) -> (Vec<(usize, usize)>, Option<String>) {
    let mut conv = Conversation::new(Arc::clone(script), 0, 1);
    for k in 0..8 {
        if conv.next_request(Timestamp::from_nanos(k)).is_none() {
            break;
        }
    }
    let mut done = Vec::new();
    for chunk in data.chunks(piece.max(1)) {
        match conv.on_bytes(chunk, Timestamp::ZERO) {
            Ok(v) => done.extend(v.iter().map(|c| (c.step.0, c.response_bytes))),
            Err(e) => return (done, Some(e.message)),
        }
    }
    (done, None)
}

fuzz_target!(|input: &[u8]| {
    let [pick, piece, data @ ..] = input else {
        return;
    };
    if *pick == 255 {
        if let Ok(text) = std::str::from_utf8(data) {
            let _ = Script::parse(text);
        }
        return;
    }
    let Some(script) = script(*pick) else {
        return;
    };
    let script = Arc::new(script);
    let whole = run(&script, data, data.len());
    let pieces = run(&script, data, *piece as usize % 16 + 1);
    assert_eq!(whole.1.is_some(), pieces.1.is_some());
    if whole.1.is_none() {
        assert_eq!(whole.0, pieces.0);
    } else {
        assert!(pieces.0.starts_with(&whole.0));
    }
});
