//! Checking a `sequential_exchange` claim from its frames.
//!
//! 1. `request` is data from the client, `response` data from the server, `request` first.
//! 2. From `request` to `response`, no client data follows server data: one request, then its
//!    response (every frame of the flow in the range is read).
//! 3. With `previous_response`: it is server data before `request`, and no client data lies
//!    between them (the request followed that response).
//! 4. Each round trip holds as `round_trip.rs` says (towards the server: the client's segment
//!    and the server's answer; towards the client: the other way round).
//! 5. `t(response) − t(request)` is at least the round trip towards the server, and
//!    `t(request) − t(previous_response)` at least the round trip towards the client: an
//!    exchange called sequential left room for the whole path round trip.

use super::{ms_between, round_trip, Frames};
use crate::report::SequentialExchange;

/// Every frame the claim names.
pub(super) fn cited(c: &SequentialExchange) -> Vec<u64> {
    let mut v = vec![c.request, c.response];
    v.extend(c.previous_response);
    v.extend(&c.syns);
    v.extend(c.rtt_to_server.iter().flatten());
    v.extend(c.rtt_to_client.iter().flatten());
    v
}

/// The ranges whose segments must all be read.
pub(super) fn ranges(c: &SequentialExchange) -> Vec<(u64, u64)> {
    let first = c.previous_response.unwrap_or(c.request).min(c.request);
    let mut v = vec![(first, c.response.max(first))];
    let start = start(c);
    for pair in [c.rtt_to_server, c.rtt_to_client].into_iter().flatten() {
        v.extend(round_trip::ranges(pair, start));
    }
    v
}

fn start(c: &SequentialExchange) -> u64 {
    c.syns.iter().copied().min().unwrap_or(1)
}

pub(super) fn check(
    c: &SequentialExchange,
    frames: &Frames,
    out: &mut Vec<String>,
    unsure: &mut Vec<String>,
) {
    let mut cited = cited(c);
    cited.sort_unstable();
    cited.dedup();
    unsure.extend(cited.iter().filter_map(|&n| frames.unusable(n)));
    for (from, to) in ranges(c) {
        for (n, why) in frames.unusable_in(from, to) {
            if cited.binary_search(&n).is_err() {
                unsure.push(format!("{why} (within frames {from} to {to})"));
            }
        }
    }
    let mut fail = |s: String| out.push(format!("sequential_exchange: {s}"));
    let (q, r) = (c.request, c.response);
    let (Some(request), Some(response)) = (frames.get(q), frames.get(r)) else {
        return; // Rule 1 of the audit has reported the frame.
    };

    // 1.
    if !request.1.from_a || request.1.payload == 0 {
        fail(format!("frame {q} is not data from the client"));
    }
    if response.1.from_a || response.1.payload == 0 {
        fail(format!("frame {r} is not data from the server"));
    }
    if r <= q {
        fail(format!("frame {r} does not come after frame {q}"));
    }

    // 2.
    let mut answered = None;
    for (n, s) in frames.range(q, r) {
        if s.payload == 0 {
            continue;
        }
        match (s.from_a, answered) {
            (false, None) => answered = Some(n),
            (true, Some(m)) => {
                fail(format!(
                    "frame {n} is client data after the server's data in frame {m}: not one \
                     request and its response"
                ));
                break;
            }
            _ => {}
        }
    }

    // 3.
    let previous = c.previous_response.and_then(|p| {
        let got = frames.get(p)?;
        if got.1.from_a || got.1.payload == 0 {
            fail(format!("frame {p} is not data from the server"));
        }
        if p >= q {
            fail(format!("frame {p} does not come before frame {q}"));
        } else if let Some((n, _)) = frames
            .range(p + 1, q - 1)
            .find(|(_, s)| s.from_a && s.payload > 0)
        {
            fail(format!(
                "frame {n} is client data between frames {p} and {q}: the request did not \
                 follow that response"
            ));
        }
        Some((p, got.0))
    });

    // 4 and 5.
    let start = start(c);
    let mut rtt = |pair: Option<[u64; 2]>, x_from_client: bool, name: &str| -> Option<f64> {
        let Some(pair) = pair else {
            return Some(0.0);
        };
        match round_trip::sample(frames, name, pair, x_from_client, start) {
            Ok(v) => v,
            Err(why) => {
                fail(why);
                None
            }
        }
    };
    let to_server = rtt(c.rtt_to_server, true, "rtt_to_server");
    let to_client = rtt(c.rtt_to_client, false, "rtt_to_client");
    let mut fail = |s: String| out.push(format!("sequential_exchange: {s}"));
    if let Some(to_server) = to_server {
        let latency = ms_between(request.0, response.0);
        if latency < to_server {
            fail(format!(
                "frames {q} to {r} took {latency:.3} ms: less than the {to_server:.3} ms round \
                 trip towards the server, so the exchange overlapped an earlier one"
            ));
        }
    }
    if let (Some(to_client), Some((p, tp))) = (to_client, previous) {
        let idle = ms_between(tp, request.0);
        if idle < to_client {
            fail(format!(
                "frame {q} left {idle:.3} ms after frame {p}: less than the {to_client:.3} ms \
                 round trip towards the client, so it did not wait for that response"
            ));
        }
    }
    if c.rtt_to_server.is_none() && c.rtt_to_client.is_none() {
        unsure.push("no round trip given: the exchange's length is not checked".into());
    }
}
