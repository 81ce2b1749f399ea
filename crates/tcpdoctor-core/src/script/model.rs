//! The validated form of a script: steps, the order they run in, variables.

use regex::bytes::Regex;

use super::expr::Scope;
use super::framing::{Framing, LengthPrefix};
use super::functions::Sources;
use super::template::Template;
use crate::impair::SplitMix64;

/// One request and the response that answers it (or, for the greeting, a response alone).
#[derive(Clone, Debug)]
pub(crate) struct Step {
    pub(crate) name: String,
    /// None for the greeting.
    pub(crate) send: Option<Template>,
    /// A length field written in front of the rendered request.
    pub(crate) send_prefix: Option<LengthPrefix>,
    /// A message type byte written before the length field (PostgreSQL's `Q`, `p`).
    pub(crate) send_type: Option<u8>,
    pub(crate) read: Framing,
    pub(crate) max_response: usize,
    pub(crate) expect: Option<Regex>,
    pub(crate) captures: Vec<Capture>,
    /// The request, rendered once, when every request of the step is the same bytes.
    pub(crate) fixed: Option<FixedRequest>,
}

/// A request whose template has no variable part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FixedRequest {
    pub(crate) bytes: Vec<u8>,
    pub(crate) header_len: Option<usize>,
}

impl Step {
    /// Appends the step's request (length field and template) to `out`; returns where its
    /// header ends, counted from the request's first byte, when it has one. A computed value
    /// that failed is named in `failed` (see [`Template::render`]).
    pub(crate) fn render<'s, 'v: 's>(
        &'s self,
        scope: &mut Scope<'_, 'v>,
        out: &mut Vec<u8>,
        failed: &mut Option<String>,
    ) -> Option<usize> {
        if let Some(t) = self.send_type {
            out.push(t);
        }
        let typed = usize::from(self.send_type.is_some());
        let start = out.len();
        let width = self.send_prefix.map_or(0, |p| p.width);
        out.resize(start + width, 0);
        let mark = self
            .send
            .as_ref()
            .and_then(|t| t.render(scope, out, failed));
        match self.send_prefix {
            Some(prefix) => {
                let body = (out.len() - start - width) as u64;
                prefix.encode_into(body.min(prefix.max_body()), &mut out[start..start + width]);
                Some(typed + width + mark.unwrap_or(0))
            }
            None => mark,
        }
    }

    /// The request rendered once, when the template makes the same bytes every time.
    pub(crate) fn fixed_request(&self) -> Option<FixedRequest> {
        if !self.send.as_ref()?.is_fixed() {
            return None;
        }
        let mut bytes = Vec::new();
        let mut rng = SplitMix64::new(0);
        let mut scope = Scope {
            lookup: &|_| None,
            conn: 0,
            iteration: 0,
            sources: Sources {
                rng: &mut rng,
                clock: None,
            },
        };
        let header_len = self.render(&mut scope, &mut bytes, &mut None);
        Some(FixedRequest { bytes, header_len })
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Capture {
    pub(crate) name: String,
    pub(crate) pattern: Regex,
    pub(crate) kind: CaptureKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CaptureKind {
    /// The first match in the response: a value.
    First,
    /// Every line that matches: a list.
    EachLine,
    /// Every match anywhere in the response: a list.
    Each,
}

impl CaptureKind {
    pub(crate) fn is_list(self) -> bool {
        self != CaptureKind::First
    }
}

/// An entry of `[[setup]]` or `[[steps]]`.
#[derive(Clone, Debug)]
pub(crate) enum Item {
    Step(usize),
    /// `for_each = "var in list"` over `do` steps.
    ForEach {
        var: String,
        list: String,
        steps: Vec<usize>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Value {
    Text(Vec<u8>),
    List(Vec<Vec<u8>>),
}

impl Capture {
    /// What this capture takes from a response; None when a single-value capture found no
    /// match (a list capture that finds nothing is an empty list).
    pub(crate) fn take(&self, response: &[u8]) -> Option<Value> {
        let pick = |caps: regex::bytes::Captures<'_>| -> Vec<u8> {
            caps.get(1)
                .or_else(|| caps.get(0))
                .map_or_else(Vec::new, |m| m.as_bytes().to_vec())
        };
        match self.kind {
            CaptureKind::First => self.pattern.captures(response).map(pick).map(Value::Text),
            CaptureKind::Each => Some(Value::List(
                self.pattern.captures_iter(response).map(pick).collect(),
            )),
            CaptureKind::EachLine => {
                let lines = response.strip_suffix(b"\n").unwrap_or(response);
                Some(Value::List(
                    lines
                        .split(|&b| b == b'\n')
                        .filter_map(|line| self.pattern.captures(line).map(pick))
                        .collect(),
                ))
            }
        }
    }
}
