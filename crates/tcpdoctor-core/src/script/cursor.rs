//! Where a conversation is in its script: which step makes the next request.
//!
//! 1. `[[setup]]` runs once, then `[[steps]]` again and again (iteration `{i}` = 0, 1, …) until
//!    `iterations`.
//! 2. A `for_each` walks a snapshot of its list, taken when it starts; it waits while the list
//!    is about to be captured again.
//! 3. A pass through `[[steps]]` that makes no request (a `for_each` over an empty list) ends
//!    the conversation instead of spinning.

use std::collections::HashMap;

use super::model::{Item, Value};
use super::Script;

#[derive(Debug, Default)]
pub(crate) struct Cursor {
    in_body: bool,
    item: usize,
    active: Option<Loop>,
    pub(crate) iteration: u64,
    sent_this_iteration: bool,
    pub(crate) done: bool,
}

#[derive(Debug)]
struct Loop {
    values: Vec<Vec<u8>>,
    index: usize,
    step: usize,
}

impl Cursor {
    fn items<'s>(&self, script: &'s Script) -> &'s [Item] {
        if self.in_body {
            &script.body
        } else {
            &script.setup
        }
    }

    /// Moves to the next step to issue (without issuing it); None when blocked on a list
    /// being captured, or finished. `capturing` counts the outstanding responses that will
    /// capture each variable.
    pub(crate) fn settle(
        &mut self,
        script: &Script,
        vars: &HashMap<String, Value>,
        capturing: &HashMap<String, usize>,
    ) -> Option<usize> {
        loop {
            if self.done {
                return None;
            }
            let items = self.items(script);
            let Some(item) = items.get(self.item) else {
                if !self.in_body {
                    self.in_body = true;
                    self.item = 0;
                    self.done = script.body.is_empty();
                } else if !self.sent_this_iteration {
                    self.done = true;
                } else {
                    self.iteration += 1;
                    self.item = 0;
                    self.sent_this_iteration = false;
                    self.done = script.iterations.is_some_and(|n| self.iteration >= n);
                }
                continue;
            };
            match item {
                Item::Step(s) => return Some(*s),
                Item::ForEach { list, steps, .. } => {
                    if self.active.is_none() {
                        if capturing.get(list).is_some_and(|&n| n > 0) {
                            return None;
                        }
                        let values = match vars.get(list) {
                            Some(Value::List(v)) => v.clone(),
                            _ => Vec::new(),
                        };
                        if values.is_empty() || steps.is_empty() {
                            self.item += 1;
                            continue;
                        }
                        self.active = Some(Loop {
                            values,
                            index: 0,
                            step: 0,
                        });
                    }
                    let lp = self.active.as_ref()?;
                    return Some(steps[lp.step]);
                }
            }
        }
    }

    /// The loop variable and its value for the step `settle` returned, inside a `for_each`.
    pub(crate) fn binding<'a>(&'a self, script: &'a Script) -> Option<(&'a str, &'a [u8])> {
        let lp = self.active.as_ref()?;
        match self.items(script).get(self.item) {
            Some(Item::ForEach { var, .. }) => Some((var.as_str(), &lp.values[lp.index])),
            _ => None,
        }
    }

    /// Advances past the step `settle` returned.
    pub(crate) fn advance(&mut self, script: &Script) {
        if self.in_body {
            self.sent_this_iteration = true;
        }
        let items = self.items(script);
        match (items.get(self.item), self.active.as_mut()) {
            (Some(Item::ForEach { steps, .. }), Some(lp)) => {
                lp.step += 1;
                if lp.step == steps.len() {
                    lp.step = 0;
                    lp.index += 1;
                    if lp.index == lp.values.len() {
                        self.active = None;
                        self.item += 1;
                    }
                }
            }
            _ => self.item += 1,
        }
    }
}
