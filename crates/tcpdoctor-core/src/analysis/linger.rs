//! Flows that ended (both FINs seen, or a reset), kept [`ENDED_FLOW_LINGER`] to absorb their last
//! ACKs and retransmissions, in 64 bytes rather than their whole entry (issue 29: on a busy
//! server's capture, every connection that closed in the last few seconds lingers; at 400,000 of
//! them the entries held 300 MB). A record is boxed (64 bytes in mimalloc, 80 in glibc's malloc,
//! and an 8-byte pointer in its table), not kept inline in the table: it is allocated as its flow's
//! entry is freed and reuses those pages, where a table of 64-byte buckets would be pages of its
//! own, added to the peak.
//!
//! An ended flow has told the detectors all it will: a segment it absorbs changes nothing
//! but when it was last seen. It keeps only what decides whether a segment on its endpoints
//! is its own — a SYN that opens another connection on them is not
//! ([`Flow::is_new_connection`](crate::flow::Flow::is_new_connection)) — and that time.

use super::table::Endpoints;
use super::{Entry, ENDED_FLOW_LINGER};
use crate::flow::{Direction, SynClue};
use crate::seq::SeqNum;
use crate::time::Timestamp;
use crate::wire::{Endpoint, TcpSegment};

/// What an ended flow keeps while it lingers.
#[derive(Debug)]
pub(crate) struct Lingering {
    client: Endpoint,
    server: Endpoint,
    /// The capture's elapsed-time clock at its last segment: what ages it.
    seen: Timestamp,
    /// Per direction, what its sender tells of a SYN it might send again.
    clues: [SynClue; 2],
}

impl Endpoints for Lingering {
    #[inline(always)]
    fn endpoints(&self) -> (Endpoint, Endpoint) {
        (self.client, self.server)
    }
}

impl Lingering {
    /// What the ended flow of `entry` keeps.
    pub(crate) fn of(entry: &Entry) -> Lingering {
        let flow = &entry.flow;
        Lingering {
            client: flow.client,
            server: flow.server,
            seen: entry.seen,
            clues: [Direction::ClientToServer, Direction::ServerToClient].map(|d| flow.syn_clue(d)),
        }
    }

    /// Ended longer ago than the linger time at `now`: the sweep forgets it.
    pub(crate) fn expired(&self, now: Timestamp) -> bool {
        now.since(self.seen) > ENDED_FLOW_LINGER
    }

    /// A segment of the flow (not another connection's) was seen at `now`.
    pub(crate) fn absorb(&mut self, now: Timestamp) {
        self.seen = now;
    }

    /// Whether `seg` is a SYN (without ACK) that opens another connection on these
    /// endpoints, as the ended flow's entry would have said.
    pub(crate) fn opens_another(&self, seg: &TcpSegment) -> bool {
        if !seg.flags.syn() || seg.flags.ack() {
            return false;
        }
        let dir = if seg.src == self.client && seg.dst == self.server {
            Direction::ClientToServer
        } else {
            Direction::ServerToClient
        };
        self.clues[dir.index()].opens_another(SeqNum(seg.seq))
    }
}
