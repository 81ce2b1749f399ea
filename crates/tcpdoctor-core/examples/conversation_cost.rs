//! CPU cost of one exchange inside a `Conversation`, with no socket: what the bench driver
//! spends per request before any syscall.
//!
//!     cargo run --release -p tcpdoctor-core --example conversation_cost -- 2000000 [ROW,…]
//!
//! For each preset, a conversation is driven through N exchanges (default 1,000,000) on
//! in-memory bytes: take a request, feed back the response a server would send (`+PONG\r\n`
//! for `resp` and `line`, the request itself for `echo`), one exchange at a time (depth 1) and
//! 16 requests then 16 responses in one piece (depth 16, like `--pipeline 16`). Prints ns per
//! exchange, the best of three runs: through `next_request`/`on_bytes` ("owned", a vector
//! per request and per read) and through `next_request_into`/`on_bytes_into` ("into", the
//! caller's buffers reused, as the bench driver calls it).
//!
//! Two scripts beside the presets price computed values: `vars` sends `SET {key} {i}` (a
//! template with variables, no function), `hmac` the same with the value an HMAC-SHA-256 of
//! the iteration, in hex (`{hex(hmac_sha256(key, i))}`); the difference of the two rows is
//! what a per-exchange function costs.

use std::sync::Arc;
use std::time::Instant;

use tcpdoctor_core::script::{Conversation, Script};
use tcpdoctor_core::Timestamp;

/// Appends what the server answers to `request`.
type Answer = fn(&[u8], &mut Vec<u8>);

fn pong(_: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(b"+PONG\r\n");
}

fn echo(request: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(request);
}

/// Runs `n` exchanges `depth` at a time through `next_request` and `on_bytes` (a vector per
/// request and per read); returns ns per exchange.
fn run_owned(script: &Arc<Script>, answer: Answer, n: u64, depth: usize) -> f64 {
    let mut conv = Conversation::new(Arc::clone(script), 0, 1);
    let mut replies = Vec::new();
    let mut done = 0u64;
    let mut clock = 0u64;
    let start = Instant::now();
    while done < n {
        replies.clear();
        for _ in 0..depth {
            clock += 1;
            let req = conv
                .next_request(Timestamp(clock))
                .expect("a request is ready");
            answer(&req.bytes, &mut replies);
        }
        clock += 1;
        let completed = conv
            .on_bytes(&replies, Timestamp(clock))
            .expect("a valid response");
        assert_eq!(completed.len(), depth);
        assert!(completed.iter().all(|c| c.failed_assertion.is_none()));
        done += depth as u64;
    }
    start.elapsed().as_nanos() as f64 / done as f64
}

/// As `run_owned`, through `next_request_into` and `on_bytes_into` with buffers reused, as
/// the bench driver does.
fn run_into(script: &Arc<Script>, answer: Answer, n: u64, depth: usize) -> f64 {
    let mut conv = Conversation::new(Arc::clone(script), 0, 1);
    let mut requests = Vec::new();
    let mut replies = Vec::new();
    let mut completed = Vec::new();
    let mut done = 0u64;
    let mut clock = 0u64;
    let start = Instant::now();
    while done < n {
        replies.clear();
        requests.clear();
        completed.clear();
        for _ in 0..depth {
            clock += 1;
            let at = requests.len();
            conv.next_request_into(Timestamp(clock), &mut requests)
                .expect("a request is ready");
            answer(&requests[at..], &mut replies);
        }
        clock += 1;
        conv.on_bytes_into(&replies, Timestamp(clock), &mut completed)
            .expect("a valid response");
        assert_eq!(completed.len(), depth);
        assert!(completed.iter().all(|c| c.failed_assertion.is_none()));
        done += depth as u64;
    }
    start.elapsed().as_nanos() as f64 / done as f64
}

/// A line script whose request has variables; `hmac`: and a per-exchange HMAC of them.
fn computed(hmac: bool) -> String {
    let value = if hmac {
        "{hex(hmac_sha256(key, i))}"
    } else {
        "{i}"
    };
    format!(
        "[vars]\nkey = \"k3y\"\n\n[[steps]]\nsend = 'SET {{key}} {value}\\r\\n'\nread = {{ until = \"\\r\\n\" }}\n"
    )
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("N must be a number"))
        .unwrap_or(1_000_000);
    let cases: &[(&str, Answer)] = &[
        ("resp", pong),
        ("echo", echo),
        ("line", pong),
        ("vars", pong),
        ("hmac", pong),
    ];
    println!(
        "{:<8} {:>14} {:>15} {:>14} {:>15}",
        "preset", "owned d1 ns/ex", "owned d16 ns/ex", "into d1 ns/ex", "into d16 ns/ex"
    );
    // An optional second argument picks rows: `conversation_cost 1000000 line,vars`.
    let only: Option<Vec<String>> = std::env::args()
        .nth(2)
        .map(|a| a.split(',').map(str::to_string).collect());
    for (name, answer) in cases {
        if only.as_ref().is_some_and(|o| !o.iter().any(|x| x == name)) {
            continue;
        }
        let script = Arc::new(match *name {
            "vars" => Script::parse(&computed(false)).expect("a valid script"),
            "hmac" => Script::parse(&computed(true)).expect("a valid script"),
            _ => Script::preset(name, &[]).expect("a valid preset"),
        });
        type Run = fn(&Arc<Script>, Answer, u64, usize) -> f64;
        let best = |run: Run, depth| {
            (0..3)
                .map(|_| run(&script, *answer, n, depth))
                .fold(f64::INFINITY, f64::min)
        };
        println!(
            "{name:<8} {:>14.1} {:>15.1} {:>14.1} {:>15.1}",
            best(run_owned, 1),
            best(run_owned, 16),
            best(run_into, 1),
            best(run_into, 16)
        );
    }
}
