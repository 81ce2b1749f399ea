//! Half-open connection attempts, kept compact and capped (a SYN flood must not cost the
//! analysis what open connections cost).
//!
//! Rules:
//! 1. A flow whose first segment is a SYN or a SYN-ACK (no payload, no FIN, no RST) on
//!    endpoints not in the flow table starts here, as an [`Attempt`]: its flow id, its
//!    server's group and the segments themselves, at most two (a SYN and the SYN-ACK that
//!    answers it: ACK = ISN + 1), about a tenth of an open flow's memory.
//! 2. A retry of a kept segment — the same direction, sequence and acknowledgment numbers,
//!    flags and options but for the timestamp (the kernel sends its SYN again after 1, 3, 7 s
//!    …, its SYN-ACK again after 1, 3, 7 s …) — is kept too, compactly: its frame, time,
//!    window and timestamp option (32 bytes), at most [`MAX_RETRIES`] of them. A flood whose
//!    SYNs are retried stays compact.
//! 3. Any other segment on its endpoints (the handshake's ACK, data, an RST, a SYN with
//!    another ISN, a retry beyond [`MAX_RETRIES`]) *promotes* it: the analysis builds the full
//!    flow with the same id and replays the kept segments into it, in the order they came,
//!    before the new one, so the flow, its turns and the detectors see exactly the segments
//!    they would have seen (a SYN retry's timestamps included: `retransmission_stall` times
//!    SYN timeouts from them). An attempt still here when it idles out or the capture ends is
//!    promoted and ended the same way.
//! 4. At most [`MAX_HALF_OPEN`] attempts are kept; a new one beyond that evicts the oldest
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

/// Retries kept per attempt (rule 2): Linux sends a SYN at most 1 + `tcp_syn_retries` (6)
/// times and a SYN-ACK 1 + `tcp_synack_retries` (5) times; a retry beyond this promotes.
pub const MAX_RETRIES: usize = 16;

/// One kept segment: the flow key holds the endpoints, [`Kept::sent_by_first`] says which sent
/// it. Its options are kept flat, their presence and small values in `bits`: 40 bytes, not 48
/// (an attempt holds two: issue 29 wants it a small fraction of an open flow).
#[derive(Clone, Copy, Debug)]
struct Kept {
    pkt: PacketRef,
    seq: u32,
    ack: u32,
    /// The timestamp option's (TSval, TSecr), when [`Kept::TIMESTAMP`].
    timestamp: (u32, u32),
    /// The MSS option, when [`Kept::MSS`].
    mss: u16,
    window: u16,
    window_scale: Option<u8>,
    flags: TcpFlags,
    /// [`Kept::FROM_FIRST`], [`Kept::TIMESTAMP`], [`Kept::MSS`], [`Kept::SACK_PERMITTED`], and
    /// the SACK blocks (at most 4: 40 bytes of options) from bit [`Kept::BLOCKS_SHIFT`].
    bits: u8,
}

impl Kept {
    const FROM_FIRST: u8 = 1;
    const TIMESTAMP: u8 = 1 << 1;
    const MSS: u8 = 1 << 2;
    const SACK_PERMITTED: u8 = 1 << 3;
    const BLOCKS_SHIFT: u8 = 4;

    fn of(key: &FlowKey, seg: &TcpSegment, pkt: PacketRef) -> Kept {
        let o = &seg.options;
        debug_assert!(
            o.sack_blocks < 16,
            "40 bytes of options hold at most 4 blocks"
        );
        let bit = |on: bool, b: u8| if on { b } else { 0 };
        Kept {
            pkt,
            seq: seg.seq,
            ack: seg.ack,
            timestamp: o.timestamp.unwrap_or_default(),
            mss: o.mss.unwrap_or_default(),
            window: seg.window,
            window_scale: o.window_scale,
            flags: seg.flags,
            bits: bit(seg.src == key.0 && seg.dst == key.1, Kept::FROM_FIRST)
                | bit(o.timestamp.is_some(), Kept::TIMESTAMP)
                | bit(o.mss.is_some(), Kept::MSS)
                | bit(o.sack_permitted, Kept::SACK_PERMITTED)
                | (o.sack_blocks.min(15) << Kept::BLOCKS_SHIFT),
        }
    }

    /// Sent from the flow key's first endpoint.
    fn sent_by_first(&self) -> bool {
        self.bits & Kept::FROM_FIRST != 0
    }

    /// Its TCP options, as they came.
    fn options(&self) -> TcpOptions {
        let has = |b: u8| self.bits & b != 0;
        TcpOptions {
            mss: has(Kept::MSS).then_some(self.mss),
            window_scale: self.window_scale,
            sack_permitted: has(Kept::SACK_PERMITTED),
            sack_blocks: self.bits >> Kept::BLOCKS_SHIFT,
            timestamp: has(Kept::TIMESTAMP).then_some(self.timestamp),
        }
    }

    fn segment(&self, key: &FlowKey) -> TcpSegment {
        let (src, dst) = if self.sent_by_first() {
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
            options: self.options(),
        }
    }
}

/// A retry of a kept segment (rule 2): what differs from it.
#[derive(Clone, Copy, Debug)]
struct Retry {
    pkt: PacketRef,
    timestamp: Option<(u32, u32)>,
    window: u16,
    /// A retry of the answer (the SYN-ACK), not of the first segment.
    of_answer: bool,
}

impl Retry {
    /// `seg` as a retry of `k`, if it is one: the same but for its timestamp and window.
    fn of(k: &Kept, key: &FlowKey, seg: &TcpSegment, pkt: PacketRef) -> Option<Retry> {
        let kept_options = k.options();
        let same_options = TcpOptions {
            timestamp: kept_options.timestamp,
            ..seg.options
        } == kept_options;
        let same = (seg.src == key.0 && seg.dst == key.1) == k.sent_by_first()
            && seg.seq == k.seq
            && seg.ack == k.ack
            && seg.flags == k.flags
            && seg.payload_len == 0
            && same_options
            && kept_options.timestamp.is_some() == seg.options.timestamp.is_some();
        same.then_some(Retry {
            pkt,
            timestamp: seg.options.timestamp,
            window: seg.window,
            of_answer: false,
        })
    }

    /// The retried segment as it came, from the kept one.
    fn kept(&self, k: &Kept) -> Kept {
        let has_timestamp = if self.timestamp.is_some() {
            Kept::TIMESTAMP
        } else {
            0
        };
        Kept {
            pkt: self.pkt,
            window: self.window,
            timestamp: self.timestamp.unwrap_or_default(),
            bits: k.bits & !Kept::TIMESTAMP | has_timestamp,
            ..*k
        }
    }
}

/// An attempt's retries, in arrival order, and how many came before the answer.
#[derive(Clone, Debug, Default)]
struct Retries {
    kept: Vec<Retry>,
    before_answer: usize,
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
    /// None until the first retry: an attempt never retried pays one pointer.
    retries: Option<Box<Retries>>,
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
            retries: None,
        }
    }

    /// Keeps `seg` when it is the SYN-ACK answering the kept SYN, or a retry of a kept segment
    /// (rule 2); false when it must promote the attempt (rule 3).
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
            && (seg.src == key.0) != syn.sent_by_first()
            && seg.ack == syn.seq.wrapping_add(1);
        if answers {
            self.answer = Some(Kept::of(key, seg, pkt));
            self.seen = now;
            return true;
        }
        let retry = Retry::of(&self.first, key, seg, pkt).or_else(|| {
            let answer = self.answer.as_ref()?;
            let r = Retry::of(answer, key, seg, pkt)?;
            Some(Retry {
                of_answer: true,
                ..r
            })
        });
        let Some(retry) = retry else {
            return false;
        };
        let answered = self.answer.is_some();
        let retries = self.retries.get_or_insert_with(Box::default);
        if retries.kept.len() == MAX_RETRIES {
            return false;
        }
        retries.kept.push(retry);
        if !answered {
            retries.before_answer = retries.kept.len();
        }
        self.seen = now;
        true
    }

    /// The kept segments, in the order they came, to replay into the full flow (rule 3).
    pub fn segments(&self, key: &FlowKey) -> impl Iterator<Item = (TcpSegment, PacketRef)> + '_ {
        let key = *key;
        let (before, after) = match &self.retries {
            Some(r) => r.kept.split_at(r.before_answer),
            None => (&[][..], &[][..]),
        };
        let retried = move |r: &Retry| match (r.of_answer, &self.answer) {
            (true, Some(answer)) => r.kept(answer),
            _ => r.kept(&self.first),
        };
        std::iter::once(self.first)
            .chain(before.iter().map(retried))
            .chain(self.answer)
            .chain(after.iter().map(retried))
            .map(move |k| (k.segment(&key), k.pkt))
    }
}

/// The attempts, by endpoints, and their arrival order for eviction (rule 4).
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
    /// The cap, when not [`MAX_HALF_OPEN`] (0): a shard's share of it.
    pub cap: usize,
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
        let cap = match self.cap {
            0 => MAX_HALF_OPEN,
            cap => cap,
        };
        self.insert_capped(key, attempt, cap);
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
            !a.absorb(&key, &syn(40000, 2000), pkt(2), pkt(2).ts),
            "a SYN with another ISN promotes"
        );
        assert!(a.absorb(&key, &syn_ack(&s, 5, 1001), pkt(2), pkt(2).ts));
        assert!(
            !a.absorb(&key, &syn_ack(&s, 6, 1001), pkt(3), pkt(3).ts),
            "another SYN-ACK promotes"
        );
        let ack = TcpSegment {
            flags: TcpFlags(TcpFlags::ACK),
            seq: 1001,
            ack: 6,
            ..s
        };
        assert!(!a.absorb(&key, &ack, pkt(3), pkt(3).ts), "the ACK promotes");
        let replay: Vec<_> = a.segments(&key).collect();
        assert_eq!(replay.len(), 2);
        assert_eq!(replay[0].0, s, "the SYN comes back as it was");
        assert_eq!(replay[1].0, syn_ack(&s, 5, 1001));
        assert_eq!(replay[1].1, pkt(2));
    }

    fn with_ts(seg: &TcpSegment, tsval: u32, window: u16) -> TcpSegment {
        TcpSegment {
            window,
            options: TcpOptions {
                mss: Some(1460),
                window_scale: Some(7),
                sack_permitted: true,
                timestamp: Some((tsval, 0)),
                ..TcpOptions::default()
            },
            ..*seg
        }
    }

    /// The kernel's retries (a SYN at 0, 1 and 3 s, its SYN-ACK answered at 3 s and sent
    /// again at 4 s, the SYN once more at 5 s) are kept, and replayed in the order they came
    /// with their own frames, times, windows and timestamps.
    #[test]
    fn retries_are_kept_and_replayed_in_order() {
        let at = |frame: u64, ms: u64| PacketRef {
            frame,
            ts: Timestamp::from_nanos(ms * 1_000_000),
        };
        let s = syn(40000, 1000);
        let sent = [
            (with_ts(&s, 100, 64240), at(1, 0)),
            (with_ts(&s, 1100, 64240), at(4, 1000)),
            (with_ts(&s, 3100, 64000), at(9, 3000)),
            (with_ts(&syn_ack(&s, 5, 1001), 7, 65160), at(10, 3001)),
            (with_ts(&syn_ack(&s, 5, 1001), 1007, 65160), at(12, 4001)),
            (with_ts(&s, 5100, 64240), at(15, 5000)),
        ];
        let key = FlowKey::of(&s);
        let mut a = Attempt::new(1, 0, &key, &sent[0].0, sent[0].1, sent[0].1.ts);
        for (seg, p) in &sent[1..] {
            assert!(a.absorb(&key, seg, *p, p.ts), "{p:?}");
        }
        assert_eq!(a.seen, at(15, 5000).ts);
        let replay: Vec<_> = a.segments(&key).collect();
        assert_eq!(replay, sent);
        // A retry that differs in more than its timestamp and window is no retry.
        let no_wscale = TcpSegment {
            options: TcpOptions {
                window_scale: None,
                ..sent[1].0.options
            },
            ..sent[1].0
        };
        assert!(!a.absorb(&key, &no_wscale, at(16, 6000), at(16, 6000).ts));
        let with_data = TcpSegment {
            payload_len: 1,
            ..sent[1].0
        };
        assert!(!a.absorb(&key, &with_data, at(16, 6000), at(16, 6000).ts));
    }

    #[test]
    fn retries_beyond_the_cap_promote() {
        let s = syn(40000, 1000);
        let (key, mut a) = attempt(1, &s);
        for i in 0..MAX_RETRIES as u64 {
            assert!(a.absorb(&key, &s, pkt(2 + i), pkt(2 + i).ts), "retry {i}");
        }
        let next = pkt(100);
        assert!(!a.absorb(&key, &s, next, next.ts), "one more promotes");
        assert_eq!(a.segments(&key).count(), 1 + MAX_RETRIES);
        assert!(a.segments(&key).all(|(seg, _)| seg == s));
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
        // What one more entry costs in each table. An open flow also holds, on the heap, the
        // two turns its tracker boxes while a request waits for its response; not counted:
        // its unacknowledged segments and the detectors' per-flow state (the measured peak,
        // scripts/bench-syn-flood.sh against bench-analyze-conns.sh: ~65 B per attempt
        // against ~2.3 KB per open connection).
        let attempt = std::mem::size_of::<(FlowKey, Box<Attempt>)>()
            + std::mem::size_of::<Attempt>()
            + std::mem::size_of::<(FlowKey, u64)>();
        let open = std::mem::size_of::<(FlowKey, Box<super::super::Entry>)>()
            + std::mem::size_of::<super::super::Entry>()
            + 2 * std::mem::size_of::<crate::turns::Turn>();
        // Under a quarter (208 B against 992): it was under a fifth until an open flow's
        // turns shrank from 152 to 96 bytes each.
        assert!(
            attempt * 4 < open,
            "attempt {attempt} B, open flow {open} B"
        );
    }
}
