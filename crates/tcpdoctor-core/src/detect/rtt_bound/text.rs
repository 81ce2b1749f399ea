//! What an `rtt_bound` finding says: the conversation the wire shows, and advice that fits it.
//!
//! A request *turn* is what the wire shows; how many requests it carries is not (the core
//! never parses payloads). A plain capture therefore speaks of turns, and its advice covers
//! both a client that sends one request per turn and one that already pipelines. When `run`
//! says the client is its own scripted driver ([`ScriptedClient`]), the finding says how deep
//! the driver pipelined, how many requests each turn carried on average (requests completed ÷
//! request turns to this server), and that the fix is the script's, not the server's: one
//! request at a time is said only when the driver kept one in flight, and multiplexing
//! (HTTP/2) is never offered to a client that already pipelines.

use std::time::Duration;

use crate::analysis::ScriptedClient;
use crate::numfmt::count;
use crate::units::fmt_duration;

/// The figures the wording rests on.
pub(super) struct Figures {
    /// Sequential request turns in the flagged flows.
    pub turns: u64,
    pub flows: u64,
    /// Request turns (exchanges) to this server in the whole capture.
    pub all_turns: u64,
    pub rtt_ms: f64,
    pub share: f64,
    pub wall: Duration,
    pub elapsed: Duration,
    pub saving: Duration,
    /// Most flagged flows overlapped other connections of the same client.
    pub parallel: bool,
    pub peak: u32,
}

/// The verdict, the fact that describes the turns, an optional fact about the client, and
/// the fix.
pub(super) struct Wording {
    pub verdict: String,
    pub turns_fact: String,
    pub client_fact: Option<String>,
    pub fix: &'static str,
}

/// Requests per turn, when the driver's request count and the capture's turns are both known.
fn per_turn(c: &ScriptedClient, all_turns: u64) -> Option<f64> {
    (c.requests > 0 && all_turns > 0).then(|| c.requests as f64 / all_turns as f64)
}

pub(super) fn wording(f: &Figures, client: Option<&ScriptedClient>) -> Wording {
    match client {
        Some(c) => scripted(f, c),
        None => plain(f),
    }
}

/// A capture of an unknown client: turns, not requests.
fn plain(f: &Figures) -> Wording {
    let mut verdict = format!(
        "Round-trip bound: {} sequential exchanges each waited one round trip ({:.1} ms); \
         waiting on the network is {:.0}% of the {} they took",
        f.turns,
        f.rtt_ms,
        f.share * 100.0,
        fmt_duration(f.wall),
    );
    if f.parallel {
        verdict.push_str(&format!(
            ", spread over up to {} overlapping connections from the same client ({} elapsed); \
             sending more per round trip would save up to about {}.",
            f.peak,
            fmt_duration(f.elapsed),
            fmt_duration(f.saving)
        ));
    } else {
        verdict.push_str(&format!(
            ", and not waiting for each reply would save about {}.",
            fmt_duration(f.saving)
        ));
    }
    let fix = if f.parallel {
        "This client spreads its requests over several connections to this server at once, and \
         each connection still waits one round trip per request turn. If each turn carries one \
         request (an HTTP/1.1 browser's connection pool works this way: one request per \
         connection at a time), Multiplex the requests over one connection (HTTP/2 or HTTP/3, \
         or the protocol's own multiplexing), or make fewer requests (batch them, bundle small \
         resources, cache). If the protocol already lets the client send several requests per \
         turn (Redis, memcached), put more requests in each turn or batch them into one \
         command. More parallel connections only hide the round trips."
    } else {
        "Stop paying one round trip per command: pipeline (send the next requests without \
         waiting for each reply), batch commands into one request (multi-get, bulk endpoints, \
         one query instead of N), or move the chatty loop next to the server. On this path \
         every sequential command costs one RTT, whatever the server does."
    };
    Wording {
        verdict,
        turns_fact: format!(
            "{} exchanges in {} flow(s) were sequential: each request turn waited for the \
             previous response, and each took at least one round trip as seen at the capture \
             point",
            f.turns, f.flows
        ),
        client_fact: None,
        fix,
    }
}

/// tcpdoctor's own driver: its pipelining, what the turns carried, and the script's fix.
fn scripted(f: &Figures, c: &ScriptedClient) -> Wording {
    let conns = count(u64::from(c.connections), "connection");
    let batch = per_turn(c, f.all_turns);
    let how = match c.rate {
        Some(r) => format!(" (open loop at {r:.0} requests/s)"),
        None => String::new(),
    };
    let verdict = if c.pipeline > 1 {
        let carried = batch.map_or_else(String::new, |b| {
            format!(" the wire shows batches of about {b:.1} requests per turn, and")
        });
        format!(
            "Round-trip bound by the scripted client's own pipelining: tcpdoctor's driver kept \
             up to {p} requests in flight per connection (--pipeline {p}) on {conns}{how};{carried} \
             {n} turns each waited one round trip ({rtt:.1} ms) for the responses to the \
             previous batch. Waiting on the network is {share:.0}% of the {wall} they took; \
             more requests per round trip would save up to about {save}.",
            p = c.pipeline,
            n = f.turns,
            rtt = f.rtt_ms,
            share = f.share * 100.0,
            wall = fmt_duration(f.wall),
            save = fmt_duration(f.saving),
        )
    } else {
        format!(
            "Round-trip bound by the scripted client's own protocol: tcpdoctor's driver sent \
             one request at a time per connection (--pipeline 1) on {conns}{how}, so each of \
             {n} requests waited for the previous response, one round trip ({rtt:.1} ms) each. \
             Waiting on the network is {share:.0}% of the {wall} they took; not waiting for \
             each reply would save up to about {save}.",
            n = f.turns,
            rtt = f.rtt_ms,
            share = f.share * 100.0,
            wall = fmt_duration(f.wall),
            save = fmt_duration(f.saving),
        )
    };
    let turns_fact = if c.pipeline > 1 {
        format!(
            "{} request turns in {} flow(s) were sequential: each turn (a batch of requests) \
             waited for the responses to the previous one, and took at least one round trip as \
             seen at the capture point",
            f.turns, f.flows
        )
    } else {
        format!(
            "{} exchanges in {} flow(s) were sequential: each request waited for the previous \
             response, and each took at least one round trip as seen at the capture point",
            f.turns, f.flows
        )
    };
    let client_fact = Some(match batch {
        Some(b) => format!(
            "the client is tcpdoctor's scripted driver (--pipeline {}, {}): it completed {} in \
             {} to this server, {b:.1} requests per turn",
            c.pipeline,
            conns,
            count(c.requests, "request"),
            count(f.all_turns, "request turn"),
        ),
        None => format!(
            "the client is tcpdoctor's scripted driver (--pipeline {}, {})",
            c.pipeline, conns
        ),
    });
    let fix = if c.pipeline > 1 {
        "The waiting is the scripted client's own protocol, not the server's: the driver keeps \
         a fixed number of requests in flight per connection, so each batch costs one round \
         trip on this path, however fast the server answers. To send more per round trip, \
         pipeline deeper (raise --pipeline), batch commands in the script (one multi-key \
         command instead of several), or use more --connections. Nothing on the server \
         changes this finding."
    } else {
        "The waiting is the scripted client's own protocol, not the server's: the driver sends \
         one request per connection and waits for its response, so every request costs one \
         round trip on this path, however fast the server answers. If the protocol lets a \
         client send requests without waiting for each reply (Redis, memcached), raise \
         --pipeline; batch commands in the script (one multi-key command instead of several), \
         or use more --connections. Nothing on the server changes this finding."
    };
    Wording {
        verdict,
        turns_fact,
        client_fact,
        fix,
    }
}
