//! Responses that end with a terminator: a fixed byte string (`until`) or a line matching a
//! regex (`until_line`).
//!
//! 1. `until`: the response is every byte up to and including the first terminator.
//! 2. `until_line`: the response is whole lines (each ending with `\n`) up to and including
//!    the first line that matches the pattern; the pattern sees the line without its `\n`
//!    (so a line ended by `\r\n` still has its `\r`: `^\.\r?$`).
//! 3. Either may have `single_line_if`: when the first line matches it, that line alone is the
//!    response (an error status that has no list after it, like `500 no such case`).

use memchr::{memchr, memmem};
use regex::bytes::Regex;

use super::Poll;

/// Where the first line ends, found incrementally; `None` while it is incomplete.
#[derive(Debug, Default)]
struct FirstLine {
    scanned: usize,
    end: Option<usize>,
}

impl FirstLine {
    fn find(&mut self, buf: &[u8]) -> Option<usize> {
        if self.end.is_none() {
            match memchr(b'\n', &buf[self.scanned.min(buf.len())..]) {
                Some(i) => self.end = Some(self.scanned + i + 1),
                None => self.scanned = buf.len(),
            }
        }
        self.end
    }
}

fn single_line(first: &mut FirstLine, buf: &[u8], single_line_if: Option<&Regex>) -> Option<usize> {
    let re = single_line_if?;
    let end = first.find(buf)?;
    re.is_match(&buf[..end - 1]).then_some(end)
}

#[derive(Debug, Default)]
pub(crate) struct UntilState {
    scanned: usize,
    first: FirstLine,
}

impl UntilState {
    pub(crate) fn poll(
        &mut self,
        buf: &[u8],
        terminator: &[u8],
        single_line_if: Option<&Regex>,
    ) -> Poll {
        let from = self.scanned.min(buf.len());
        let found = memmem::find(&buf[from..], terminator).map(|i| from + i + terminator.len());
        if found.is_none() {
            let keep = terminator.len().saturating_sub(1);
            self.scanned = self.scanned.max(buf.len().saturating_sub(keep));
        }
        match (single_line(&mut self.first, buf, single_line_if), found) {
            (Some(line), Some(t)) => Poll::Complete(line.min(t)),
            (Some(end), None) | (None, Some(end)) => Poll::Complete(end),
            (None, None) => Poll::Need,
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct LineState {
    /// Start of the first line not yet tested.
    line_start: usize,
    /// How far the search for that line's `\n` has got.
    scanned: usize,
}

impl LineState {
    pub(crate) fn poll(
        &mut self,
        buf: &[u8],
        pattern: &Regex,
        single_line_if: Option<&Regex>,
    ) -> Poll {
        loop {
            let from = self.scanned.max(self.line_start).min(buf.len());
            let Some(i) = memchr(b'\n', &buf[from..]) else {
                self.scanned = buf.len();
                return Poll::Need;
            };
            let end = from + i + 1;
            let line = &buf[self.line_start..end - 1];
            let first = self.line_start == 0;
            if first && single_line_if.is_some_and(|re| re.is_match(line)) {
                return Poll::Complete(end);
            }
            if pattern.is_match(line) {
                return Poll::Complete(end);
            }
            self.line_start = end;
            self.scanned = end;
        }
    }
}
