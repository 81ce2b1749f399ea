//! The pure core of tcpdoctor.
//!
//! tcpdoctor names the TCP interactions that make request/response services fast on localhost
//! and slow everywhere else (Nagle × delayed ACK, fragmented writes, round-trip-bound protocols,
//! …). This crate holds everything that can be computed from evidence alone: it never opens a
//! socket, reads a clock or spawns a task. Time arrives as data ([`Timestamp`]).
//!
//! # Layout
//! - [`wire`]: capture files (pcap, pcapng) and the link/IP/TCP headers inside them, decoded
//!   into [`wire::TcpSegment`]s. Never panics on untrusted bytes; errors carry byte offsets.
//! - [`seq`]: TCP sequence numbers with wrapping comparisons.
//! - [`flow`]: the flow table — TCP connections, client/server roles, per-direction sequence,
//!   ACK and window tracking, retransmission and out-of-order recognition, RTT estimates.
//! - [`turns`]: who talks when — turns (a run of data from one side) and exchanges (a request
//!   turn and its response turn), with the pauses inside a turn and what released them.
//! - [`detect`]: one detector per finding kind, each fed the same event stream.
//! - [`hops`]: the two legs of a proxy or sidecar captured on both sides, paired from their
//!   turns' sizes and timing, so findings can name the hop instead of the server behind it.
//! - [`analysis`]: wires a packet stream through flows, turns and detectors into a report.
//! - [`message_ends`]: where `run`'s driver knows its messages ended (the script's framing),
//!   handed to the analysis as evidence the wire lacks.
//! - [`audit`]: the evidence audit — re-decodes the frames findings cite and checks their
//!   claims with its own decoder and arithmetic.
//! - [`report`]: the report model every renderer reads (text, JSON).
//! - [`bench`]: the model of a `bench` run: latency histograms, the stall view, repeat
//!   aggregates.
//! - [`script`]: conversation scripts for `bench` — TOML validated into a [`script::Script`],
//!   presets, response framings, and [`script::Conversation`], one connection's sans-IO run.
//! - [`inspect`]: a live process's sockets as the kernel sees them (`tcp_info`, options read
//!   from the live socket, process counters) and the findings they support.
//! - [`units`]: parsing and printing durations and sizes (`40ms`, `1.5s`, `64KiB`).
//! - [`numfmt`]: how every report prints a figure, a count and its noun (`39`, `0.082`,
//!   `1 exchange`).

pub mod ab;
pub mod analysis;
pub mod audit;
pub mod bench;
pub(crate) mod compact;
pub mod detect;
pub mod ends;
pub mod flow;
pub(crate) mod fxhash;
pub mod hops;
pub mod impair;
pub mod inspect;
pub mod message_ends;
pub mod numfmt;
pub mod report;
pub mod run;
pub mod script;
pub mod seq;
pub mod stats;
pub mod stream;
pub mod syscalls;
pub mod time;
pub mod turns;
pub mod units;
pub mod watch;
pub mod wire;

pub use time::Timestamp;
