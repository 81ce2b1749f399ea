//! The handshake of one flow, as the capture point saw it: which SYN a SYN-ACK (or a refusing
//! RST) answered, and what a SYN sent again means (rules 4 and 7 of [`super`]).

use std::time::Duration;

use super::compact::MaybePacket;
use super::{Direction, PacketRef};

/// Handshake instants: RTT at the capture point, and which SYNs went unanswered.
///
/// Compact for the usual handshake (one SYN, one SYN-ACK answering it, the ACK): only those
/// three instants are kept inline, and what they imply (the SYN is the latest SYN and the one
/// answered, the SYN-ACK the only one) is derived. Anything else (a SYN sent again, a SYN-ACK
/// before or after another, a refusal) moves the rest into [`Rare`], allocated then. The three
/// are [`MaybePacket`]s: 48 bytes, not 72.
#[derive(Clone, Debug, Default)]
pub struct Handshake {
    /// The client's first SYN.
    first_syn: MaybePacket,
    /// The first SYN-ACK acknowledging the client's SYN.
    syn_ack: MaybePacket,
    /// The client's first ACK after a SYN-ACK: the handshake completed.
    ack: MaybePacket,
    rare: Option<Box<Rare>>,
}

/// The instants of a handshake that was not one SYN, one SYN-ACK and the ACK.
#[derive(Clone, Copy, Debug, Default)]
struct Rare {
    /// The client's latest SYN.
    syn: Option<PacketRef>,
    /// SYNs sent after the first one (same ISN: a retry, or a copy of the same packet).
    syn_retries: u32,
    /// The latest SYN sent before the first SYN-ACK answering it: the SYN that was answered.
    answered_syn: Option<PacketRef>,
    /// SYN-ACKs seen before the handshake completed.
    syn_acks: u32,
    /// The latest SYN-ACK before the handshake completed: the one the client took.
    last_syn_ack: Option<PacketRef>,
    /// The latest SYN sent again *after* a SYN-ACK answering it had passed the capture point.
    syn_after_syn_ack: Option<PacketRef>,
    /// The server's RST refusing the client's SYN (acknowledging its ISN + 1), before any
    /// SYN-ACK: the connection was refused, and the client may send the same SYN again.
    refused: Option<PacketRef>,
    /// The latest SYN sent before that RST.
    refused_syn: Option<PacketRef>,
}

impl Handshake {
    /// The client's first SYN.
    pub fn first_syn(&self) -> Option<PacketRef> {
        self.first_syn.get()
    }

    /// The first SYN-ACK acknowledging the client's SYN.
    pub fn syn_ack(&self) -> Option<PacketRef> {
        self.syn_ack.get()
    }

    /// The client's first ACK after a SYN-ACK: the handshake completed.
    pub fn ack(&self) -> Option<PacketRef> {
        self.ack.get()
    }

    /// The rare instants, as stored or as the usual handshake implies them.
    fn rare(&self) -> Rare {
        match &self.rare {
            Some(r) => **r,
            // Only one SYN, and at most one SYN-ACK, which answered it (see `on_syn_ack`).
            None => Rare {
                syn: self.first_syn(),
                syn_retries: 0,
                answered_syn: self.syn_ack().and(self.first_syn()),
                syn_acks: u32::from(self.syn_ack.is_some()),
                last_syn_ack: self.syn_ack(),
                syn_after_syn_ack: None,
                refused: None,
                refused_syn: None,
            },
        }
    }

    /// The rare instants, stored from now on.
    fn rare_mut(&mut self) -> &mut Rare {
        if self.rare.is_none() {
            self.rare = Some(Box::new(self.rare()));
        }
        self.rare.as_deref_mut().expect("just stored")
    }

    /// The client's latest SYN.
    pub fn syn(&self) -> Option<PacketRef> {
        self.rare().syn
    }

    /// SYNs sent after the first one (same ISN: a retry, or a copy of the same packet).
    pub fn syn_retries(&self) -> u32 {
        self.rare().syn_retries
    }

    /// SYN-ACKs seen before the handshake completed.
    pub fn syn_acks(&self) -> u32 {
        self.rare().syn_acks
    }

    /// The latest SYN-ACK before the handshake completed: the one the client took.
    pub fn last_syn_ack(&self) -> Option<PacketRef> {
        self.rare().last_syn_ack
    }

    /// The latest SYN sent again *after* a SYN-ACK answering it had passed the capture point.
    pub fn syn_after_syn_ack(&self) -> Option<PacketRef> {
        self.rare().syn_after_syn_ack
    }

    /// The server's RST refusing the client's SYN, before any SYN-ACK.
    pub fn refused(&self) -> Option<PacketRef> {
        self.rare().refused
    }

    /// The client's first ACK of a SYN-ACK (the caller checks that it is one).
    pub(super) fn on_ack(&mut self, pkt: PacketRef) {
        self.ack = MaybePacket::some(pkt);
    }

    /// The handshake's RTT sample towards the side that receives in `dir`, and its two frames
    /// (rule 7, Karn): SYN → SYN-ACK towards the server, when the SYN was sent once; the
    /// SYN-ACK the client took → its ACK towards the client, when one SYN-ACK came and no SYN
    /// was sent again after it. Read for every RTT a detector asks for: the usual handshake
    /// answers from its three instants, without building [`Rare`].
    pub fn rtt_towards(&self, dir: Direction) -> Option<(Duration, [u64; 2])> {
        let sample = |a: PacketRef, b: PacketRef| (b.ts.since(a.ts), [a.frame, b.frame]);
        if self.rare.is_none() {
            // One SYN, at most one SYN-ACK, which answered it (see `rare`).
            return match dir {
                Direction::ClientToServer => Some(sample(self.first_syn()?, self.syn_ack()?)),
                Direction::ServerToClient => Some(sample(self.syn_ack()?, self.ack()?)),
            };
        }
        match dir {
            Direction::ClientToServer => match (self.syn(), self.syn_ack()) {
                (Some(s), Some(sa)) if self.syn_retries() == 0 => Some(sample(s, sa)),
                _ => None,
            },
            Direction::ServerToClient => match (self.last_syn_ack(), self.ack()) {
                (Some(sa), Some(a))
                    if self.syn_acks() == 1 && self.syn_after_syn_ack().is_none() =>
                {
                    Some(sample(sa, a))
                }
                _ => None,
            },
        }
    }

    /// SYN, SYN-ACK answering it and the client's ACK of that SYN-ACK were all seen.
    pub fn completed(&self) -> bool {
        self.first_syn.is_some() && self.syn_ack.is_some() && self.ack.is_some()
    }

    /// The first SYN and the last one sent again before any answer (a SYN-ACK, or an RST
    /// refusing it): the client's SYN went unanswered (at the capture point) until that retry.
    pub fn unanswered_syn_retry(&self) -> Option<(PacketRef, PacketRef)> {
        let first = self.first_syn()?;
        let r = self.rare();
        let last = match (r.refused_syn, r.answered_syn) {
            (Some(r), Some(a)) => {
                if r.frame < a.frame {
                    r
                } else {
                    a
                }
            }
            (Some(r), None) => r,
            (None, Some(a)) => a,
            (None, None) if self.syn_ack.is_some() || r.refused.is_some() => return None,
            (None, None) => r.syn?,
        };
        (last.frame != first.frame).then_some((first, last))
    }

    /// A SYN-ACK that passed the capture point but did not reach the client: the client sent
    /// its SYN again afterwards (`retry`), and then either took a SYN-ACK sent after that retry
    /// or never completed the handshake. Returns (the answered SYN, its SYN-ACK, the retry).
    /// A client that ACKs an earlier SYN-ACK right after its retry got it late, not never.
    pub fn lost_syn_ack(&self) -> Option<(PacketRef, PacketRef, PacketRef)> {
        let r = self.rare.as_deref()?;
        let retry = r.syn_after_syn_ack?;
        let taken_later = match (self.ack(), r.last_syn_ack) {
            (None, _) => true,
            (Some(_), Some(taken)) => taken.frame > retry.frame,
            (Some(_), None) => false,
        };
        Some((r.answered_syn?, self.syn_ack()?, retry)).filter(|_| taken_later)
    }

    pub(super) fn on_syn(&mut self, pkt: PacketRef) {
        if self.first_syn.is_none() && self.syn_ack.is_none() && self.rare.is_none() {
            // The usual first SYN: it is also the latest.
            self.first_syn = MaybePacket::some(pkt);
            return;
        }
        let (first_syn, after_syn_ack) =
            (self.first_syn, self.syn_ack.is_some() && self.ack.is_none());
        let r = self.rare_mut();
        if first_syn.is_some() {
            r.syn_retries += 1;
        }
        if after_syn_ack {
            r.syn_after_syn_ack = Some(pkt);
        }
        r.syn = Some(pkt);
        self.first_syn.get_or_insert(pkt);
    }

    /// An RST acknowledging the client's SYN, before any SYN-ACK.
    pub(super) fn on_refusal(&mut self, pkt: PacketRef) {
        if self.rare().refused.is_none() && self.syn_ack.is_none() {
            let r = self.rare_mut();
            r.refused = Some(pkt);
            r.refused_syn = r.syn;
        }
    }

    /// A SYN-ACK; `answers` when it acknowledges the client's SYN (or that SYN is unseen).
    pub(super) fn on_syn_ack(&mut self, pkt: PacketRef, answers: bool) {
        if !answers || self.ack.is_some() {
            return;
        }
        if self.syn_ack.is_none() && self.first_syn.is_some() && self.rare.is_none() {
            // The usual SYN-ACK: the only one, answering the only SYN.
            self.syn_ack = MaybePacket::some(pkt);
            return;
        }
        let first = self.syn_ack.is_none();
        let r = self.rare_mut();
        if first {
            r.answered_syn = r.syn;
        }
        r.syn_acks += 1;
        r.last_syn_ack = Some(pkt);
        self.syn_ack.get_or_insert(pkt);
    }
}
