//! The model of a `tcpdoctor bench` run: latency histograms, the stall view, the report and
//! its `--repeat` aggregates.
//!
//! The driver (in the binary crate) moves bytes and reads the clock; it records each
//! exchange's latency (finished − intended start, so a stall cannot hide the requests queued
//! behind it) into a [`LatencyHistogram`] and hands the raw measurements here. Percentiles,
//! throughput, CPU per request, the stall view and the spread over repeated runs are computed
//! in this module, once, for every renderer (`report::render_bench_text`, JSON via serde,
//! described by `schema/bench-report.schema.json`).
//!
//! # Layout
//! - `histogram.rs`: HDR latency histogram (ns, three significant digits, up to one hour).
//! - `stall.rs`: the stall view — exchanges clustered near the 40 ms and 200 ms timers.
//! - `report.rs`: settings, measurements, the result of one run, the whole report.
//! - `repeat.rs`: mean, stdev, min and max of each figure over `--repeat` runs; runs pooled.

mod histogram;
mod repeat;
mod report;
mod stall;

pub use histogram::LatencyHistogram;
pub use repeat::{pool, RepeatFigures, RepeatSummary, Spread};
pub use report::{
    BenchReport, BenchSettings, CpuUse, ErrorCounts, LatencySummary, Outcome, ReasonCount,
    RunMeasurements, RunResult, SendLateness, StepResult, BENCH_SCHEMA_VERSION, MAX_ERROR_EXAMPLES,
};
pub use stall::{StallBand, StallView};
