//! How a response ends. Each framing reads a growing buffer that starts at the response's first
//! byte and says whether a whole response is there yet.
//!
//! Rules every framing keeps:
//! 1. It never panics, whatever the bytes.
//! 2. It is incremental: bytes arrive in arbitrary pieces, and a framing remembers how far it has
//!    looked, so a large response is scanned once, not once per piece.
//! 3. Memory is bounded: a response that would exceed the step's `max_response` is an error as
//!    soon as that is known (a length prefix above it, or that many bytes without an end).

mod http;
mod length;
mod resp;
mod terminator;
mod typed;

use std::time::Duration;

use regex::bytes::Regex;

pub(crate) use length::LengthPrefix;
pub(crate) use typed::TypedMessages;

/// The default largest response: beyond it the connection is counted as an error.
pub const DEFAULT_MAX_RESPONSE: usize = 64 * 1024 * 1024;

/// How a step's response is framed (the validated `read = ...` of a script).
#[derive(Clone, Debug)]
pub(crate) enum Framing {
    /// Up to and including a terminator (`\r\n`, `\r\n.\r\n`).
    Until {
        terminator: Vec<u8>,
        single_line_if: Option<Regex>,
    },
    /// Whole lines (ending `\n`) until one matches the pattern (matched without its `\n`).
    UntilLine {
        pattern: Regex,
        single_line_if: Option<Regex>,
    },
    /// Exactly this many bytes.
    Length(usize),
    /// A length field, then that many bytes.
    LengthPrefix(LengthPrefix),
    /// Messages of a type byte, a length field and a body, until one of the given types.
    Typed(TypedMessages),
    /// One RESP2/RESP3 value.
    Resp,
    /// One HTTP/1.1 response (keep-alive assumed).
    Http,
    /// Everything until no byte arrives for this long.
    Idle(Duration),
    /// Everything until the server closes the connection.
    Close,
}

/// What a framing found in the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Poll {
    /// The first `n` bytes are a whole response.
    Complete(usize),
    /// Not yet; more bytes (or idle, or close) are needed.
    Need,
    /// The response ends when the peer closes (an HTTP response without length).
    UntilClose,
}

/// The reading state of one response.
#[derive(Debug)]
pub(crate) enum Reader {
    Until(terminator::UntilState),
    UntilLine(terminator::LineState),
    Length,
    LengthPrefix,
    Typed(typed::TypedState),
    Resp(resp::RespState),
    Http(http::HttpState),
    Idle,
    Close,
}

impl Framing {
    /// A fresh reader for one response; `request` is the request it answers (HTTP needs to
    /// know whether it was `HEAD`).
    pub(crate) fn reader(&self, request: &[u8]) -> Reader {
        match self {
            Framing::Until { .. } => Reader::Until(Default::default()),
            Framing::UntilLine { .. } => Reader::UntilLine(Default::default()),
            Framing::Length(_) => Reader::Length,
            Framing::LengthPrefix(_) => Reader::LengthPrefix,
            Framing::Typed(_) => Reader::Typed(Default::default()),
            Framing::Resp => Reader::Resp(Default::default()),
            Framing::Http => Reader::Http(http::HttpState::new(request.starts_with(b"HEAD "))),
            Framing::Idle(_) => Reader::Idle,
            Framing::Close => Reader::Close,
        }
    }

    /// The framing's name as scripts spell it.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Framing::Until { .. } => "until",
            Framing::UntilLine { .. } => "until_line",
            Framing::Length(_) => "length",
            Framing::LengthPrefix(_) | Framing::Typed(_) => "length_prefix",
            Framing::Resp => "resp",
            Framing::Http => "http",
            Framing::Idle(_) => "idle",
            Framing::Close => "close",
        }
    }
}

impl Reader {
    /// The response just completed says the server closes the connection after it (HTTP's
    /// `Connection: close`, or HTTP/1.0 without keep-alive).
    pub(crate) fn closes_connection(&self) -> bool {
        matches!(self, Reader::Http(st) if st.closes_connection())
    }

    /// Looks at `buf` (every byte of this response received so far, and possibly bytes of the
    /// next ones). `Err` is a one-line reason the bytes cannot be a response.
    pub(crate) fn poll(
        &mut self,
        framing: &Framing,
        buf: &[u8],
        max: usize,
    ) -> Result<Poll, String> {
        let poll = match (self, framing) {
            (
                Reader::Until(st),
                Framing::Until {
                    terminator,
                    single_line_if,
                },
            ) => st.poll(buf, terminator, single_line_if.as_ref()),
            (
                Reader::UntilLine(st),
                Framing::UntilLine {
                    pattern,
                    single_line_if,
                },
            ) => st.poll(buf, pattern, single_line_if.as_ref()),
            (Reader::Length, Framing::Length(n)) => length::poll_fixed(buf, *n, max)?,
            (Reader::LengthPrefix, Framing::LengthPrefix(p)) => p.poll(buf, max)?,
            (Reader::Typed(st), Framing::Typed(t)) => st.poll(buf, t, max)?,
            (Reader::Resp(st), Framing::Resp) => st.poll(buf, max)?,
            (Reader::Http(st), Framing::Http) => st.poll(buf, max)?,
            (Reader::Idle, Framing::Idle(_)) | (Reader::Close, Framing::Close) => Poll::UntilClose,
            _ => return Err("internal: reader does not match its framing".to_string()),
        };
        match poll {
            Poll::Complete(n) if n > max => Err(too_large(n, max)),
            Poll::Need | Poll::UntilClose if buf.len() > max => Err(too_large(buf.len(), max)),
            other => Ok(other),
        }
    }
}

#[cfg(test)]
mod tests;

pub(crate) fn too_large(n: usize, max: usize) -> String {
    format!("response of {n} bytes or more exceeds max_response ({max} bytes)")
}
