//! The grammar of a path definition: options separated by commas, each setting one or both
//! directions, checked for conflicts and completed with defaults.

use std::collections::HashMap;

use super::values::{duration, loss};
use super::{DirectionSpec, PathSpec, RateSpec, SpecError};
use crate::flow::Direction;
use crate::impair::queue::default_limit;
use crate::units::{parse_rate_bps, parse_size};

const OPTIONS: &str = "c2s=, s2c=, jitter=, loss=, rate=, queue=, drop=, reorder, mtu=, seed=";
const DIRECTIONS: [Direction; 2] = [Direction::ClientToServer, Direction::ServerToClient];

pub(super) fn fail<T>(part: &str, reason: impl Into<String>) -> Result<T, SpecError> {
    Err(SpecError {
        part: part.to_string(),
        reason: reason.into(),
    })
}

/// `c2s:VALUE` / `s2c:VALUE` / `VALUE` (both directions).
fn split_dir(value: &str) -> (Option<Direction>, &str) {
    if let Some(v) = value.strip_prefix("c2s:") {
        (Some(Direction::ClientToServer), v)
    } else if let Some(v) = value.strip_prefix("s2c:") {
        (Some(Direction::ServerToClient), v)
    } else {
        (None, value)
    }
}

/// How a duplicate names what it sets again: `the client→server loss`, `the mtu`.
fn what(key: &str, dir: Option<Direction>, d: Direction) -> String {
    match dir {
        None if matches!(key, "mtu" | "seed") => key.to_string(),
        _ => format!("{} {key}", d.arrow()),
    }
}

fn dirs(dir: Option<Direction>) -> &'static [Direction] {
    match dir {
        None => &DIRECTIONS,
        Some(Direction::ClientToServer) => &DIRECTIONS[..1],
        Some(Direction::ServerToClient) => &DIRECTIONS[1..],
    }
}

#[derive(Default)]
struct Builder {
    spec: PathSpec,
    /// Which option set each (option, direction), so a second one can name the first.
    set_by: HashMap<(&'static str, usize), String>,
    rate: [Option<u64>; 2],
    queue: [Option<(u64, String)>; 2],
}

impl Builder {
    fn claim(
        &mut self,
        key: &'static str,
        dir: Option<Direction>,
        tok: &str,
    ) -> Result<(), SpecError> {
        for d in dirs(dir) {
            if let Some(first) = self.set_by.get(&(key, d.index())) {
                return fail(
                    tok,
                    format!("the {} is already set by `{first}`", what(key, dir, *d)),
                );
            }
        }
        for d in dirs(dir) {
            self.set_by.insert((key, d.index()), tok.to_string());
        }
        Ok(())
    }

    fn each(&mut self, dir: Option<Direction>, mut f: impl FnMut(&mut DirectionSpec)) {
        for d in dirs(dir) {
            f(match d {
                Direction::ClientToServer => &mut self.spec.c2s,
                Direction::ServerToClient => &mut self.spec.s2c,
            });
        }
    }

    fn option(&mut self, tok: &str, key: &str, value: &str) -> Result<(), SpecError> {
        let (dir, v) = split_dir(value);
        match key {
            "c2s" | "s2c" => {
                let dir = Some(if key == "c2s" {
                    Direction::ClientToServer
                } else {
                    Direction::ServerToClient
                });
                let d = duration(tok, value)?;
                self.claim("delay", dir, tok)?;
                self.each(dir, |s| s.delay = d);
            }
            "jitter" => {
                let j = duration(tok, v)?;
                self.claim("jitter", dir, tok)?;
                self.each(dir, |s| s.jitter = j);
            }
            "loss" => {
                let m = loss(tok, v)?;
                self.claim("loss", dir, tok)?;
                self.each(dir, |s| s.loss = m);
            }
            "rate" => {
                let bps = parse_rate_bps(v).map_err(|e| SpecError {
                    part: tok.into(),
                    reason: e.to_string(),
                })?;
                if bps < 1_000 {
                    return fail(tok, "the rate must be at least 1kbit");
                }
                self.claim("rate", dir, tok)?;
                for d in dirs(dir) {
                    self.rate[d.index()] = Some(bps);
                }
            }
            "queue" => {
                let bytes = parse_size(v).map_err(|e| SpecError {
                    part: tok.into(),
                    reason: e.to_string(),
                })?;
                if !(1_500..=1 << 30).contains(&bytes) {
                    return fail(
                        tok,
                        "the queue must hold 1500 bytes (one full-size packet) to 1GiB",
                    );
                }
                self.claim("queue", dir, tok)?;
                for d in dirs(dir) {
                    self.queue[d.index()] = Some((bytes, tok.to_string()));
                }
            }
            "drop" => {
                self.claim("drop", dir, tok)?;
                self.drop(dir, tok, v)?;
            }
            "reorder" => {
                let dir = match value {
                    "c2s" => Direction::ClientToServer,
                    "s2c" => Direction::ServerToClient,
                    _ => {
                        return fail(
                            tok,
                            "write `reorder` (both ways), `reorder=c2s` or `reorder=s2c`",
                        )
                    }
                };
                self.claim("reorder", Some(dir), tok)?;
                self.each(Some(dir), |s| s.reorder = true);
            }
            "mtu" => {
                let mtu = value
                    .parse::<u32>()
                    .ok()
                    .filter(|m| (576..=65_535).contains(m));
                let Some(mtu) = mtu else {
                    return fail(tok, "give the MTU in bytes, 576 to 65535, e.g. mtu=1400");
                };
                self.claim("mtu", None, tok)?;
                self.spec.mtu = Some(mtu);
            }
            "seed" => {
                let Ok(seed) = value.parse::<u64>() else {
                    return fail(tok, "give a whole number, e.g. seed=7");
                };
                self.claim("seed", None, tok)?;
                self.spec.seed = seed;
            }
            _ => return fail(tok, format!("unknown option (expected one of {OPTIONS})")),
        }
        Ok(())
    }

    fn drop(&mut self, dir: Option<Direction>, tok: &str, n: &str) -> Result<(), SpecError> {
        let Some(n) = n.parse::<u64>().ok().filter(|&n| n >= 1) else {
            return fail(
                tok,
                "give packet numbers counted from 1 in that direction, e.g. drop=s2c:8,9",
            );
        };
        self.each(dir, |s| s.drop.push(n));
        Ok(())
    }

    fn finish(mut self, text: &str) -> Result<PathSpec, SpecError> {
        let missing: Vec<Direction> = DIRECTIONS
            .into_iter()
            .filter(|d| !self.set_by.contains_key(&("delay", d.index())))
            .collect();
        match missing[..] {
            [] => {}
            [d] => {
                let key = if d == Direction::ClientToServer {
                    "c2s"
                } else {
                    "s2c"
                };
                let why = format!("the {} delay is missing: add {key}=DELAY", d.arrow());
                return fail(text, why + ", or give one delay for both ways (wan:15ms)");
            }
            _ => {
                return fail(
                    text,
                    "give the one-way delay, e.g. wan:15ms (or c2s=DELAY,s2c=DELAY)",
                )
            }
        }
        for d in DIRECTIONS {
            let i = d.index();
            let rate = match (self.rate[i], self.queue[i].take()) {
                (Some(bps), q) => Some(RateSpec {
                    bits_per_sec: bps,
                    queue: q.map_or(default_limit(bps), |q| q.0),
                }),
                (None, Some((_, tok))) => {
                    let why = format!("the {} side has no rate=", d.arrow());
                    return fail(
                        &tok,
                        why + ": without a bottleneck nothing queues (add rate=10mbit)",
                    );
                }
                (None, None) => None,
            };
            self.each(Some(d), |s| {
                s.rate = rate;
                s.drop.sort_unstable();
                s.drop.dedup();
            });
        }
        Ok(self.spec)
    }
}

pub(super) fn parse(text: &str) -> Result<PathSpec, SpecError> {
    let text = text.trim();
    let body = text.strip_prefix("wan:").unwrap_or(text);
    if body.trim().is_empty() {
        return fail(text, "give the one-way delay, e.g. wan:15ms");
    }
    let mut b = Builder::default();
    // After `drop=…`, bare numbers continue the list: `drop=s2c:8,9`.
    let mut dropping: Option<Option<Direction>> = None;
    for tok in body.split(',').map(str::trim) {
        if tok.is_empty() {
            return fail(
                text,
                "an empty option (two commas in a row, or one at the end)",
            );
        }
        if let Some(dir) = dropping {
            if tok.bytes().all(|c| c.is_ascii_digit()) {
                b.drop(dir, tok, tok)?;
                continue;
            }
        }
        dropping = None;
        match tok.split_once('=') {
            Some((key, value)) => {
                b.option(tok, key.trim(), value.trim())?;
                if key.trim() == "drop" {
                    dropping = Some(split_dir(value.trim()).0);
                }
            }
            None if tok == "reorder" => {
                b.claim("reorder", None, tok)?;
                b.each(None, |s| s.reorder = true);
            }
            None => {
                if tok.contains('/') {
                    let how = "write jitter as jitter=2ms";
                    return fail(
                        tok,
                        format!("{how} and different delays as c2s=40ms,s2c=5ms"),
                    );
                }
                if !tok.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
                    return fail(
                        tok,
                        format!("neither a delay (e.g. 15ms) nor an option ({OPTIONS})"),
                    );
                }
                let d = duration(tok, tok)?;
                b.claim("delay", None, tok)?;
                b.each(None, |s| s.delay = d);
            }
        }
    }
    b.finish(text)
}
