//! What the server's own sockets had, for a `run` scenario: a finding from the packets ("the
//! server's replies waited for the client's delayed ACK") is one a developer believes when it
//! can add "the server's accepted sockets have TCP_NODELAY off", read from the live sockets.
//!
//! 1. [`server_sockets`] counts, for one server process and one local port, its accepted
//!    sockets by `TCP_NODELAY` (on, off, unknown) and by buffer setting (fixed or not).
//! 2. [`corroborate`] adds that as a fact (and what it rests on) to the findings about data the
//!    server sent from that port: `nagle_delayed_ack`, `nagle_round_trip` and
//!    `fragmented_writes`, direction `server_to_client`, whose `server` is that port. A finding
//!    about another port (a hop's, in a proxy scenario) is left alone: the hop's sockets are
//!    not the server's. The packets decided the finding (its frames, counts and time lost do
//!    not change); the option decides which mechanism its words name.
//! 3. When every accepted socket had TCP_NODELAY on, the server's Nagle held nothing: the
//!    shape the packets show (a piece, the peer's ACK, the rest) is the program writing the
//!    rest only once the ACK came, and the finding is reworded so
//!    ([`crate::detect::reword_for_nodelay`]): its verdict and fix no longer say Nagle.

use serde::Serialize;

use super::interval::process_name;
use super::{BufferSetting, Observation, SocketRole};
use crate::flow::Direction;
use crate::numfmt::count;
use crate::report::{Finding, FindingKind};

/// The accepted sockets of one server process on one port, by option.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ServerSockets {
    /// `pid N (comm)`.
    pub process: String,
    pub port: u16,
    pub accepted: u64,
    pub nodelay_on: u64,
    pub nodelay_off: u64,
    pub nodelay_unknown: u64,
    pub sndbuf_fixed: u64,
    pub rcvbuf_fixed: u64,
    /// Why options could not be read, as the process's observation says.
    pub options_refused: Option<String>,
}

/// The first process of `obs` with accepted sockets on local port `port`; `None` when no
/// process has any (the server had no client connected when it was read).
pub fn server_sockets(obs: &Observation, port: u16) -> Option<ServerSockets> {
    obs.processes.iter().find_map(|p| {
        let mine: Vec<_> = p
            .sockets
            .iter()
            .filter(|s| s.role == SocketRole::Accepted && s.local.port() == port)
            .collect();
        if mine.is_empty() {
            return None;
        }
        let n = |f: &dyn Fn(&super::SocketObservation) -> bool| {
            mine.iter().filter(|s| f(s)).count() as u64
        };
        Some(ServerSockets {
            process: process_name(p),
            port,
            accepted: mine.len() as u64,
            nodelay_on: n(&|s| s.options.nodelay == Some(true)),
            // Off as read only at first sight, before it sent anything (it closed before a
            // re-read): the server may have set it before writing, so it is not known.
            nodelay_off: n(&|s| s.options.nodelay == Some(false) && !s.options_before_data),
            nodelay_unknown: n(&|s| {
                s.options.nodelay.is_none()
                    || (s.options.nodelay == Some(false) && s.options_before_data)
            }),
            sndbuf_fixed: n(&|s| matches!(s.options.sndbuf, BufferSetting::Fixed { .. })),
            rcvbuf_fixed: n(&|s| matches!(s.options.rcvbuf, BufferSetting::Fixed { .. })),
            options_refused: p.options_refused.clone(),
        })
    })
}

impl ServerSockets {
    /// The scenario's own line, neutral (no finding's reading of it): `the server's accepted
    /// sockets on port P: TCP_NODELAY off (1 of 1), read from the live sockets of pid N (x)`.
    pub fn summary_line(&self) -> String {
        let mut line = format!(
            "the server's accepted sockets on port {}: TCP_NODELAY {}",
            self.port,
            self.nodelay_cell()
        );
        if self.sndbuf_fixed > 0 {
            line.push_str(&format!(
                ", SO_SNDBUF set by hand on {} of {}",
                self.sndbuf_fixed, self.accepted
            ));
        }
        if self.nodelay_unknown > 0 {
            if let Some(why) = &self.options_refused {
                line.push_str(&format!(" (unknown: {why})"));
            }
        }
        line.push_str(&format!(", read from the live sockets of {}", self.process));
        line
    }

    /// What a table cell says: `off (2 of 2)`, `on (1 of 1)`, or the mix.
    pub fn nodelay_cell(&self) -> String {
        let of = |k: u64| format!("{k} of {}", self.accepted);
        if self.nodelay_off == self.accepted {
            format!("off ({})", of(self.nodelay_off))
        } else if self.nodelay_on == self.accepted {
            format!("on ({})", of(self.nodelay_on))
        } else if self.nodelay_unknown == self.accepted {
            format!("unknown ({})", of(self.nodelay_unknown))
        } else {
            format!(
                "off {}, on {}, unknown {}",
                of(self.nodelay_off),
                of(self.nodelay_on),
                of(self.nodelay_unknown)
            )
        }
    }

    /// The sentence a Nagle-kind finding about this server's replies gains.
    pub fn nodelay_fact(&self) -> String {
        let of = |k: u64| {
            format!(
                "{k} of {} on port {}, read from the live sockets of {}",
                count(self.accepted, "accepted socket"),
                self.port,
                self.process
            )
        };
        if self.nodelay_off == self.accepted {
            format!(
                "the server's accepted sockets have TCP_NODELAY off ({}): Nagle is on where \
                 the replies are written",
                of(self.nodelay_off)
            )
        } else if self.nodelay_on == self.accepted {
            format!(
                "the server's accepted sockets have TCP_NODELAY on ({}): the server's own Nagle \
                 holds nothing it writes",
                of(self.nodelay_on)
            )
        } else if self.nodelay_unknown == self.accepted {
            format!(
                "the server's TCP_NODELAY could not be read on its {} on port {} ({})",
                count(self.accepted, "accepted socket"),
                self.port,
                self.options_refused
                    .as_deref()
                    .unwrap_or("the kernel did not give it")
            )
        } else {
            format!(
                "TCP_NODELAY is off on {}, on on {}, unknown on {}",
                of(self.nodelay_off),
                self.nodelay_on,
                self.nodelay_unknown
            )
        }
    }
}

/// Adds [`ServerSockets::nodelay_fact`] to the findings about the replies the server sent from
/// its port (see the module doc); returns how many findings gained it.
pub fn corroborate(findings: &mut [Finding], server: &ServerSockets) -> usize {
    let suffix = format!(":{}", server.port);
    let mut n = 0;
    for f in findings.iter_mut().filter(|f| {
        matches!(
            f.kind,
            FindingKind::NagleDelayedAck
                | FindingKind::NagleRoundTrip
                | FindingKind::FragmentedWrites
        ) && f.direction == Direction::ServerToClient
            && f.server.ends_with(&suffix)
    }) {
        if server.accepted > 0 && server.nodelay_on == server.accepted {
            crate::detect::reword_for_nodelay(f);
        }
        f.evidence.facts.push(server.nodelay_fact());
        f.evidence.rests_on.push(format!(
            "TCP_NODELAY of the server's accepted sockets, read by inspect with getsockopt on \
             pidfd_getfd duplicates ({})",
            server.process
        ));
        n += 1;
    }
    n
}
