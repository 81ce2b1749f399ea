//! One HTTP/1.1 response, on a keep-alive connection.
//!
//! 1. A status line `HTTP/1.x NNN reason`, header lines, a blank line (`\r\n`; a bare `\n` is
//!    accepted as clients do).
//! 2. Interim responses (1xx other than 101) are read and skipped: the response is the final one.
//! 3. No body after 1xx, 204, 304, or when the request was `HEAD`.
//! 4. `Transfer-Encoding: chunked`: hex-sized chunks until a zero chunk, then trailer lines and a
//!    blank line. Otherwise `Content-Length: N`: N bytes. Otherwise the body runs to the close.
//! 5. The server closes the connection after this response when it says `Connection: close`,
//!    or answers as HTTP/1.0 without `Connection: keep-alive` (RFC 9112 §9.3): the driver
//!    sends nothing more on it and reconnects, as curl and wrk do.
//! 6. Two different Content-Length values, a length that is not a number, a chunk size that is
//!    not hex, or a chunk not followed by its line end are errors.

use memchr::memchr;

use super::{too_large, Poll};

#[derive(Debug)]
enum Phase {
    /// Reading the status line and headers; `line` is where the next line starts.
    Head {
        line: usize,
        status: Option<u16>,
        length: Option<u64>,
        chunked: bool,
    },
    /// A chunk-size line starts at `at`.
    ChunkSize {
        at: usize,
    },
    /// Trailer lines start at `at`; the response ends at a blank one.
    Trailers {
        at: usize,
    },
    /// The response is exactly this long.
    Sized(usize),
    UntilClose,
}

#[derive(Debug)]
pub(crate) struct HttpState {
    head_request: bool,
    phase: Phase,
    /// How far the search for the current line's `\n` has got.
    scanned: usize,
    /// The final response's status line said HTTP/1.0.
    http10: bool,
    /// Its `Connection` header: Some(true) for `close`, Some(false) for `keep-alive`.
    connection_close: Option<bool>,
}

fn head_at(start: usize) -> Phase {
    Phase::Head {
        line: start,
        status: None,
        length: None,
        chunked: false,
    }
}

fn excerpt(line: &[u8]) -> String {
    String::from_utf8_lossy(&line[..line.len().min(60)]).into_owned()
}

fn parse_status(line: &[u8]) -> Result<u16, String> {
    let bad = || format!("not an HTTP/1.x status line: `{}`", excerpt(line));
    if !line.starts_with(b"HTTP/1.") || line.len() < 12 || line[8] != b' ' {
        return Err(bad());
    }
    let code = &line[9..12];
    if !code.iter().all(u8::is_ascii_digit) || line.get(12).is_some_and(|&c| c != b' ') {
        return Err(bad());
    }
    Ok(code.iter().fold(0u16, |n, &d| n * 10 + u16::from(d - b'0')))
}

impl HttpState {
    pub(crate) fn new(head_request: bool) -> HttpState {
        HttpState {
            head_request,
            phase: head_at(0),
            scanned: 0,
            http10: false,
            connection_close: None,
        }
    }

    /// Rule 5: the server closes the connection after this response (valid once its head
    /// has been read).
    pub(crate) fn closes_connection(&self) -> bool {
        self.connection_close.unwrap_or(self.http10)
    }

    /// The next whole line starting at `at`: (content without `\r\n`, index after it).
    fn line<'b>(&mut self, buf: &'b [u8], at: usize) -> Option<(&'b [u8], usize)> {
        let from = self.scanned.max(at).min(buf.len());
        match memchr(b'\n', &buf[from..]) {
            None => {
                self.scanned = buf.len();
                None
            }
            Some(i) => {
                let lf = from + i;
                // Stay on this `\n`: a caller that returns Need re-reads the same line.
                self.scanned = lf;
                let content = &buf[at..lf];
                Some((content.strip_suffix(b"\r").unwrap_or(content), lf + 1))
            }
        }
    }

    pub(crate) fn poll(&mut self, buf: &[u8], max: usize) -> Result<Poll, String> {
        loop {
            match self.phase {
                Phase::Sized(n) => {
                    return Ok(if buf.len() >= n {
                        Poll::Complete(n)
                    } else {
                        Poll::Need
                    });
                }
                Phase::UntilClose => return Ok(Poll::UntilClose),
                Phase::Head { line, .. } => {
                    let Some((content, next)) = self.line(buf, line) else {
                        return Ok(Poll::Need);
                    };
                    self.head_line(content, next, max)?;
                }
                Phase::ChunkSize { at } => {
                    let Some((content, next)) = self.line(buf, at) else {
                        return Ok(Poll::Need);
                    };
                    let size_text = content.split(|&c| c == b';').next().unwrap_or(b"");
                    let size_text = size_text.trim_ascii();
                    let size = std::str::from_utf8(size_text)
                        .ok()
                        .filter(|t| !t.is_empty() && t.len() <= 15)
                        .and_then(|t| u64::from_str_radix(t, 16).ok())
                        .ok_or_else(|| format!("bad chunk size line `{}`", excerpt(content)))?;
                    if size == 0 {
                        self.phase = Phase::Trailers { at: next };
                        continue;
                    }
                    let data_end = next as u64 + size;
                    if data_end > max as u64 {
                        return Err(too_large(data_end as usize, max));
                    }
                    let data_end = data_end as usize;
                    let Some(after) = buf.get(data_end..) else {
                        return Ok(Poll::Need);
                    };
                    let resume = match after {
                        [b'\r', b'\n', ..] => data_end + 2,
                        [b'\n', ..] => data_end + 1,
                        [] | [b'\r'] => return Ok(Poll::Need),
                        _ => return Err(format!("chunk of {size} bytes not followed by \\r\\n")),
                    };
                    self.phase = Phase::ChunkSize { at: resume };
                    self.scanned = resume;
                }
                Phase::Trailers { at } => {
                    let Some((content, next)) = self.line(buf, at) else {
                        return Ok(Poll::Need);
                    };
                    if content.is_empty() {
                        return Ok(Poll::Complete(next));
                    }
                    self.phase = Phase::Trailers { at: next };
                }
            }
        }
    }

    fn head_line(&mut self, content: &[u8], next: usize, max: usize) -> Result<(), String> {
        let Phase::Head {
            line,
            status,
            length,
            chunked,
        } = &mut self.phase
        else {
            return Ok(());
        };
        *line = next;
        let Some(code) = *status else {
            *status = Some(parse_status(content)?);
            self.http10 = content.starts_with(b"HTTP/1.0");
            self.connection_close = None;
            return Ok(());
        };
        if !content.is_empty() {
            let Some(colon) = memchr(b':', content) else {
                return Err(format!("header line without `:`: `{}`", excerpt(content)));
            };
            let name = content[..colon].trim_ascii();
            let value = content[colon + 1..].trim_ascii();
            if name.eq_ignore_ascii_case(b"content-length") {
                let n = std::str::from_utf8(value)
                    .ok()
                    .filter(|v| !v.is_empty() && v.bytes().all(|c| c.is_ascii_digit()))
                    .and_then(|v| v.parse::<u64>().ok())
                    .ok_or_else(|| format!("bad Content-Length `{}`", excerpt(value)))?;
                if length.is_some_and(|old| old != n) {
                    return Err("two different Content-Length headers".to_string());
                }
                *length = Some(n);
            } else if name.eq_ignore_ascii_case(b"connection") {
                for token in value.split(|&c| c == b',').map(<[u8]>::trim_ascii) {
                    if token.eq_ignore_ascii_case(b"close") {
                        self.connection_close = Some(true);
                    } else if token.eq_ignore_ascii_case(b"keep-alive") {
                        self.connection_close.get_or_insert(false);
                    }
                }
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                let last = value.rsplit(|&c| c == b',').next().unwrap_or(b"");
                *chunked = last.trim_ascii().eq_ignore_ascii_case(b"chunked");
            }
            return Ok(());
        }
        self.phase = if (100..200).contains(&code) && code != 101 {
            head_at(next)
        } else if self.head_request || code < 200 || code == 204 || code == 304 {
            Phase::Sized(next)
        } else if *chunked {
            Phase::ChunkSize { at: next }
        } else if let Some(n) = *length {
            let total = next as u64 + n;
            if total > max as u64 {
                return Err(too_large(total.min(usize::MAX as u64) as usize, max));
            }
            Phase::Sized(total as usize)
        } else {
            Phase::UntilClose
        };
        Ok(())
    }
}
