//! Responses of a known size: a fixed length, or a length field in front.
//!
//! 1. `length = N`: the response is exactly N bytes.
//! 2. `length_prefix = "u32be"`: a 1, 2 or 4 byte unsigned length (`u8`, `u16be`, `u16le`,
//!    `u32be`, `u32le`), then that many bytes. With `length_includes_prefix = true` the length
//!    counts the field itself (a value smaller than the field is then an error).
//! 3. A declared length above `max_response` is an error at once, before any byte of the body
//!    is buffered.

use super::{too_large, Poll};

pub(crate) fn poll_fixed(buf: &[u8], n: usize, max: usize) -> Result<Poll, String> {
    if n > max {
        return Err(too_large(n, max));
    }
    Ok(if buf.len() >= n {
        Poll::Complete(n)
    } else {
        Poll::Need
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LengthPrefix {
    /// 1, 2 or 4 bytes.
    pub(crate) width: usize,
    pub(crate) big_endian: bool,
    pub(crate) includes_prefix: bool,
}

impl LengthPrefix {
    pub(crate) const NAMES: &'static str = "u8, u16be, u16le, u32be, u32le";

    /// Reads `u8`, `u16be`, `u16le`, `u32be`, `u32le`.
    pub(crate) fn from_name(name: &str, includes_prefix: bool) -> Option<LengthPrefix> {
        let (width, big_endian) = match name {
            "u8" => (1, true),
            "u16be" => (2, true),
            "u16le" => (2, false),
            "u32be" => (4, true),
            "u32le" => (4, false),
            _ => return None,
        };
        Some(LengthPrefix {
            width,
            big_endian,
            includes_prefix,
        })
    }

    pub(crate) fn name(&self) -> String {
        match (self.width, self.big_endian) {
            (1, _) => "u8".to_string(),
            (w, true) => format!("u{}be", w * 8),
            (w, false) => format!("u{}le", w * 8),
        }
    }

    /// The largest body this prefix can describe.
    pub(crate) fn max_body(&self) -> u64 {
        let all = (1u64 << (self.width * 8)) - 1;
        if self.includes_prefix {
            all - self.width as u64
        } else {
            all
        }
    }

    /// Writes the field for a body of `len` bytes into `field` (`width` bytes; the caller
    /// checked `len <= max_body()`).
    pub(crate) fn encode_into(&self, len: u64, field: &mut [u8]) {
        let value = len
            + if self.includes_prefix {
                self.width as u64
            } else {
                0
            };
        field.copy_from_slice(&value.to_be_bytes()[8 - self.width..]);
        if !self.big_endian {
            field.reverse();
        }
    }

    pub(crate) fn poll(&self, buf: &[u8], max: usize) -> Result<Poll, String> {
        let Some(total) = self.total(buf)? else {
            return Ok(Poll::Need);
        };
        if total > max as u64 {
            return Err(too_large(total.min(usize::MAX as u64) as usize, max));
        }
        let total = total as usize;
        Ok(if buf.len() >= total {
            Poll::Complete(total)
        } else {
            Poll::Need
        })
    }

    /// The size of the field and its body, once the field has arrived.
    pub(crate) fn total(&self, buf: &[u8]) -> Result<Option<u64>, String> {
        let Some(field) = buf.get(..self.width) else {
            return Ok(None);
        };
        let mut value: u64 = 0;
        for i in 0..self.width {
            let b = if self.big_endian {
                field[i]
            } else {
                field[self.width - 1 - i]
            };
            value = value << 8 | u64::from(b);
        }
        Ok(Some(if self.includes_prefix {
            if value < self.width as u64 {
                return Err(format!(
                    "{} length {value} is smaller than the {}-byte field it includes",
                    self.name(),
                    self.width
                ));
            }
            value
        } else {
            value + self.width as u64
        }))
    }
}
