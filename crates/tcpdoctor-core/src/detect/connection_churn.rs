//! `connection_churn`: a new TCP connection for (almost) every request.
//!
//! Rule (PHYSICS §8), per server:
//! 1. Only connections whose whole handshake is in the capture (SYN, the SYN-ACK answering it,
//!    the client's ACK of that SYN-ACK) and that carried at least one request byte count: we saw
//!    them open and be used. SYNs nobody answered (a SYN flood, a closed port) and connections
//!    opened but never used paid no handshake for a request.
//! 2. A connection is *short* when it carried at most [`MAX_EXCHANGES`] exchanges.
//! 3. Report when at least [`MIN_CONNECTIONS`] short connections were opened, they are at least
//!    [`MIN_SHARE`] of the server's connections, and they came at [`MIN_RATE`] per second or
//!    faster (between the first and the last SYN).
//! 4. The time they cost is each short connection's wait from its first SYN to its first
//!    request byte: the handshake a reused connection would not pay. Warning from
//!    [`WARN_LOST`], else info.
//! 5. Who ended each short connection: the side whose FIN or RST came first
//!    ([`crate::flow::Flow::closed_by`]), unless the other side's close did not acknowledge it
//!    (both closed at once: counted apart, [`crate::flow::Flow::closed_together`]). When the
//!    server closed more than half of them first, the finding says so (each, or how many) and
//!    its fix starts at the server (a reply with `Connection: close`, a
//!    keep-alive limit of one request, a close after an error reply); the wire cannot tell
//!    whether the client asked for it (HTTP/1.0, its own `Connection: close`), and the fix
//!    says that too. Otherwise the client's pooling is the fix.

use std::any::Any;
use std::time::Duration;

use super::{At, Detector, FindingHead, FlowView, Groups, PerGroup, ShardMap};
use crate::flow::Direction;
use crate::report::{Evidence, Finding, FindingKind, FlowRef, Severity};
use crate::stats::{round3, Histogram, SizeCounter};
use crate::time::Timestamp;
use crate::units::fmt_duration;

pub const MAX_EXCHANGES: u32 = 2;
pub const MIN_CONNECTIONS: u64 = 20;
pub const MIN_SHARE: f64 = 0.8;
pub const MIN_RATE: f64 = 2.0;
pub const WARN_LOST: Duration = Duration::from_millis(100);

#[derive(Default)]
struct State {
    connections: u64,
    short: u64,
    first_syn: Option<Timestamp>,
    last_syn: Timestamp,
    handshake_us: Histogram,
    lost: Duration,
    /// Short connections whose first FIN or RST was the server's, the client's, and those
    /// both sides closed at once (rule 5).
    closed_by_server: u64,
    closed_by_client: u64,
    closed_together: u64,
    exchanges: SizeCounter,
    /// The first short connection to end in the capture (by [`At`]), and its SYN's frame.
    example: Option<(FlowRef, u64, At)>,
}

#[derive(Default)]
pub struct ConnectionChurn {
    state: PerGroup<State>,
}

impl Detector for ConnectionChurn {
    fn on_flow_end(&mut self, flow: &FlowView) {
        let hs = &flow.flow.handshake;
        let (Some(syn), true) = (hs.first_syn(), hs.completed()) else {
            return;
        };
        let Some(request) = flow.flow.half(Direction::ClientToServer).first_data() else {
            return;
        };
        let st = self.state.get(flow.group, Direction::ClientToServer);
        st.connections += 1;
        st.exchanges.record(flow.exchanges);
        if flow.exchanges > MAX_EXCHANGES {
            return;
        }
        st.short += 1;
        match flow.flow.closed_by {
            Some(_) if flow.flow.closed_together => st.closed_together += 1,
            Some(Direction::ServerToClient) => st.closed_by_server += 1,
            Some(Direction::ClientToServer) => st.closed_by_client += 1,
            None => {}
        }
        st.first_syn = Some(st.first_syn.map_or(syn.ts, |f| f.min(syn.ts)));
        st.last_syn = st.last_syn.max(syn.ts);
        let wait = request.ts.since(syn.ts);
        st.lost += wait;
        st.handshake_us.record_duration(wait);
        if super::first_at(&st.example, flow.at, |e| e.2) {
            st.example = Some((flow.flow_ref(), syn.frame, flow.at));
        }
    }

    super::hands_over_its_state!();

    fn absorb(&mut self, state: Box<dyn Any + Send>, map: &ShardMap) {
        let other: PerGroup<State> = super::handed(state);
        self.state.absorb(other, map, |st, o| {
            st.connections += o.connections;
            st.short += o.short;
            st.first_syn = match (st.first_syn, o.first_syn) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            st.last_syn = st.last_syn.max(o.last_syn);
            st.handshake_us.merge(&o.handshake_us);
            st.lost += o.lost;
            st.closed_by_server += o.closed_by_server;
            st.closed_by_client += o.closed_by_client;
            st.closed_together += o.closed_together;
            st.exchanges.merge(&o.exchanges);
            let theirs = o.example.map(|(f, syn, at)| (map.flow_ref(f), syn, at));
            super::earlier(&mut st.example, theirs, |e| e.2);
        });
    }

    fn finish(&mut self, groups: &Groups) -> Vec<Finding> {
        let mut out = Vec::new();
        for (group, dir, st) in self.state.drain() {
            let share = st.short as f64 / st.connections.max(1) as f64;
            let span = match st.first_syn {
                Some(first) => st.last_syn.since(first),
                None => continue,
            };
            let rate = st.short as f64 / span.as_secs_f64().max(1e-3);
            if st.short < MIN_CONNECTIONS || share < MIN_SHARE || rate < MIN_RATE {
                continue;
            }
            let Some((example_flow, syn_frame, _)) = st.example.clone() else {
                continue;
            };
            out.push(finding(
                group,
                dir,
                &st,
                rate,
                example_flow,
                syn_frame,
                groups,
            ));
        }
        out
    }
}

fn finding(
    group: usize,
    dir: Direction,
    st: &State,
    rate: f64,
    example_flow: FlowRef,
    syn_frame: u64,
    groups: &Groups,
) -> Finding {
    let hs = st.handshake_us.distribution(1e-3);
    let severity = if st.lost >= WARN_LOST {
        Severity::Warning
    } else {
        Severity::Info
    };
    let per_conn = st.exchanges.distribution();
    // Rule 5: the server ended most of them.
    let by_server = st.closed_by_server * 2 > st.short;
    let verdict = if by_server {
        let which = if st.closed_by_server == st.short {
            "each".to_string()
        } else {
            format!("{} of them", st.closed_by_server)
        };
        format!(
            "A new connection per request, {which} closed first by the server: {} connections \
             to this server carried at most {} exchanges each ({:.0} per second), and in {} of \
             them the server's FIN or RST came before any close of the client's; each paid a \
             handshake ({:.2} ms median here, a full RTT on a real network).",
            st.short, MAX_EXCHANGES, rate, st.closed_by_server, hs.p50
        )
    } else {
        format!(
            "A new connection per request: {} connections to this server carried at most {} \
             exchanges each ({:.0} per second); each paid a handshake ({:.2} ms median here, \
             a full RTT on a real network) and leaves a TIME_WAIT socket behind.",
            st.short, MAX_EXCHANGES, rate, hs.p50
        )
    };
    let mut ev = Evidence::default();
    ev.facts.push(format!(
        "connections opened (handshake complete) and used in the capture: {}; short-lived \
         (≤ {} exchanges): {}",
        st.connections, MAX_EXCHANGES, st.short
    ));
    ev.facts.push(format!(
        "exchanges per connection: median {}, max {}",
        per_conn.p50, per_conn.max
    ));
    ev.facts.push(format!(
        "SYN → first request byte: median {:.2} ms; {} spent opening connections",
        hs.p50,
        fmt_duration(st.lost)
    ));
    ev.facts.push(format!(
        "closed first by the server (its FIN or RST came first, and any close of the client's \
         acknowledged it): {} of the {} short connections; by the client: {}; by both at once \
         (neither close acknowledged the other): {}",
        st.closed_by_server, st.short, st.closed_by_client, st.closed_together
    ));
    ev.counts
        .insert("closed_by_server".into(), st.closed_by_server);
    ev.counts
        .insert("closed_by_client".into(), st.closed_by_client);
    ev.counts
        .insert("closed_together".into(), st.closed_together);
    ev.counts.insert("connections".into(), st.connections);
    ev.counts.insert("short_connections".into(), st.short);
    ev.values
        .insert("connections_per_second".into(), round3(rate));
    ev.distributions.insert("handshake_wait_ms".into(), hs);
    ev.distributions
        .insert("exchanges_per_connection".into(), per_conn);
    ev.frames = vec![syn_frame];
    let fix = if by_server {
        "Find out why the server ends its connections before pooling in the client: a reply \
         with `Connection: close` (or an HTTP/1.0 request without keep-alive, or a client that \
         asks for the close itself: the wire cannot tell), a keep-alive limit or idle timeout \
         of one request, or an error reply followed by a close (a refused login, a protected \
         mode, a rate limit). Then keep the connection open and reuse it: each new connection \
         costs a round trip before the first byte, slow start, and a TIME_WAIT entry."
    } else {
        "Reuse connections: HTTP keep-alive or a connection pool in the client (database \
         and Redis clients have one), or multiplex requests over one long-lived \
         connection. Each new connection costs a round trip before the first byte, \
         slow start, and a TIME_WAIT entry."
    };
    FindingHead {
        kind: FindingKind::ConnectionChurn,
        severity,
        group,
        direction: dir,
        flows_affected: st.short,
        example_flow,
        time_lost: st.lost,
    }
    .finish(groups, verdict, ev, fix)
}
