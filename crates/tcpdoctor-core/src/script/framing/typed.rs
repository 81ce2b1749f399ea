//! Typed messages: a type byte, a length field, a body — PostgreSQL's wire protocol, and many
//! binary protocols like it. One response is several messages (PostgreSQL answers a query with
//! `T` row description, `D` rows, `C` complete, then `Z` ready for query).
//!
//! 1. A message is one type byte, then the length field (as `length_prefix`), then the body.
//! 2. Without `until_type` the response is one message. With it, messages are read until one
//!    whose type byte is in that set; that message ends the response.
//! 3. Each declared length is checked against what is left of `max_response` before its body
//!    is buffered.
//! 4. Incremental: the reader remembers where the next unread message starts.

use super::{too_large, LengthPrefix, Poll};

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TypedMessages {
    pub(crate) prefix: LengthPrefix,
    /// The type bytes that end a response; empty: every message does.
    pub(crate) until_type: Vec<u8>,
}

/// Where the next message of the response starts.
#[derive(Debug, Default)]
pub(crate) struct TypedState {
    next: usize,
}

impl TypedState {
    pub(crate) fn poll(
        &mut self,
        buf: &[u8],
        framing: &TypedMessages,
        max: usize,
    ) -> Result<Poll, String> {
        loop {
            let at = self.next;
            let Some(&kind) = buf.get(at) else {
                return Ok(Poll::Need);
            };
            let declared = framing
                .prefix
                .total(&buf[at + 1..])
                .map_err(|e| format!("message `{}` at byte {at}: {e}", kind.escape_ascii()))?;
            let Some(len) = declared else {
                return Ok(Poll::Need);
            };
            let end = (at as u64 + 1).saturating_add(len);
            if end > max as u64 {
                return Err(too_large(end.min(usize::MAX as u64) as usize, max));
            }
            let end = end as usize;
            if buf.len() < end {
                return Ok(Poll::Need);
            }
            if framing.until_type.is_empty() || framing.until_type.contains(&kind) {
                return Ok(Poll::Complete(end));
            }
            self.next = end;
        }
    }
}
