//! Arbitrary bytes through the whole of `tcpdoctor analyze --format json`: the capture
//! reader, flows, turns, detectors, the evidence audit (a second read of the same bytes), the
//! report, its JSON (validated against `schema/analyze-report.schema.json`) and its text, and
//! the `--ends` comparison (see `pipeline/mod.rs`). Nothing may panic.
//!
//! The input is a capture as `analyze` reads it, so the repository's captures are seeds. One
//! of the last eight bytes picks the run: half the inputs are also analysed as `tcpdoctor run`
//! has its captures analysed, told the client is the scripted driver (four bytes from the
//! middle of the input pick `--pipeline`, `--connections`, the requests and `--rate`), so the
//! driver-only rules run too. Seed and run:
//!
//! ```text
//! fuzz/seed-corpus.sh
//! cd fuzz && cargo +nightly fuzz run analyze_pipeline -- -jobs=1 -max_total_time=900 -rss_limit_mb=2048 -timeout=10 -max_len=131072
//! ```

#![no_main]

mod pipeline;

use libfuzzer_sys::fuzz_target;
use pipeline::{client_from, Driver};

fuzz_target!(|data: &[u8]| {
    let pick = data.get(data.len().saturating_sub(8)).copied().unwrap_or(0);
    let drop = data.len() as u8 ^ pick;
    pipeline::run(data, Driver::default(), drop);
    if pick & 1 == 1 {
        let mid = data.len() / 2;
        let flags = match data.get(mid..mid + 4) {
            Some(b) => [b[0], b[1], b[2], b[3]],
            None => [pick; 4],
        };
        let driver = Driver {
            client: Some(client_from(flags)),
            ends: None,
        };
        pipeline::run(data, driver, drop);
    }
});
