//! One connection's run of a script, sans-IO.
//!
//! The rules that make pipelining correct for any script:
//! 1. Requests go out in script order: the greeting is awaited first, then `[[setup]]` once,
//!    then `[[steps]]` again and again (iteration `{i}` = 0, 1, …) until `iterations` or the
//!    driver stops asking.
//! 2. Responses are answered in order (FIFO); each is framed by the step that asked for it.
//! 3. A request is handed out before earlier responses arrive only when it needs no capture
//!    that an outstanding response will deliver, and a `for_each` starts only when its list is
//!    not about to be captured again. Nothing is sent before the greeting has arrived.
//!    A response framed "until idle" or "until close" holds back every later request: the
//!    next response would run into it.
//! 4. A `for_each` walks a snapshot of its list, taken when it starts.
//! 5. A pass through `[[steps]]` that makes no request (a `for_each` over an empty list) ends
//!    the conversation instead of spinning.
//! 6. A response that says the server closes the connection after it (HTTP `Connection:
//!    close`) ends the conversation's sending: no request follows on this connection, and the
//!    requests already sent behind it will not be answered — the driver re-sends them on a new
//!    connection (with their intended times) instead of counting them lost.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use super::cursor::Cursor;
use super::expr::Scope;
use super::framing::{Framing, Poll, Reader};
use super::functions::{Sources, WallClock};
use super::model::{Step, Value};
use super::{Completed, Issued, Request, ResponseError, Script, StepId};
use crate::impair::SplitMix64;
use crate::Timestamp;

/// How many bytes of a response a failed `expect` or capture quotes: enough for the text of a
/// refusal behind a binary header (PostgreSQL's ErrorResponse puts its message after ~27 bytes
/// of severity and code fields).
const ANSWER_QUOTE: usize = 160;

/// Keep at most this much consumed input before compacting the buffer.
const COMPACT_AT: usize = 64 * 1024;

/// One connection's run of a script: which request comes next, how its response is framed,
/// captures and loops.
///
/// For a script without captures or `for_each`, the per-exchange path allocates nothing: the
/// script is borrowed from the `Arc`, never cloned; a request whose template has no variable
/// part was rendered once when the script was parsed; the framing and `expect` regexes are
/// cloned per conversation (a clone of a `Regex` has its own scratch pool), so connections on
/// different threads do not take turns on one; [`Conversation::next_request_into`] and
/// [`Conversation::on_bytes_into`] write into the caller's buffers. (A captured value is a
/// new `Vec` per response, and a `for_each` copies its list when it starts.)
#[derive(Debug)]
pub struct Conversation {
    script: Arc<Script>,
    conn: u64,
    rng: SplitMix64,
    vars: HashMap<String, Value>,
    /// Outstanding responses that will capture each variable.
    capturing: HashMap<String, usize>,
    pending: VecDeque<Pending>,
    /// Outstanding responses framed "until idle" or "until close" (rule 3).
    silent: usize,
    buf: Vec<u8>,
    /// Bytes of `buf` already consumed by completed responses.
    consumed: usize,
    cursor: Cursor,
    /// The step of the last completed response, to name where unexpected bytes came.
    last_step: Option<usize>,
    /// Per step: its framing and `expect` regexes, cloned for this conversation.
    matchers: Vec<Matchers>,
    /// A completed response said the server closes the connection after it (rule 6).
    server_closes: bool,
    /// The shell's wall clock: Unix seconds at a timestamp, for `now_unix()`.
    wall_clock: Option<(u64, Timestamp)>,
    /// Requests whose computed value failed, oldest first, each with how many responses
    /// complete before its own: their exchanges count as errors. (Beside `pending`, not in
    /// it, so that an exchange without a failure pays one `is_empty` for them.)
    render_failures: VecDeque<(usize, String)>,
}

#[derive(Debug)]
struct Matchers {
    read: Framing,
    /// The step's `expect`, cloned: a clone has its own scratch pool, so connections on
    /// different threads do not take turns on one.
    expect: Option<regex::bytes::Regex>,
}

#[derive(Debug)]
struct Pending {
    step: usize,
    intended: Option<Timestamp>,
    request_bytes: usize,
    reader: Reader,
}

/// What a request with variable parts is rendered from.
struct Inputs<'c> {
    cursor: &'c Cursor,
    vars: &'c HashMap<String, Value>,
    conn: u64,
    rng: &'c mut SplitMix64,
    wall_clock: Option<(u64, Timestamp)>,
    intended: Timestamp,
}

/// Renders the request of a step whose bytes vary (variables, `{i}`, functions).
#[inline]
fn render(
    script: &Script,
    step: &Step,
    inputs: Inputs<'_>,
    out: &mut Vec<u8>,
    failed: &mut Option<String>,
) -> Option<usize> {
    let binding = inputs.cursor.binding(script);
    let vars = inputs.vars;
    let lookup = |name: &str| -> Option<&[u8]> {
        match binding {
            Some((var, value)) if var == name => Some(value),
            _ => match vars.get(name) {
                Some(Value::Text(t)) => Some(t),
                _ => None,
            },
        }
    };
    let clock = inputs.wall_clock.map(|(unix_secs, at)| WallClock {
        unix_secs,
        at,
        now: inputs.intended,
    });
    let mut scope = Scope {
        lookup: &lookup,
        conn: inputs.conn,
        iteration: inputs.cursor.iteration,
        sources: Sources {
            rng: inputs.rng,
            clock,
        },
    };
    step.render(&mut scope, out, failed)
}

/// A response completes: the failure of its request's computed value, if it had one.
#[cold]
fn take_render_failure(failures: &mut VecDeque<(usize, String)>) -> Option<String> {
    let mine = match failures.front() {
        Some((0, _)) => failures.pop_front().map(|(_, m)| m),
        _ => None,
    };
    for (before, _) in failures.iter_mut() {
        *before -= 1;
    }
    mine
}

#[cold]
fn render_failure(step: &str, message: &str) -> String {
    format!("{step}: in `send`: {message}")
}

fn ends_by_silence(step: &Step) -> bool {
    matches!(step.read, Framing::Idle(_) | Framing::Close)
}

/// Counts the captures an outstanding response of `step` will make. (Inlined by force: when
/// it was not, after template functions grew `issue`, every exchange paid ~20 instructions
/// more — callgrind on `conversation_cost`.)
#[inline(always)]
fn count_captures(capturing: &mut HashMap<String, usize>, step: &Step, delta: isize) {
    for cap in &step.captures {
        match capturing.get_mut(&cap.name) {
            Some(n) => *n = n.saturating_add_signed(delta),
            None => {
                capturing.insert(cap.name.clone(), 0usize.saturating_add_signed(delta));
            }
        }
    }
}

impl Conversation {
    /// `conn` is the connection number (`{conn}` in templates); `seed` drives random payloads.
    pub fn new(script: Arc<Script>, conn: u64, seed: u64) -> Conversation {
        let vars = script.vars.iter().cloned().collect();
        let mut conv = Conversation {
            rng: SplitMix64::new(seed ^ conn.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            script,
            conn,
            vars,
            capturing: HashMap::new(),
            pending: VecDeque::new(),
            silent: 0,
            buf: Vec::new(),
            consumed: 0,
            cursor: Cursor::default(),
            last_step: None,
            matchers: Vec::new(),
            server_closes: false,
            wall_clock: None,
            render_failures: VecDeque::new(),
        };
        conv.matchers = (conv.script.steps.iter())
            .map(|s| Matchers {
                read: s.read.clone(),
                expect: s.expect.clone(),
            })
            .collect();
        if let Some(g) = conv.script.greeting {
            let step = &conv.script.steps[g];
            conv.pending.push_back(Pending {
                step: g,
                intended: None,
                request_bytes: 0,
                reader: step.read.reader(b""),
            });
            conv.silent += usize::from(ends_by_silence(step));
            count_captures(&mut conv.capturing, step, 1);
        }
        conv.settle();
        conv
    }

    /// The wall clock, for `now_unix()` in templates: `unix_secs` seconds since the Unix epoch
    /// at `now` (the driver's clock). A request intended later reads the time advanced by the
    /// difference. Without it, `now_unix()` fails (and its exchanges count as errors).
    pub fn set_wall_clock(&mut self, unix_secs: u64, now: Timestamp) {
        self.wall_clock = Some((unix_secs, now));
    }

    /// The connection is up: the greeting, if any, is awaited from `now`.
    pub fn connected(&mut self, now: Timestamp) {
        self.start_greeting_clock(now);
    }

    /// The next request that can be written now, or None when the next one depends on a
    /// response not yet received (a capture, the greeting) or the script is finished.
    /// `intended` is returned in the matching [`Completed`].
    pub fn next_request(&mut self, intended: Timestamp) -> Option<Request> {
        let mut bytes = Vec::new();
        let issued = self.next_request_into(intended, &mut bytes)?;
        Some(Request {
            step: issued.step,
            bytes,
            header_len: issued.header_len,
        })
    }

    /// [`Conversation::next_request`] without an allocation: appends the request's bytes to
    /// `out` (a pipelined batch builds up in one buffer) and says which step it is and where
    /// its header ends. `out` is untouched when it returns None.
    pub fn next_request_into(&mut self, intended: Timestamp, out: &mut Vec<u8>) -> Option<Issued> {
        self.start_greeting_clock(intended);
        if self.awaiting_greeting() || self.server_closes {
            return None;
        }
        let step = self.settle()?;
        if self.blocked(step) {
            return None;
        }
        let issued = self.issue(step, intended, out);
        self.cursor.advance(&self.script);
        self.settle();
        Some(issued)
    }

    /// Feeds bytes read from the socket; returns the responses they complete, in order. Bytes
    /// past the last complete response stay buffered for the next call. On `Err` the
    /// connection is unusable; responses completed earlier in the same call are not returned.
    pub fn on_bytes(
        &mut self,
        data: &[u8],
        now: Timestamp,
    ) -> Result<Vec<Completed>, ResponseError> {
        let mut done = Vec::new();
        self.on_bytes_into(data, now, &mut done)?;
        Ok(done)
    }

    /// [`Conversation::on_bytes`] into the caller's vector (reused from read to read): appends
    /// the responses completed. On `Err` nothing is appended.
    pub fn on_bytes_into(
        &mut self,
        data: &[u8],
        now: Timestamp,
        done: &mut Vec<Completed>,
    ) -> Result<(), ResponseError> {
        self.start_greeting_clock(now);
        if self.server_closes {
            return Ok(());
        }
        if self.pending.is_empty() {
            if data.is_empty() {
                return Ok(());
            }
            return Err(self.unexpected(data));
        }
        self.buf.extend_from_slice(data);
        let before = done.len();
        while let Some(head) = self.pending.front_mut() {
            let step = &self.script.steps[head.step];
            let view = &self.buf[self.consumed..];
            let read = &self.matchers[head.step].read;
            match head.reader.poll(read, view, step.max_response) {
                Ok(Poll::Complete(n)) => {
                    if head.reader.closes_connection() {
                        self.server_closes = true;
                    }
                    done.extend(self.complete(n, now));
                    if self.server_closes {
                        // Rule 6: whatever follows belongs to no request on this connection.
                        self.consumed = self.buf.len();
                        break;
                    }
                }
                Ok(Poll::Need | Poll::UntilClose) => break,
                Err(message) => {
                    done.truncate(before);
                    return Err(ResponseError {
                        step: step.name.clone(),
                        message,
                        excerpt: self.script.secrets.excerpt(view, 48),
                    });
                }
            }
        }
        if self.pending.is_empty() && self.consumed < self.buf.len() && !self.server_closes {
            done.truncate(before);
            return Err(self.unexpected(&self.buf[self.consumed..]));
        }
        self.compact();
        self.settle();
        Ok(())
    }

    /// When the response now awaited is framed "until idle for D": D. The driver calls
    /// [`Conversation::on_idle`] after D passes with no bytes.
    pub fn idle_period(&self) -> Option<Duration> {
        match self
            .pending
            .front()
            .map(|p| &self.script.steps[p.step].read)
        {
            Some(Framing::Idle(d)) => Some(*d),
            _ => None,
        }
    }

    /// No byte arrived for the idle period: completes a response framed "until idle".
    pub fn on_idle(&mut self, now: Timestamp) -> Vec<Completed> {
        self.start_greeting_clock(now);
        if self.idle_period().is_none() {
            return Vec::new();
        }
        let n = self.buf.len() - self.consumed;
        let done = self.complete(n, now).into_iter().collect();
        self.compact();
        self.settle();
        done
    }

    /// The peer closed: completes a response framed "until close" (or "until idle", or an
    /// HTTP response without a length) if one is awaited; anything else outstanding is an error.
    /// No request can follow on this connection; a driver that goes on opens a new one with a
    /// new conversation (so a script of `read = "close"` steps is one connection per request).
    pub fn on_eof(&mut self, now: Timestamp) -> Result<Vec<Completed>, ResponseError> {
        self.start_greeting_clock(now);
        let Some(head) = self.pending.front_mut() else {
            return Ok(Vec::new());
        };
        let step = &self.script.steps[head.step];
        let view = &self.buf[self.consumed..];
        let ends_at_close = matches!(step.read, Framing::Close | Framing::Idle(_))
            || matches!(
                head.reader
                    .poll(&self.matchers[head.step].read, view, step.max_response),
                Ok(Poll::UntilClose)
            );
        let mut done = Vec::new();
        if ends_at_close {
            let n = view.len();
            done.extend(self.complete(n, now));
        }
        if let Some(head) = self.pending.front() {
            let step = &self.script.steps[head.step];
            return Err(ResponseError {
                step: step.name.clone(),
                message: format!(
                    "connection closed with {} response(s) outstanding ({} framing)",
                    self.pending.len(),
                    step.read.kind()
                ),
                excerpt: self.script.secrets.excerpt(&self.buf[self.consumed..], 48),
            });
        }
        self.compact();
        self.settle();
        Ok(done)
    }

    /// The peer closed (or reset) the connection before a single byte of any awaited response
    /// arrived, every awaited response is a request's (no greeting), and none of them is one
    /// that ends at the close: what a server's silent close of an idle keep-alive connection
    /// leaves to a client that sent on it at the same moment. A client that reused the
    /// connection re-sends those requests on a new one, as curl does.
    pub fn closed_before_any_answer(&self) -> bool {
        !self.pending.is_empty()
            && !self.server_closes
            && self.consumed == self.buf.len()
            && self
                .pending
                .iter()
                .all(|p| p.request_bytes > 0 && !ends_by_silence(&self.script.steps[p.step]))
    }

    /// A response said the server closes the connection after it (rule 6): nothing more is
    /// sent here, and [`Conversation::unanswered`] will not be answered on this connection.
    pub fn server_closes(&self) -> bool {
        self.server_closes
    }

    /// The intended times of the requests sent and not yet answered, oldest first (the
    /// greeting is no request).
    pub fn unanswered(&self) -> impl Iterator<Item = Timestamp> + '_ {
        self.pending
            .iter()
            .filter(|p| p.request_bytes > 0)
            .filter_map(|p| p.intended)
    }

    /// Responses awaited: requests sent and not yet answered, plus the greeting while it is
    /// awaited.
    pub fn outstanding(&self) -> usize {
        self.pending.len()
    }

    /// True when the script has no more requests to make and none is outstanding.
    pub fn is_finished(&self) -> bool {
        self.cursor.done && self.pending.is_empty()
    }

    /// The iteration of `[[steps]]` the next request belongs to (`{i}`).
    pub fn iteration(&self) -> u64 {
        self.cursor.iteration
    }

    fn awaiting_greeting(&self) -> bool {
        self.script.greeting.is_some()
            && self
                .pending
                .front()
                .is_some_and(|p| Some(p.step) == self.script.greeting)
    }

    fn start_greeting_clock(&mut self, now: Timestamp) {
        if self.awaiting_greeting() {
            if let Some(p) = self.pending.front_mut() {
                p.intended.get_or_insert(now);
            }
        }
    }

    fn blocked(&self, step: usize) -> bool {
        let ends_by_silence = self.silent > 0;
        let Some(send) = &self.script.steps[step].send else {
            return ends_by_silence;
        };
        ends_by_silence
            || send
                .vars()
                .any(|v| self.capturing.get(v).is_some_and(|&n| n > 0))
    }

    /// Moves the cursor to the next step to issue (without issuing it); None when blocked on a
    /// list being captured, or finished.
    fn settle(&mut self) -> Option<usize> {
        self.cursor
            .settle(&self.script, &self.vars, &self.capturing)
    }

    fn issue(&mut self, step: usize, intended: Timestamp, out: &mut Vec<u8>) -> Issued {
        let script = &*self.script;
        let s = &script.steps[step];
        let start = out.len();
        let mut failed = None;
        let header_len = match &s.fixed {
            Some(fixed) => {
                out.extend_from_slice(&fixed.bytes);
                fixed.header_len
            }
            None => render(
                script,
                s,
                Inputs {
                    cursor: &self.cursor,
                    vars: &self.vars,
                    conn: self.conn,
                    rng: &mut self.rng,
                    wall_clock: self.wall_clock,
                    intended,
                },
                out,
                &mut failed,
            ),
        };
        if let Some(message) = failed {
            let before = self.pending.len();
            self.render_failures
                .push_back((before, render_failure(&s.name, &message)));
        }
        let request = &out[start..];
        self.pending.push_back(Pending {
            step,
            intended: Some(intended),
            request_bytes: request.len(),
            reader: s.read.reader(request),
        });
        self.silent += usize::from(ends_by_silence(s));
        count_captures(&mut self.capturing, s, 1);
        Issued {
            step: StepId(step),
            len: request.len(),
            header_len,
        }
    }

    /// The head response is the next `n` buffered bytes: check it, capture, report.
    fn complete(&mut self, n: usize, now: Timestamp) -> Option<Completed> {
        let p = self.pending.pop_front()?;
        self.last_step = Some(p.step);
        let step = &self.script.steps[p.step];
        count_captures(&mut self.capturing, step, -1);
        self.silent -= usize::from(ends_by_silence(step));
        let response = &self.buf[self.consumed..self.consumed + n];
        let mut failed = if self.render_failures.is_empty() {
            None
        } else {
            take_render_failure(&mut self.render_failures)
        };
        if let Some(re) = &self.matchers[p.step].expect {
            if !re.is_match(response) {
                failed = Some(format!(
                    "{}: expected `{}`, received \"{}\"",
                    step.name,
                    re.as_str(),
                    self.script.secrets.excerpt(response, ANSWER_QUOTE)
                ));
            }
        }
        for cap in &step.captures {
            let value = match cap.take(response) {
                Some(v) => v,
                None => {
                    failed.get_or_insert_with(|| {
                        format!(
                            "{}: capture `{}` found no `{}` in \"{}\"",
                            step.name,
                            cap.name,
                            cap.pattern.as_str(),
                            self.script.secrets.excerpt(response, ANSWER_QUOTE)
                        )
                    });
                    Value::Text(Vec::new())
                }
            };
            // The name's String is allocated once, on its first capture, not per response.
            match self.vars.get_mut(&cap.name) {
                Some(v) => *v = value,
                None => {
                    self.vars.insert(cap.name.clone(), value);
                }
            }
        }
        if failed.is_some() && !self.script.secrets.is_empty() {
            // A regex or a computed value's message may quote a secret too.
            failed = failed.map(|m| self.script.secrets.mask_text(&m));
        }
        self.consumed += n;
        Some(Completed {
            step: StepId(p.step),
            intended: p.intended.unwrap_or(now),
            finished: now,
            request_bytes: p.request_bytes,
            response_bytes: n,
            failed_assertion: failed,
        })
    }

    fn compact(&mut self) {
        if self.consumed == self.buf.len() {
            self.buf.clear();
            self.consumed = 0;
        } else if self.consumed > COMPACT_AT && self.consumed > self.buf.len() / 2 {
            self.buf.drain(..self.consumed);
            self.consumed = 0;
        }
    }

    fn unexpected(&self, data: &[u8]) -> ResponseError {
        let last = self
            .last_step
            .map_or("(none)", |s| &self.script.step_names[s]);
        ResponseError {
            step: format!("after {last}"),
            message: format!(
                "{} byte(s) arrived with no response outstanding",
                data.len()
            ),
            excerpt: self.script.secrets.excerpt(data, 48),
        }
    }
}
