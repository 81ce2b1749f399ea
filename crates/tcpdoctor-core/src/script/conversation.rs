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

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use super::framing::{Framing, Poll, Reader};
use super::model::{Item, Value};
use super::{escape_bytes, Completed, Request, ResponseError, Script, StepId};
use crate::impair::SplitMix64;
use crate::Timestamp;

/// A loop variable and its value for one request.
type Binding = (String, Vec<u8>);

/// Keep at most this much consumed input before compacting the buffer.
const COMPACT_AT: usize = 64 * 1024;

/// One connection's run of a script: which request comes next, how its response is framed,
/// captures and loops.
#[derive(Debug)]
pub struct Conversation {
    script: Arc<Script>,
    conn: u64,
    rng: SplitMix64,
    vars: HashMap<String, Value>,
    /// Outstanding responses that will capture each variable.
    capturing: HashMap<String, usize>,
    pending: VecDeque<Pending>,
    buf: Vec<u8>,
    /// Bytes of `buf` already consumed by completed responses.
    consumed: usize,
    cursor: Cursor,
    /// The step of the last completed response, to name where unexpected bytes came.
    last_step: Option<usize>,
}

#[derive(Debug)]
struct Pending {
    step: usize,
    intended: Option<Timestamp>,
    request_bytes: usize,
    reader: Reader,
}

#[derive(Debug, Default)]
struct Cursor {
    in_body: bool,
    item: usize,
    active: Option<Loop>,
    iteration: u64,
    sent_this_iteration: bool,
    done: bool,
}

#[derive(Debug)]
struct Loop {
    values: Vec<Vec<u8>>,
    index: usize,
    step: usize,
}

impl Conversation {
    /// `conn` is the connection number (`{conn}` in templates); `seed` drives random payloads.
    pub fn new(script: Arc<Script>, conn: u64, seed: u64) -> Conversation {
        let vars = script.vars.iter().cloned().collect();
        let mut pending = VecDeque::new();
        if let Some(g) = script.greeting {
            pending.push_back(Pending {
                step: g,
                intended: None,
                request_bytes: 0,
                reader: script.steps[g].read.reader(b""),
            });
        }
        let mut conv = Conversation {
            rng: SplitMix64::new(seed ^ conn.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            script,
            conn,
            vars,
            capturing: HashMap::new(),
            pending,
            buf: Vec::new(),
            consumed: 0,
            cursor: Cursor::default(),
            last_step: None,
        };
        if let Some(g) = conv.script.greeting {
            conv.count_captures(g, 1);
        }
        conv.settle();
        conv
    }

    /// The connection is up: the greeting, if any, is awaited from `now`.
    pub fn connected(&mut self, now: Timestamp) {
        self.start_greeting_clock(now);
    }

    /// The next request that can be written now, or None when the next one depends on a
    /// response not yet received (a capture, the greeting) or the script is finished.
    /// `intended` is returned in the matching [`Completed`].
    pub fn next_request(&mut self, intended: Timestamp) -> Option<Request> {
        self.start_greeting_clock(intended);
        if self.awaiting_greeting() {
            return None;
        }
        let (step, binding) = self.settle()?;
        if self.blocked(step) {
            return None;
        }
        let request = self.issue(step, binding.as_ref(), intended);
        self.consume();
        self.settle();
        Some(request)
    }

    /// Feeds bytes read from the socket; returns the responses they complete, in order. Bytes
    /// past the last complete response stay buffered for the next call. On `Err` the
    /// connection is unusable; responses completed earlier in the same call are not returned.
    pub fn on_bytes(
        &mut self,
        data: &[u8],
        now: Timestamp,
    ) -> Result<Vec<Completed>, ResponseError> {
        self.start_greeting_clock(now);
        if self.pending.is_empty() {
            if data.is_empty() {
                return Ok(Vec::new());
            }
            return Err(self.unexpected(data));
        }
        self.buf.extend_from_slice(data);
        let mut done = Vec::new();
        while let Some(head) = self.pending.front_mut() {
            let step = &self.script.steps[head.step];
            let view = &self.buf[self.consumed..];
            match head.reader.poll(&step.read, view, step.max_response) {
                Ok(Poll::Complete(n)) => done.extend(self.complete(n, now)),
                Ok(Poll::Need | Poll::UntilClose) => break,
                Err(message) => {
                    return Err(ResponseError {
                        step: step.name.clone(),
                        message,
                        excerpt: escape_bytes(view, 48),
                    })
                }
            }
        }
        if self.pending.is_empty() && self.consumed < self.buf.len() {
            let extra = self.buf[self.consumed..].to_vec();
            return Err(self.unexpected(&extra));
        }
        self.compact();
        self.settle();
        Ok(done)
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
                head.reader.poll(&step.read, view, step.max_response),
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
                excerpt: escape_bytes(&self.buf[self.consumed..], 48),
            });
        }
        self.compact();
        self.settle();
        Ok(done)
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

    fn count_captures(&mut self, step: usize, delta: isize) {
        let script = Arc::clone(&self.script);
        for cap in &script.steps[step].captures {
            let n = self.capturing.entry(cap.name.clone()).or_insert(0);
            *n = n.saturating_add_signed(delta);
        }
    }

    fn blocked(&self, step: usize) -> bool {
        let ends_by_silence = self.pending.iter().any(|p| {
            matches!(
                self.script.steps[p.step].read,
                Framing::Idle(_) | Framing::Close
            )
        });
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
    fn settle(&mut self) -> Option<(usize, Option<Binding>)> {
        let script = Arc::clone(&self.script);
        loop {
            let c = &mut self.cursor;
            if c.done {
                return None;
            }
            let items = if c.in_body {
                &script.body
            } else {
                &script.setup
            };
            let Some(item) = items.get(c.item) else {
                if !c.in_body {
                    c.in_body = true;
                    c.item = 0;
                    c.done = script.body.is_empty();
                } else if !c.sent_this_iteration {
                    c.done = true;
                } else {
                    c.iteration += 1;
                    c.item = 0;
                    c.sent_this_iteration = false;
                    c.done = script.iterations.is_some_and(|n| c.iteration >= n);
                }
                continue;
            };
            match item {
                Item::Step(s) => return Some((*s, None)),
                Item::ForEach { var, list, steps } => {
                    if c.active.is_none() {
                        if self.capturing.get(list).is_some_and(|&n| n > 0) {
                            return None;
                        }
                        let values = match self.vars.get(list) {
                            Some(Value::List(v)) => v.clone(),
                            _ => Vec::new(),
                        };
                        if values.is_empty() || steps.is_empty() {
                            c.item += 1;
                            continue;
                        }
                        c.active = Some(Loop {
                            values,
                            index: 0,
                            step: 0,
                        });
                    }
                    let lp = c.active.as_ref()?;
                    return Some((
                        steps[lp.step],
                        Some((var.clone(), lp.values[lp.index].clone())),
                    ));
                }
            }
        }
    }

    /// Advances past the step `settle` returned.
    fn consume(&mut self) {
        let script = Arc::clone(&self.script);
        let c = &mut self.cursor;
        if c.in_body {
            c.sent_this_iteration = true;
        }
        let items = if c.in_body {
            &script.body
        } else {
            &script.setup
        };
        match (items.get(c.item), c.active.as_mut()) {
            (Some(Item::ForEach { steps, .. }), Some(lp)) => {
                lp.step += 1;
                if lp.step == steps.len() {
                    lp.step = 0;
                    lp.index += 1;
                    if lp.index == lp.values.len() {
                        c.active = None;
                        c.item += 1;
                    }
                }
            }
            _ => c.item += 1,
        }
    }

    fn issue(&mut self, step: usize, binding: Option<&Binding>, intended: Timestamp) -> Request {
        let script = Arc::clone(&self.script);
        let s = &script.steps[step];
        let vars = &self.vars;
        let lookup = |name: &str| -> Option<Vec<u8>> {
            match binding {
                Some((var, value)) if var == name => Some(value.clone()),
                _ => match vars.get(name) {
                    Some(Value::Text(t)) => Some(t.clone()),
                    _ => None,
                },
            }
        };
        let mut body = Vec::new();
        let mark = s.send.as_ref().and_then(|t| {
            t.render(
                &lookup,
                self.conn,
                self.cursor.iteration,
                &mut self.rng,
                &mut body,
            )
        });
        let (bytes, header_len) = match s.send_prefix {
            Some(prefix) => {
                let len = (body.len() as u64).min(prefix.max_body()) as usize;
                let mut bytes = prefix.encode(len);
                let width = bytes.len();
                bytes.extend_from_slice(&body);
                (bytes, Some(width + mark.unwrap_or(0)))
            }
            None => (body, mark),
        };
        self.pending.push_back(Pending {
            step,
            intended: Some(intended),
            request_bytes: bytes.len(),
            reader: s.read.reader(&bytes),
        });
        self.count_captures(step, 1);
        Request {
            step: StepId(step),
            bytes,
            header_len,
        }
    }

    /// The head response is the next `n` buffered bytes: check it, capture, report.
    fn complete(&mut self, n: usize, now: Timestamp) -> Option<Completed> {
        let p = self.pending.pop_front()?;
        self.last_step = Some(p.step);
        self.count_captures(p.step, -1);
        let script = Arc::clone(&self.script);
        let step = &script.steps[p.step];
        let response = &self.buf[self.consumed..self.consumed + n];
        let mut failed = None;
        if let Some(re) = &step.expect {
            if !re.is_match(response) {
                failed = Some(format!(
                    "{}: expected `{}`, received \"{}\"",
                    step.name,
                    re.as_str(),
                    escape_bytes(response, 48)
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
                            escape_bytes(response, 48)
                        )
                    });
                    Value::Text(Vec::new())
                }
            };
            self.vars.insert(cap.name.clone(), value);
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
            excerpt: escape_bytes(data, 48),
        }
    }
}
