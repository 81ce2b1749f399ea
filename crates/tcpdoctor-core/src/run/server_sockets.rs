//! What the server's own sockets said during a scenario: its accepted TCP sockets read from
//! the live process (`inspect`'s reading), summed up for the report, and the fact a Nagle
//! finding can quote ("the server's accepted sockets have TCP_NODELAY off").
//!
//! Counts, never a guess: a socket whose options the kernel would not give is counted as
//! unknown, and the reason is kept.

use serde::Serialize;

use crate::inspect::{ProcessObservation, SocketRole};
use crate::numfmt::count;
use crate::report::{Finding, FindingKind};

/// The server's accepted sockets at one reading during the scenario.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ServerSockets {
    /// Accepted TCP sockets of the server's processes at the reading.
    pub accepted: u64,
    pub nodelay_on: u64,
    pub nodelay_off: u64,
    /// Options not readable (the reason is in `refused`).
    pub nodelay_unknown: u64,
    /// Sockets whose send buffer was fixed by the application (`SO_SNDBUF`), as far as the
    /// evidence shows.
    pub sndbuf_fixed: u64,
    /// Why options could not be read, when they could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// How and when they were read.
    pub how: String,
    /// The sentence the report prints.
    pub summary: String,
}

impl ServerSockets {
    /// Sums up the accepted sockets of `processes`, read as `how` says.
    pub fn from_processes(processes: &[ProcessObservation], how: &str) -> ServerSockets {
        let mut s = ServerSockets {
            how: how.to_string(),
            ..ServerSockets::default()
        };
        for p in processes {
            if s.refused.is_none() {
                s.refused.clone_from(&p.options_refused);
            }
            for sock in p.sockets.iter().filter(|k| k.role == SocketRole::Accepted) {
                s.accepted += 1;
                match sock.options.nodelay {
                    Some(true) => s.nodelay_on += 1,
                    Some(false) => s.nodelay_off += 1,
                    None => s.nodelay_unknown += 1,
                }
                if matches!(
                    sock.options.sndbuf,
                    crate::inspect::BufferSetting::Fixed { .. }
                ) {
                    s.sndbuf_fixed += 1;
                }
            }
        }
        s.summary = s.sentence();
        s
    }

    fn sentence(&self) -> String {
        if self.accepted == 0 {
            return "no accepted TCP socket of the server was open when it was read".into();
        }
        let of = |n: u64| format!("{n} of {}", self.accepted);
        let mut parts = Vec::new();
        if self.nodelay_off == self.accepted {
            parts.push(format!(
                "the server's accepted sockets have TCP_NODELAY off ({})",
                of(self.nodelay_off)
            ));
        } else if self.nodelay_on == self.accepted {
            parts.push(format!(
                "the server's accepted sockets have TCP_NODELAY on ({})",
                of(self.nodelay_on)
            ));
        } else {
            parts.push(format!(
                "the server's accepted sockets: TCP_NODELAY on {}, off {}, unknown {}",
                of(self.nodelay_on),
                of(self.nodelay_off),
                of(self.nodelay_unknown)
            ));
        }
        if self.sndbuf_fixed > 0 {
            parts.push(format!(
                "SO_SNDBUF set by hand on {}",
                of(self.sndbuf_fixed)
            ));
        }
        let mut line = parts.join("; ");
        if self.nodelay_unknown > 0 {
            if let Some(why) = &self.refused {
                line.push_str(&format!(" (options unreadable: {why})"));
            }
        }
        line
    }

    /// Adds what the sockets say to the findings it bears on: the Nagle findings, whose
    /// reader wants to know whether the server's sockets had Nagle on.
    pub fn annotate(&self, findings: &mut [Finding]) {
        if self.accepted == 0 {
            return;
        }
        for f in findings.iter_mut().filter(|f| {
            matches!(
                f.kind,
                FindingKind::NagleDelayedAck | FindingKind::NagleRoundTrip
            )
        }) {
            f.evidence.facts.push(format!(
                "Read from the live server ({}): {}.",
                count(self.accepted, "accepted socket"),
                self.summary
            ));
            f.evidence.rests_on.push(self.how.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::{BufferSetting, SocketObservation, SocketOptions};
    use crate::report::{Evidence, FlowRef, Severity};

    fn socket(role: SocketRole, nodelay: Option<bool>, sndbuf: BufferSetting) -> SocketObservation {
        SocketObservation {
            inode: 1,
            fd: 5,
            local: "127.0.0.1:7000".parse().unwrap(),
            remote: "127.0.0.1:40000".parse().unwrap(),
            role,
            congestion: None,
            options: SocketOptions {
                nodelay,
                cork: None,
                sndbuf_bytes: None,
                rcvbuf_bytes: None,
                sndbuf,
                rcvbuf: BufferSetting::Unknown { why: "-".into() },
                notsent_lowat_bytes: None,
                keepalive: None,
            },
            samples: Vec::new(),
            closed: false,
        }
    }

    fn process(sockets: Vec<SocketObservation>, refused: Option<&str>) -> ProcessObservation {
        ProcessObservation {
            pid: 42,
            comm: "srv".into(),
            cmdline: "srv".into(),
            netns: None,
            first: None,
            last: None,
            options_refused: refused.map(str::to_string),
            exited: false,
            sockets,
        }
    }

    fn unknown() -> BufferSetting {
        BufferSetting::Unknown { why: "-".into() }
    }

    #[test]
    fn nagle_off_on_every_accepted_socket_is_said_and_quoted_by_nagle_findings() {
        let p = process(
            vec![
                socket(SocketRole::Listener, Some(false), unknown()),
                socket(SocketRole::Accepted, Some(false), unknown()),
                socket(
                    SocketRole::Accepted,
                    Some(false),
                    BufferSetting::Fixed {
                        evidence: "above tcp_wmem's max".into(),
                    },
                ),
            ],
            None,
        );
        let s = ServerSockets::from_processes(&[p], "getsockopt on a duplicate");
        assert_eq!((s.accepted, s.nodelay_off, s.sndbuf_fixed), (2, 2, 1));
        assert_eq!(
            s.summary,
            "the server's accepted sockets have TCP_NODELAY off (2 of 2); SO_SNDBUF set by hand on 1 of 2"
        );
        let finding = |kind| Finding {
            kind,
            severity: Severity::Warning,
            file: "f".into(),
            server: "127.0.0.1:7000".into(),
            direction: crate::flow::Direction::ServerToClient,
            flows_affected: 1,
            flows_total: 1,
            example_flow: FlowRef {
                id: 1,
                client: "c".into(),
                server: "s".into(),
            },
            verdict: String::new(),
            time_lost_ms: 0.0,
            evidence: Evidence::default(),
            fix: String::new(),
        };
        let mut fs = vec![
            finding(FindingKind::NagleDelayedAck),
            finding(FindingKind::RttBound),
        ];
        s.annotate(&mut fs);
        assert!(
            fs[0].evidence.facts[0].contains("TCP_NODELAY off (2 of 2)"),
            "{:?}",
            fs[0].evidence.facts
        );
        assert_eq!(fs[0].evidence.rests_on, vec!["getsockopt on a duplicate"]);
        assert!(fs[1].evidence.facts.is_empty(), "not a Nagle finding");
    }

    #[test]
    fn unreadable_options_are_unknown_with_the_reason_and_add_nothing_false() {
        let p = process(
            vec![
                socket(SocketRole::Accepted, None, unknown()),
                socket(SocketRole::Connected, Some(true), unknown()),
            ],
            Some("kernel.yama.ptrace_scope = 2"),
        );
        let s = ServerSockets::from_processes(&[p], "how");
        assert_eq!((s.accepted, s.nodelay_unknown), (1, 1));
        assert!(
            s.summary.contains("unknown 1 of 1") && s.summary.contains("ptrace_scope = 2"),
            "{}",
            s.summary
        );
        let none = ServerSockets::from_processes(&[], "how");
        assert_eq!(none.accepted, 0);
        let mut fs = Vec::new();
        none.annotate(&mut fs);
    }
}
