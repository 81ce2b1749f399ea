//! Half-open connection attempts, kept compact and capped (a SYN flood must not cost the
//! analysis what open connections cost).
//!
//! Rules:
//! 1. A flow whose first segment is a SYN or a SYN-ACK (no payload, no FIN, no RST) on
//!    endpoints not in the flow table starts here, as an [`Attempt`]: its flow id, its
//!    server's group and the segments themselves, at most two (a SYN and the SYN-ACK that
//!    answers it: ACK = ISN + 1), about a tenth of an open flow's memory.
//! 2. Any other segment on its endpoints (the handshake's ACK, data, an RST, a retry of the
//!    SYN or of the SYN-ACK) *promotes* it: the analysis builds the full flow with the same id
//!    and replays the kept segments into it before the new one, so the flow, its turns and the
//!    detectors see exactly the segments they would have seen. An attempt still here when it
//!    idles out or the capture ends is promoted and ended the same way.
//! 3. At most [`MAX_HALF_OPEN`] attempts are kept; a new one beyond that evicts the oldest
//!    (first in, first out, O(1): no scan), which is counted as *not tracked* and reported.
//!    A later segment of an evicted attempt starts a flow of its own.

use std::collections::VecDeque;

use crate::detect::GroupId;
use crate::flow::{FlowKey, PacketRef};
use crate::fxhash::FxHashMap;
use crate::time::Timestamp;
use crate::wire::{TcpFlags, TcpOptions, TcpSegment};

/// Half-open attempts kept at once, over all servers.
///
/// A Linux listener itself keeps at most its accept backlog of half-open requests
/// (`min(listen backlog, net.core.somaxconn)`, 4096 by default since 5.4; `tcp_max_syn_backlog`
/// bounds it further only with SYN cookies off) and, past that, answers with SYN cookies
/// (`net.ipv4.tcp_syncookies = 1`) and keeps nothing. This cap holds sixteen such full queues.
/// Real clients keep an attempt half-open for one round trip: 65,536 at once is 650,000 new
/// connections a second at 100 ms RTT, beyond any one server's accept rate. An attempt's
/// entry is about 0.2 KB; with the hash table's slack (deleted entries make it grow to four
/// buckets per attempt before it rehashes in place) the whole analysis of a flood peaks at
/// about 40 MB, measured with 1M and 2M SYNs alike.
pub const MAX_HALF_OPEN: usize = 65_536;

/// One kept segment: the flow key holds the endpoints, `from_first` says which sent it.
#[derive(Clone, Copy, Debug)]
struct Kept {
    pkt: PacketRef,
    from_first: bool,
    seq: u32,
    ack: u32,
    flags: TcpFlags,
    window: u16,
    options: TcpOptions,
}

impl Kept {
    fn of(key: &FlowKey, seg: &TcpSegment, pkt: PacketRef) -> Kept {
        Kept {
            pkt,
            from_first: seg.src == key.0 && seg.dst == key.1,
            seq: seg.seq,
            ack: seg.ack,
            flags: seg.flags,
            window: seg.window,
            options: seg.options,
        }
    }

    fn segment(&self, key: &FlowKey) -> TcpSegment {
        let (src, dst) = if self.from_first {
            (key.0, key.1)
        } else {
            (key.1, key.0)
        };
        TcpSegment {
            src,
            dst,
            seq: self.seq,
            ack: self.ack,
            flags: self.flags,
            window: self.window,
            payload_len: 0,
            options: self.options,
        }
    }
}

/// A connection attempt kept compact (rule 1).
#[derive(Clone, Debug)]
pub struct Attempt {
    pub id: u64,
    pub group: GroupId,
    /// The analysis's elapsed-time clock at its last segment.
    pub seen: Timestamp,
    first: Kept,
    answer: Option<Kept>,
}

impl Attempt {
    /// Whether `seg`, on endpoints without a flow, may start an attempt (rule 1).
    pub fn may_start(seg: &TcpSegment) -> bool {
        seg.flags.syn() && !seg.flags.fin() && !seg.flags.rst() && seg.payload_len == 0
    }

    pub fn new(
        id: u64,
        group: GroupId,
        key: &FlowKey,
        seg: &TcpSegment,
        pkt: PacketRef,
        now: Timestamp,
    ) -> Attempt {
        Attempt {
            id,
            group,
            seen: now,
            first: Kept::of(key, seg, pkt),
            answer: None,
        }
    }

    /// Keeps `seg` when it is the SYN-ACK answering the kept SYN; false when it must promote
    /// the attempt (rule 2).
    pub fn absorb(
        &mut self,
        key: &FlowKey,
        seg: &TcpSegment,
        pkt: PacketRef,
        now: Timestamp,
    ) -> bool {
        let syn = self.first;
        let answers = self.answer.is_none()
            && !syn.flags.ack()
            && seg.flags.syn()
            && seg.flags.ack()
            && !seg.flags.fin()
            && !seg.flags.rst()
            && seg.payload_len == 0
            && (seg.src == key.0) != syn.from_first
            && seg.ack == syn.seq.wrapping_add(1);
        if answers {
            self.answer = Some(Kept::of(key, seg, pkt));
            self.seen = now;
        }
        answers
    }

    /// The kept segments, in capture order, to replay into the full flow (rule 2).
    pub fn segments(&self, key: &FlowKey) -> impl Iterator<Item = (TcpSegment, PacketRef)> {
        let key = *key;
        [Some(self.first), self.answer]
            .into_iter()
            .flatten()
            .map(move |k| (k.segment(&key), k.pkt))
    }
}

/// The attempts, by endpoints, and their arrival order for eviction (rule 3).
#[derive(Default)]
pub struct HalfOpen {
    /// Boxed: the table grows to four buckets per attempt before it rehashes in place
    /// (deleted entries count), so its buckets hold a key and a pointer only.
    attempts: FxHashMap<FlowKey, Box<Attempt>>,
    /// Keys in arrival order with the id they arrived with; an entry whose attempt was
    /// promoted (or replaced) is skipped when reached, and dropped when the queue is compacted.
    order: VecDeque<(FlowKey, u64)>,
    /// Attempts evicted untracked.
    pub dropped: u64,
}

impl HalfOpen {
    pub fn len(&self) -> usize {
        self.attempts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.attempts.is_empty()
    }

    pub fn get_mut(&mut self, key: &FlowKey) -> Option<&mut Attempt> {
        self.attempts.get_mut(key).map(|a| &mut **a)
    }

    /// Takes an attempt out, to be promoted.
    pub fn remove(&mut self, key: &FlowKey) -> Option<Attempt> {
        self.attempts.remove(key).map(|a| *a)
    }

    /// Keeps a new attempt (its endpoints have none), evicting the oldest at the cap.
    pub fn insert(&mut self, key: FlowKey, attempt: Attempt) {
        self.insert_capped(key, attempt, MAX_HALF_OPEN);
    }

    fn insert_capped(&mut self, key: FlowKey, attempt: Attempt, cap: usize) {
        if self.attempts.len() >= cap {
            while let Some((k, id)) = self.order.pop_front() {
                if self.attempts.get(&k).is_some_and(|a| a.id == id) {
                    self.attempts.remove(&k);
                    self.dropped += 1;
                    break;
                }
            }
        }
        self.order.push_back((key, attempt.id));
        self.attempts.insert(key, Box::new(attempt));
        // Promoted attempts leave their entries behind: compact once they outnumber the live
        // ones, which costs at most one pass per entry pushed since the last compaction.
        if self.order.len() >= 2 * self.attempts.len().max(1024) {
            let attempts = &self.attempts;
            self.order
                .retain(|(k, id)| attempts.get(k).is_some_and(|a| a.id == *id));
        }
    }

    /// The attempts whose last segment is older than `timeout` at `now`: (id, endpoints).
    pub fn idle(&self, now: Timestamp, timeout: std::time::Duration) -> Vec<(u64, FlowKey)> {
        self.attempts
            .iter()
            .filter(|(_, a)| now.since(a.seen) > timeout)
            .map(|(k, a)| (a.id, *k))
            .collect()
    }

    /// Every attempt: (id, endpoints).
    pub fn all(&mut self) -> Vec<(u64, FlowKey)> {
        self.order = VecDeque::new();
        self.attempts.iter().map(|(k, a)| (a.id, *k)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Timestamp;
    use crate::wire::Endpoint;

    fn syn(port: u16, isn: u32) -> TcpSegment {
        TcpSegment {
            src: Endpoint {
                ip: "10.0.0.1".parse().unwrap(),
                port,
            },
            dst: Endpoint {
                ip: "10.0.0.2".parse().unwrap(),
                port: 80,
            },
            seq: isn,
            ack: 0,
            flags: TcpFlags(TcpFlags::SYN),
            window: 64240,
            payload_len: 0,
            options: TcpOptions::default(),
        }
    }

    fn syn_ack(to: &TcpSegment, isn: u32, ack: u32) -> TcpSegment {
        TcpSegment {
            src: to.dst,
            dst: to.src,
            seq: isn,
            ack,
            flags: TcpFlags(TcpFlags::SYN | TcpFlags::ACK),
            ..*to
        }
    }

    fn pkt(frame: u64) -> PacketRef {
        PacketRef {
            frame,
            ts: Timestamp::from_nanos(frame * 1000),
        }
    }

    fn attempt(id: u64, seg: &TcpSegment) -> (FlowKey, Attempt) {
        let key = FlowKey::of(seg);
        let a = Attempt::new(id, 0, &key, seg, pkt(id), pkt(id).ts);
        (key, a)
    }

    #[test]
    fn keeps_the_answering_syn_ack_and_nothing_else() {
        let s = syn(40000, 1000);
        let (key, mut a) = attempt(1, &s);
        assert!(
            !a.absorb(&key, &syn_ack(&s, 5, 999), pkt(2), pkt(2).ts),
            "wrong ACK"
        );
        assert!(
            !a.absorb(&key, &s, pkt(2), pkt(2).ts),
            "a SYN retry promotes"
        );
        assert!(a.absorb(&key, &syn_ack(&s, 5, 1001), pkt(2), pkt(2).ts));
        assert!(
            !a.absorb(&key, &syn_ack(&s, 5, 1001), pkt(3), pkt(3).ts),
            "a SYN-ACK retry promotes"
        );
        let replay: Vec<_> = a.segments(&key).collect();
        assert_eq!(replay.len(), 2);
        assert_eq!(replay[0].0, s, "the SYN comes back as it was");
        assert_eq!(replay[1].0, syn_ack(&s, 5, 1001));
        assert_eq!(replay[1].1, pkt(2));
    }

    #[test]
    fn only_bare_syns_and_syn_acks_start_an_attempt() {
        let s = syn(40000, 1);
        assert!(Attempt::may_start(&s));
        assert!(Attempt::may_start(&syn_ack(&s, 1, 2)));
        assert!(
            !Attempt::may_start(&TcpSegment {
                payload_len: 10,
                ..s
            }),
            "TFO data"
        );
        let ack = TcpSegment {
            flags: TcpFlags(TcpFlags::ACK),
            ..s
        };
        assert!(!Attempt::may_start(&ack));
    }

    #[test]
    fn the_oldest_is_evicted_at_the_cap_and_counted() {
        let mut t = HalfOpen::default();
        for i in 0..4u16 {
            let (k, a) = attempt(u64::from(i) + 1, &syn(40000 + i, 1));
            t.insert_capped(k, a, 3);
        }
        assert_eq!((t.len(), t.dropped), (3, 1));
        let first = FlowKey::of(&syn(40000, 1));
        assert!(t.get_mut(&first).is_none(), "the oldest went");
        assert!(t.get_mut(&FlowKey::of(&syn(40001, 1))).is_some());
        // A promoted attempt leaves the queue stale: eviction skips it, evicts the next live.
        assert!(t.remove(&FlowKey::of(&syn(40001, 1))).is_some());
        let (k, a) = attempt(5, &syn(40004, 1));
        t.insert_capped(k, a, 3);
        assert_eq!(
            (t.len(), t.dropped),
            (3, 1),
            "below the cap nothing is evicted"
        );
        let (k, a) = attempt(6, &syn(40005, 1));
        t.insert_capped(k, a, 3);
        assert_eq!((t.len(), t.dropped), (3, 2));
        assert!(
            t.get_mut(&FlowKey::of(&syn(40002, 1))).is_none(),
            "oldest live"
        );
        assert!(t.get_mut(&FlowKey::of(&syn(40003, 1))).is_some());
    }

    #[test]
    fn the_arrival_queue_stays_bounded_when_attempts_are_promoted() {
        let mut t = HalfOpen::default();
        for i in 0..10_000u32 {
            let (k, a) = attempt(u64::from(i) + 1, &syn((i % 60_000) as u16 + 1024, i));
            t.insert(k, a);
            t.remove(&k);
        }
        assert_eq!(t.len(), 0);
        assert!(t.order.len() <= 2048, "queue {}", t.order.len());
        assert_eq!(t.dropped, 0);
    }

    #[test]
    fn an_attempt_is_a_small_fraction_of_an_open_flow() {
        // What one more entry costs in each table, before any heap the full flow grows
        // (its turns, unacknowledged segments, the detectors' per-flow state).
        let attempt = std::mem::size_of::<(FlowKey, Box<Attempt>)>()
            + std::mem::size_of::<Attempt>()
            + std::mem::size_of::<(FlowKey, u64)>();
        let open = std::mem::size_of::<(FlowKey, Box<super::super::Entry>)>()
            + std::mem::size_of::<super::super::Entry>();
        assert!(
            attempt * 5 < open,
            "attempt {attempt} B, open flow {open} B"
        );
    }
}
