//! A one-way stream's figures: messages and bytes per second, and what each message cost on
//! the wire (segments) and in the program (system calls) — the figures messaging libraries
//! publish, with the two that say why.
//!
//! `tcpdoctor stream` is one end of the stream; the server under test is the other: the
//! sender (`from-server`: tcpdoctor reads as fast as it can and counts whole messages with the
//! [`framing`]) or the receiver (`to-server`: tcpdoctor writes framed messages as fast as the
//! server takes them). The shell measures one window after a warm-up and hands the counts
//! here ([`Measured`]); this module computes the figures and the sentences.
//!
//! Rules:
//! 1. The rates are over the measured window only: whole messages counted in it (from the
//!    server), or bytes the server read in it over the message size (to the server): the
//!    bytes its TCP acknowledged, less the growth of what its sockets hold unread (socket
//!    diagnostics; the kernel grows a receive buffer while a stream runs). Where the
//!    server's sockets cannot be seen (another network namespace), the acknowledged bytes,
//!    with a warning; a Unix socket: the bytes its socket took.
//! 2. Segments per message (from the server): the data segments the kernel received on
//!    tcpdoctor's sockets in the window (`tcpi_data_segs_in`), over the messages. Exact
//!    counts, but of a pace: a sender whose send queue holds unsent bytes when it writes has
//!    the kernel merge its writes, so the same program sends fewer segments per message when
//!    it runs faster. Traced, the tracer stops the sender at each call and its queue empties
//!    in between: its segments per message are an upper bound, said in a warning.
//! 3. System calls per message (when the server was started and traced): its calls of the
//!    send family (from the server) or the receive family (to the server) that moved bytes
//!    on the sockets whose peer is one of tcpdoctor's connections, in the window, over the
//!    messages those calls moved (their bytes over the mean message size). Not over the
//!    window's messages: the buffers between the two programs hold thousands of messages
//!    sent before the window began (or read after it ended), and a receive buffer the kernel
//!    grows during the window holds more at its end than at its start.
//! 4. The sender writes each message on its own when it makes at least [`OWN_CALL`] send
//!    calls per message, the messages being small (at most half a full segment): a system
//!    call per message, and a packet per message whenever its queue is empty as it writes
//!    (rule 2: the traced run cannot say how often that is untraced, so the reading does not
//!    rest on its segments). At most [`BATCHED_CALL`] calls per message: the sender batches.
//!    To the server: at least twice [`OWN_CALL`] receive calls per message read each message
//!    in parts; at most [`BATCHED_CALL`] read many per call. Nothing is said without the
//!    trace.
//! 5. A traced server is stopped at each call it makes: its rate is lower than untraced.
//!    The report says so; rates to compare are measured with `--no-trace`.

pub mod framing;
#[cfg(test)]
mod tests;
mod text;

use serde::Serialize;

pub use framing::{Counter, Framing};
pub use text::render;

/// Send (or receive) calls per message from which a message is written (read) on its own.
pub const OWN_CALL: f64 = 0.9;
/// Calls per message up to which the sender batches.
pub const BATCHED_CALL: f64 = 0.5;

/// Which way the stream flows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    /// The server sends, tcpdoctor reads.
    FromServer,
    /// tcpdoctor sends, the server reads.
    ToServer,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::FromServer => "from-server",
            Direction::ToServer => "to-server",
        }
    }
}

/// What the server's trace gave, for rule 3.
#[derive(Clone, Debug, PartialEq)]
pub enum CallsSeen {
    /// Not started by tcpdoctor, or started untraced, or the tracer refused: why.
    Unknown(String),
    /// The calls of the family, by call name, on the stream's sockets in the window, and
    /// the bytes they moved.
    Counted { by: Vec<(String, u64)>, bytes: u64 },
}

/// The shell's counts over the measured window.
#[derive(Clone, Debug)]
pub struct Measured {
    pub direction: Direction,
    pub seconds: f64,
    pub messages: u64,
    pub bytes: u64,
    /// Rule 2: data segments received (from the server), or why none are known.
    pub data_segments: Result<u64, String>,
    /// The largest segment the connections carry (the MSS), when known.
    pub full_segment: Option<u32>,
    /// The server's CPU seconds in the window, when it was started here.
    pub server_cpu_s: Option<f64>,
    pub calls: CallsSeen,
    /// What the shell could not measure as rule 1 says (warnings).
    pub notes: Vec<String>,
    /// The server was traced (rule 5).
    pub traced: bool,
}

/// What to describe the stream as.
#[derive(Clone, Debug, Serialize)]
pub struct Setup {
    pub target: String,
    pub direction: Direction,
    pub framing: &'static str,
    /// Bytes of each message tcpdoctor writes (to the server), or of a `fixed` message.
    pub message_bytes: Option<u64>,
    pub connections: u64,
    pub warmup_s: f64,
    pub server: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Segments {
    pub data_segments: u64,
    pub per_message: Option<f64>,
    pub bytes_per_segment: Option<f64>,
    pub full_segment: Option<u32>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Calls {
    /// `send` (the server sends) or `receive`.
    pub family: &'static str,
    pub total: u64,
    /// Bytes the calls moved.
    pub bytes: u64,
    pub per_message: Option<f64>,
    pub by_call: Vec<CallCount>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CallCount {
    pub call: String,
    pub count: u64,
}

/// The `--format json` report (schema/stream-report.schema.json).
#[derive(Clone, Debug, Serialize)]
pub struct StreamReport {
    pub schema_version: u32,
    pub tool: String,
    #[serde(flatten)]
    pub setup: Setup,
    pub seconds: f64,
    pub messages: u64,
    pub bytes: u64,
    pub messages_per_s: f64,
    pub bytes_per_s: f64,
    pub mean_message_bytes: Option<f64>,
    pub segments: Option<Segments>,
    /// Why `segments` is absent.
    pub segments_unknown: Option<String>,
    pub server_cpu_s: Option<f64>,
    pub server_cpu_us_per_message: Option<f64>,
    pub calls: Option<Calls>,
    /// Why `calls` is absent.
    pub calls_unknown: Option<String>,
    pub traced: bool,
    /// Rule 4's reading, when the counts support one.
    pub reading: Option<String>,
    pub warnings: Vec<String>,
}

fn per(n: u64, messages: u64) -> Option<f64> {
    (messages > 0).then(|| n as f64 / messages as f64)
}

/// The figures and sentences of one measured window.
pub fn report(tool: &str, setup: Setup, m: Measured) -> StreamReport {
    let rate = |n: u64| {
        if m.seconds > 0.0 {
            n as f64 / m.seconds
        } else {
            0.0
        }
    };
    let mean = per(m.bytes, m.messages);
    let (segments, segments_unknown) = match (&m.data_segments, m.direction) {
        (Ok(n), Direction::FromServer) => (
            Some(Segments {
                data_segments: *n,
                per_message: per(*n, m.messages),
                bytes_per_segment: (*n > 0).then(|| m.bytes as f64 / *n as f64),
                full_segment: m.full_segment,
            }),
            None,
        ),
        (Ok(_), Direction::ToServer) => (
            None,
            Some("tcpdoctor is the sender: its own segments say nothing of the server".into()),
        ),
        (Err(why), _) => (None, Some(why.clone())),
    };
    let family = match m.direction {
        Direction::FromServer => "send",
        Direction::ToServer => "receive",
    };
    let (calls, calls_unknown) = match &m.calls {
        CallsSeen::Counted { by, bytes } => {
            let total: u64 = by.iter().map(|(_, n)| n).sum();
            let moved = mean.map(|size| *bytes as f64 / size).filter(|m| *m >= 1.0);
            let by_call = by
                .iter()
                .map(|(c, n)| CallCount {
                    call: c.clone(),
                    count: *n,
                })
                .collect();
            (
                Some(Calls {
                    family,
                    total,
                    bytes: *bytes,
                    per_message: moved.map(|n| total as f64 / n),
                    by_call,
                }),
                None,
            )
        }
        CallsSeen::Unknown(why) => (None, Some(why.clone())),
    };
    let mut warnings = m.notes.clone();
    if m.messages == 0 {
        warnings.push(format!(
            "no whole message {} in the {} s window: check --framing and that the server {}",
            match m.direction {
                Direction::FromServer => "arrived",
                Direction::ToServer => "was taken",
            },
            crate::numfmt::num(m.seconds),
            match m.direction {
                Direction::FromServer => "sends",
                Direction::ToServer => "reads",
            }
        ));
    }
    if m.traced && segments.is_some() {
        warnings.push(
            "segments per message depend on the sender's pace (the kernel merges writes that \
             find unsent bytes queued): traced, the sender is stopped at each call and its \
             queue empties in between, so these are usually more segments per message than untraced; \
             measure segments with --no-trace"
                .into(),
        );
    }
    if m.traced {
        warnings.push(
            "the server was traced: the tracer stops it at each call it makes, so these rates \
             are lower than untraced; to compare rates, measure with --no-trace"
                .into(),
        );
    }
    let reading = reading(m.direction, calls.as_ref(), segments.as_ref(), mean);
    StreamReport {
        schema_version: 1,
        tool: tool.to_string(),
        setup,
        seconds: m.seconds,
        messages: m.messages,
        bytes: m.bytes,
        messages_per_s: rate(m.messages),
        bytes_per_s: rate(m.bytes),
        mean_message_bytes: mean,
        segments,
        segments_unknown,
        server_cpu_s: m.server_cpu_s,
        server_cpu_us_per_message: m
            .server_cpu_s
            .and_then(|s| (m.messages > 0).then(|| s * 1e6 / m.messages as f64)),
        calls,
        calls_unknown,
        traced: m.traced,
        reading,
        warnings,
    }
}

/// Rule 4.
fn reading(
    direction: Direction,
    calls: Option<&Calls>,
    segments: Option<&Segments>,
    mean: Option<f64>,
) -> Option<String> {
    let per_call = calls?.per_message?;
    let mean = mean?;
    let num = crate::numfmt::num;
    if direction == Direction::ToServer {
        if per_call <= BATCHED_CALL {
            return Some(format!(
                "the server reads {} messages per receive call",
                num(1.0 / per_call)
            ));
        }
        return (per_call >= 2.0 * OWN_CALL).then(|| {
            format!(
                "the server makes {} receive calls per message: it reads each message in \
                 parts, a system call each; reading what the socket holds in one call and \
                 cutting messages from that buffer takes one call for many messages",
                num(per_call)
            )
        });
    }
    if per_call <= BATCHED_CALL {
        return Some(format!(
            "the server batches: {} messages per send call",
            num(1.0 / per_call)
        ));
    }
    if per_call < OWN_CALL {
        return None;
    }
    let full = f64::from(segments?.full_segment?);
    (mean <= full / 2.0).then(|| {
        format!(
            "the server writes each message with its own call ({} calls per message): a \
             system call per message, and a packet per message whenever its send queue is \
             empty as it writes — the cost `unbatched_messages` names. Writing the messages \
             queued for a connection with one call (per-peer batching) saves the calls and \
             sends full segments",
            num(per_call)
        )
    })
}
