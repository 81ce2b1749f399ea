//! The handshake of one flow, as the capture point saw it: which SYN a SYN-ACK (or a refusing
//! RST) answered, and what a SYN sent again means (rules 4 and 7 of [`super`]).

use super::PacketRef;

/// Handshake instants: RTT at the capture point, and which SYNs went unanswered.
#[derive(Clone, Copy, Debug, Default)]
pub struct Handshake {
    /// The client's first SYN.
    pub first_syn: Option<PacketRef>,
    /// The client's latest SYN.
    pub syn: Option<PacketRef>,
    /// SYNs sent after the first one (same ISN: a retry, or a copy of the same packet).
    pub syn_retries: u32,
    /// The latest SYN sent before the first SYN-ACK answering it: the SYN that was answered.
    pub answered_syn: Option<PacketRef>,
    /// The first SYN-ACK acknowledging the client's SYN.
    pub syn_ack: Option<PacketRef>,
    /// SYN-ACKs seen before the handshake completed.
    pub syn_acks: u32,
    /// The latest SYN-ACK before the handshake completed: the one the client took.
    pub last_syn_ack: Option<PacketRef>,
    /// The latest SYN sent again *after* a SYN-ACK answering it had passed the capture point.
    pub syn_after_syn_ack: Option<PacketRef>,
    /// The server's RST refusing the client's SYN (acknowledging its ISN + 1), before any
    /// SYN-ACK: the connection was refused, and the client may send the same SYN again.
    pub refused: Option<PacketRef>,
    /// The latest SYN sent before that RST.
    pub refused_syn: Option<PacketRef>,
    /// The client's first ACK after a SYN-ACK: the handshake completed.
    pub ack: Option<PacketRef>,
}

impl Handshake {
    /// SYN, SYN-ACK answering it and the client's ACK of that SYN-ACK were all seen.
    pub fn completed(&self) -> bool {
        self.first_syn.is_some() && self.syn_ack.is_some() && self.ack.is_some()
    }

    /// The first SYN and the last one sent again before any answer (a SYN-ACK, or an RST
    /// refusing it): the client's SYN went unanswered (at the capture point) until that retry.
    pub fn unanswered_syn_retry(&self) -> Option<(PacketRef, PacketRef)> {
        let first = self.first_syn?;
        let last = match (self.refused_syn, self.answered_syn) {
            (Some(r), Some(a)) => {
                if r.frame < a.frame {
                    r
                } else {
                    a
                }
            }
            (Some(r), None) => r,
            (None, Some(a)) => a,
            (None, None) if self.syn_ack.is_some() || self.refused.is_some() => return None,
            (None, None) => self.syn?,
        };
        (last.frame != first.frame).then_some((first, last))
    }

    /// A SYN-ACK that passed the capture point but did not reach the client: the client sent
    /// its SYN again afterwards (`retry`), and then either took a SYN-ACK sent after that retry
    /// or never completed the handshake. Returns (the answered SYN, its SYN-ACK, the retry).
    /// A client that ACKs an earlier SYN-ACK right after its retry got it late, not never.
    pub fn lost_syn_ack(&self) -> Option<(PacketRef, PacketRef, PacketRef)> {
        let retry = self.syn_after_syn_ack?;
        let taken_later = match (self.ack, self.last_syn_ack) {
            (None, _) => true,
            (Some(_), Some(taken)) => taken.frame > retry.frame,
            (Some(_), None) => false,
        };
        Some((self.answered_syn?, self.syn_ack?, retry)).filter(|_| taken_later)
    }

    pub(super) fn on_syn(&mut self, pkt: PacketRef) {
        if self.first_syn.is_some() {
            self.syn_retries += 1;
        } else {
            self.first_syn = Some(pkt);
        }
        if self.syn_ack.is_some() && self.ack.is_none() {
            self.syn_after_syn_ack = Some(pkt);
        }
        self.syn = Some(pkt);
    }

    /// An RST acknowledging the client's SYN, before any SYN-ACK.
    pub(super) fn on_refusal(&mut self, pkt: PacketRef) {
        if self.refused.is_none() && self.syn_ack.is_none() {
            self.refused = Some(pkt);
            self.refused_syn = self.syn;
        }
    }

    /// A SYN-ACK; `answers` when it acknowledges the client's SYN (or that SYN is unseen).
    pub(super) fn on_syn_ack(&mut self, pkt: PacketRef, answers: bool) {
        if !answers || self.ack.is_some() {
            return;
        }
        if self.syn_ack.is_none() {
            self.syn_ack = Some(pkt);
            self.answered_syn = self.syn;
        }
        self.syn_acks += 1;
        self.last_syn_ack = Some(pkt);
    }
}
