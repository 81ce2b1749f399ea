//! Arbitrary bytes through the whole of `tcpdoctor analyze --format json`: the capture
//! reader, flows, turns, detectors, the evidence audit (a second read of the same bytes), the
//! report, its JSON (validated against `schema/analyze-report.schema.json`) and its text, and
//! the `--ends` comparison (see `pipeline/mod.rs`). Nothing may panic.
//!
//! The input is a capture as `analyze` reads it, so the repository's captures are seeds. When
//! its last five bytes begin with `0xD5` they are a trailer instead, and the capture before it
//! is analysed as `tcpdoctor run` has it analysed: told its client is the scripted driver (the
//! four bytes pick `--pipeline`, `--connections`, the requests and `--rate`), so the
//! driver-only rules run too. Seed and run:
//!
//! ```text
//! fuzz/seed-corpus.sh
//! cd fuzz && cargo +nightly fuzz run analyze_pipeline -- -jobs=1 -max_total_time=900 -rss_limit_mb=2048 -timeout=10
//! ```

#![no_main]

mod pipeline;

use libfuzzer_sys::fuzz_target;
use pipeline::{client_from, Driver};

fuzz_target!(|data: &[u8]| {
    let (capture, driver, drop) = match data {
        [rest @ .., 0xD5, a, b, c, d] => {
            let driver = Driver {
                client: Some(client_from([*a, *b, *c, *d])),
                ends: None,
            };
            (rest, driver, *a ^ *d)
        }
        _ => (data, Driver::default(), data.len() as u8),
    };
    pipeline::run(capture, driver, drop);
});
