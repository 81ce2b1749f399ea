//! Two legs of one hop: a proxy, sidecar or tunnel endpoint captured on both sides.
//!
//! A capture taken on a host that runs a forwarder holds each conversation twice: once between
//! the client and the hop, once between the hop and the upstream server. A finding on the
//! client's leg that says "the server writes each response in pieces" is then about the hop,
//! and the upstream's own leg tells whether the pieces were already there.
//!
//! Rules:
//! 1. Every flow with at least [`MIN_TURNS`] turns leaves a *leg record*: the direction, bytes
//!    and segments of its first [`KEPT_TURNS`] turns, when each started and ended, and how
//!    many of its messages per direction left whole (no more segments than their bytes need at
//!    the sender's full segment size). Only headers are used — sequence-space lengths, never
//!    payload bytes, so captures cut short by a snap length pair as well as full ones.
//! 2. Two flows are the legs of one hop when their kept turns carry the same bytes in the same
//!    directions, they have different servers and different clients, the client-facing leg's
//!    server address is the upstream leg's client address (one host), and the data moves
//!    through the hop in time: each request turn starts on the client-facing leg no later
//!    than on the upstream leg (and at most [`MAX_HOP_DELAY`] earlier), each response turn
//!    starts on the upstream leg no later than on the client-facing leg.
//! 3. A leg that could pair with more than one other is ambiguous and is not paired: a hop is
//!    named only when the capture leaves one answer.
//! 4. The client-facing leg's server is the hop's listening endpoint; the upstream leg's
//!    client is the hop's outbound endpoint. A finding whose sender is the hop (responses on
//!    the client-facing leg) is phrased about the hop, and says
//!    whether the *source* leg carried the same messages whole (the hop splits them) or in
//!    pieces too (the hop passes the pieces on).
//! 5. How long the hop kept what it received (PHYSICS §9, "Blame the element that held the
//!    bytes"): each leg also records when the first and the last byte of at most
//!    [`KEPT_RESPONSES`] of its responses crossed it, spread over the whole leg: response *k*
//!    (counted from 0) is kept while *k* is a multiple of the leg's *stride*, which starts at
//!    1 and doubles whenever the sample is full (every other kept response is then dropped).
//!    The first responses alone would not do: a receiver starts in quick-ACK mode (Linux ACKs
//!    its first segments at once), so a Nagle-on hop holds nothing at first and everything
//!    later. The sample depends only on how many responses the leg carried, so two legs with
//!    the same responses keep the same ones (with different counts, the indices that are a
//!    multiple of the larger stride are on both). Response *k* of the upstream leg is
//!    response *k* of the client-facing leg (compared in order while their sizes agree); the
//!    hop's *lag* for it is the time from its first (last) byte arriving on the upstream leg
//!    to the same byte leaving on the client-facing leg, both seen by the one capture on the
//!    hop's host. A hop
//!    whose lag is small forwarded what it read at once: a stall on its client-facing leg was
//!    already in the bytes it received. A lag of about the stall's length means the hop's
//!    own socket held bytes it already had ([`crate::detect`] decides which, per finding).

use std::time::Duration;

use crate::flow::{Direction, Flow};
use crate::fxhash::FxHashMap;
use crate::time::Timestamp;
use crate::turns::Turn;
use crate::wire::Endpoint;
use smallvec::SmallVec;

/// Turns a flow needs for its leg record (three request/response exchanges).
pub const MIN_TURNS: usize = 6;
/// Turns kept per leg record.
pub const KEPT_TURNS: usize = 6;
/// Responses whose timing a leg record keeps (rule 5), spread over the leg: at least
/// `KEPT_RESPONSES / 2` of them once the leg carried that many.
pub const KEPT_RESPONSES: usize = 32;
/// Leg records kept per capture (≈ 1 KB each at most, ≈ 250 bytes for a short flow): memory
/// stays bounded on captures of millions of connections; past it, the legs of the flows that
/// began first are kept (whatever order flows end in) and the others are not paired.
pub const MAX_LEGS: usize = 131_072;
/// The longest a hop may hold a request before forwarding it.
pub const MAX_HOP_DELAY: Duration = Duration::from_secs(2);

/// A kept turn (rule 1): its direction, bytes and when its first byte passed, in 16 bytes, not
/// 24 (every open flow keeps its first turns until it has enough for a leg: issue 29). A turn
/// carries less than 2⁴⁸ bytes (at most 2³² segments of at most 64 KiB), so the direction
/// takes the top bit of the byte count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TurnSig {
    bytes_and_dir: u64,
    first: Timestamp,
}

/// The bit of [`TurnSig::bytes_and_dir`] set for a server→client turn.
const SERVER_TO_CLIENT: u64 = 1 << 63;

impl TurnSig {
    fn new(dir: Direction, bytes: u64, first: Timestamp) -> TurnSig {
        debug_assert!(bytes < SERVER_TO_CLIENT);
        let dir_bit = match dir {
            Direction::ClientToServer => 0,
            Direction::ServerToClient => SERVER_TO_CLIENT,
        };
        TurnSig {
            bytes_and_dir: bytes | dir_bit,
            first,
        }
    }

    fn dir(&self) -> Direction {
        if self.bytes_and_dir & SERVER_TO_CLIENT != 0 {
            Direction::ServerToClient
        } else {
            Direction::ClientToServer
        }
    }

    fn bytes(&self) -> u64 {
        self.bytes_and_dir & !SERVER_TO_CLIENT
    }
}

/// How the messages of one direction of a leg left: whole, or in more segments than needed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    pub messages: u64,
    pub segments: u64,
    /// Messages sent in no more segments than their bytes need.
    pub whole: u64,
}

impl Shape {
    pub fn all_whole(&self) -> bool {
        self.messages > 0 && self.whole == self.messages
    }

    pub fn segments_per_message(&self) -> f64 {
        self.segments as f64 / self.messages.max(1) as f64
    }
}

/// A [`Shape`] as a leg record keeps it: in 12 bytes, not 24 (every open flow holds two: issue
/// 29). The counts saturate at 2³² − 1 (a flow of more turns or segments would take terabytes
/// of capture).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counts {
    messages: u32,
    segments: u32,
    whole: u32,
}

impl Counts {
    fn shape(self) -> Shape {
        Shape {
            messages: u64::from(self.messages),
            segments: u64::from(self.segments),
            whole: u64::from(self.whole),
        }
    }
}

/// When one response crossed a leg (rule 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ResponseTimes {
    bytes: u64,
    first: Timestamp,
    last: Timestamp,
}

/// One flow's record (rules 1 and 5). Every open flow holds one (issue 29): the turns and the
/// responses it saw are counted once, in `shape` ([`LegRecord::count`]). The first two turns
/// and the first response are kept inline: a flow of one exchange (most of a busy server's)
/// allocates nothing for its record, which costs 24 bytes more than two empty `Vec`s and
/// saves the two allocations (80 bytes of chunks) they would make.
#[derive(Clone, Debug, Default)]
pub struct LegRecord {
    turns: SmallVec<[TurnSig; 2]>,
    /// Per direction: its turns (messages), their segments, those sent whole.
    shape: [Counts; 2],
    /// Kept responses (rule 5): response `j × stride` of the leg is `responses[j]`.
    responses: SmallVec<[ResponseTimes; 1]>,
    /// The sample's stride (0 until the first response: read as 1).
    stride: u64,
}

impl LegRecord {
    /// Records a turn that just ended.
    pub fn on_turn(&mut self, flow: &Flow, turn: &Turn) {
        if self.turns.len() < KEPT_TURNS {
            self.turns
                .push(TurnSig::new(turn.dir, turn.bytes, turn.first.ts));
        }
        if turn.dir == Direction::ServerToClient {
            // Counted in its shape below: this is response number `messages` (from 0).
            let k = u64::from(self.shape[Direction::ServerToClient.index()].messages);
            self.keep_response(
                k,
                ResponseTimes {
                    bytes: turn.bytes,
                    first: turn.first.ts,
                    last: turn.last.ts,
                },
            );
        }
        let full = u64::from(flow.full_segment(turn.dir).max(1));
        let s = &mut self.shape[turn.dir.index()];
        s.messages = s.messages.saturating_add(1);
        s.segments = s.segments.saturating_add(turn.segments);
        // segments ≤ max(1, ⌈bytes / full⌉), without a division: (segments − 1) × full < bytes.
        let whole = turn.segments <= 1 || u64::from(turn.segments - 1) * full < turn.bytes;
        s.whole = s.whole.saturating_add(u32::from(whole));
    }

    /// Rule 5's decimating sample: keeps response `k` while `k` is a multiple of the stride;
    /// a full sample drops every other kept response and doubles the stride. `k` counts the
    /// leg's responses from 0.
    fn keep_response(&mut self, k: u64, r: ResponseTimes) {
        self.stride = self.stride.max(1);
        if !k.is_multiple_of(self.stride) {
            return;
        }
        if self.responses.len() == KEPT_RESPONSES {
            self.stride *= 2;
            let mut j = 0;
            self.responses.retain(|_| {
                j += 1;
                j % 2 == 1
            });
            if !k.is_multiple_of(self.stride) {
                return;
            }
        }
        self.responses.push(r);
    }

    /// Turns recorded.
    fn count(&self) -> u64 {
        u64::from(self.shape[0].messages) + u64::from(self.shape[1].messages)
    }

    /// The kept response of index `k`, if `k` is in the sample.
    fn response(&self, k: u64) -> Option<&ResponseTimes> {
        let stride = self.stride.max(1);
        if !k.is_multiple_of(stride) {
            return None;
        }
        self.responses.get(usize::try_from(k / stride).ok()?)
    }
}

/// A finished leg: its flow and record.
#[derive(Clone, Debug)]
pub struct Leg {
    pub flow: u64,
    pub client: Endpoint,
    pub server: Endpoint,
    record: LegRecord,
}

impl Leg {
    /// The leg of `flow`, if it has enough turns to pair.
    pub fn of(flow: &Flow, record: LegRecord) -> Option<Leg> {
        (record.count() >= MIN_TURNS as u64 && record.turns.len() >= MIN_TURNS).then_some(Leg {
            flow: flow.id,
            client: flow.client,
            server: flow.server,
            record,
        })
    }
}

/// A hop seen from both sides.
#[derive(Clone, Debug, PartialEq)]
pub struct Hop {
    /// The client on the client-facing leg.
    pub client: Endpoint,
    /// The hop's listening endpoint (the client-facing leg's server).
    pub listen: Endpoint,
    /// The upstream server.
    pub upstream: Endpoint,
    /// The client-facing leg's flow, and the upstream leg's.
    pub client_flow: u64,
    pub upstream_flow: u64,
    /// The client's requests on the client-facing leg; the upstream's responses on its leg.
    pub requests: Shape,
    pub responses: Shape,
    /// How long the hop kept the responses it relayed (rule 5).
    pub forwarding: Forwarding,
}

/// The hop's lag for each response compared on both legs (rule 5): from a byte arriving on
/// the upstream leg to the same byte leaving on the client-facing leg, for the response's
/// first and last byte.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Forwarding {
    /// `(first byte, last byte)` lag per compared response, in order.
    pub lags: Vec<(Duration, Duration)>,
}

impl Forwarding {
    /// The responses both samples kept (rule 5): the indices that are a multiple of the
    /// larger stride, in order, while their sizes agree.
    fn of(upstream: &LegRecord, client: &LegRecord) -> Forwarding {
        let stride = upstream.stride.max(client.stride).max(1);
        let mut lags = Vec::new();
        let mut k = 0u64;
        while let (Some(u), Some(c)) = (upstream.response(k), client.response(k)) {
            if u.bytes != c.bytes {
                break;
            }
            lags.push((c.first.since(u.first), c.last.since(u.last)));
            k += stride;
        }
        Forwarding { lags }
    }

    /// Responses compared.
    pub fn compared(&self) -> usize {
        self.lags.len()
    }

    /// Responses whose last byte the hop kept at least `at_least`.
    pub fn held(&self, at_least: Duration) -> usize {
        self.lags.iter().filter(|(_, l)| *l >= at_least).count()
    }

    /// The longest the hop kept a first or last byte.
    pub fn max_lag(&self) -> Duration {
        self.lags
            .iter()
            .map(|(f, l)| (*f).max(*l))
            .max()
            .unwrap_or_default()
    }

    /// The median lag of the responses' last bytes.
    pub fn median_last(&self) -> Duration {
        let mut v: Vec<Duration> = self.lags.iter().map(|(_, l)| *l).collect();
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or_default()
    }
}

/// The hop a finding's sender is, with the leg the messages came from (rule 4).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HopSender<'a> {
    pub hop: &'a Hop,
    /// The endpoint the hop relays for (the upstream for responses, the client's side for
    /// requests), the flow it was seen on, and how its messages left on its own leg.
    pub source: Endpoint,
    pub source_flow: u64,
    pub source_shape: Shape,
}

impl Hop {
    /// The hop as the sender of `dir` data on the leg whose server is `server`, if it is: the
    /// responses on the client-facing leg. (Requests on the upstream leg are not named: the
    /// upstream's other clients, which never went through the hop, share its findings.)
    pub fn sender(&self, server: Endpoint, dir: Direction) -> Option<HopSender<'_>> {
        match dir {
            Direction::ServerToClient if self.listen == server => Some(HopSender {
                hop: self,
                source: self.upstream,
                source_flow: self.upstream_flow,
                source_shape: self.responses,
            }),
            _ => None,
        }
    }
}

fn signature(leg: &Leg) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = crate::fxhash::FxHasher::default();
    for t in &leg.record.turns {
        (t.dir().index(), t.bytes()).hash(&mut h);
    }
    h.finish()
}

/// Whether `a` (client-facing) and `b` (upstream) carry the same turns through a hop.
fn relays(a: &Leg, b: &Leg) -> bool {
    // The hop is one host: it accepts on the client-facing leg's server address and dials
    // the upstream from that same address (a monitor talking to two unrelated servers from
    // one client is not a hop).
    if a.server == b.server
        || a.client == b.client
        || a.server.ip != b.client.ip
        || a.record.turns.len() != b.record.turns.len()
    {
        return false;
    }
    a.record.turns.iter().zip(&b.record.turns).all(|(x, y)| {
        if x.dir() != y.dir() || x.bytes() != y.bytes() {
            return false;
        }
        let (early, late) = match x.dir() {
            Direction::ClientToServer => (x.first, y.first),
            Direction::ServerToClient => (y.first, x.first),
        };
        late >= early && late.since(early) <= MAX_HOP_DELAY
    })
}

/// Pairs the legs of every hop in the capture (rules 2–3).
pub fn pair(legs: &[Leg]) -> Vec<Hop> {
    let mut by_sig: FxHashMap<u64, Vec<usize>> = FxHashMap::default();
    for (i, leg) in legs.iter().enumerate() {
        by_sig.entry(signature(leg)).or_default().push(i);
    }
    let mut hops = Vec::new();
    let mut buckets: Vec<&Vec<usize>> = by_sig.values().filter(|v| v.len() >= 2).collect();
    buckets.sort_by_key(|v| v[0]);
    for bucket in buckets {
        // Bounded work: a bucket of many identical legs (a benchmark's connections) is
        // ambiguous anyway.
        if bucket.len() > 64 {
            continue;
        }
        let partners = |i: usize| -> Vec<usize> {
            bucket
                .iter()
                .copied()
                .filter(|&j| j != i && relays(&legs[i], &legs[j]))
                .collect()
        };
        for &a in bucket {
            let ups = partners(a);
            let [b] = ups[..] else { continue };
            let downs: Vec<usize> = bucket
                .iter()
                .copied()
                .filter(|&j| j != b && relays(&legs[j], &legs[b]))
                .collect();
            if downs != [a] {
                continue;
            }
            let (a, b) = (&legs[a], &legs[b]);
            hops.push(Hop {
                client: a.client,
                listen: a.server,
                upstream: b.server,
                client_flow: a.flow,
                upstream_flow: b.flow,
                requests: a.record.shape[Direction::ClientToServer.index()].shape(),
                responses: b.record.shape[Direction::ServerToClient.index()].shape(),
                forwarding: Forwarding::of(&b.record, &a.record),
            });
        }
    }
    hops
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};

    fn ep(port: u16) -> Endpoint {
        Endpoint {
            ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port,
        }
    }

    /// A leg of three 7-byte requests and 155-byte responses, each turn starting `lag` µs
    /// after `t0 + k × 10 ms` (requests) or `rlag` µs after (responses), each response's last
    /// byte 1 ms after its first.
    fn leg(flow: u64, client: u16, server: u16, lag: u64, rlag: u64, segs: u64) -> Leg {
        leg_ending(flow, client, server, lag, rlag, segs, 1000)
    }

    /// [`leg`], each response's last byte `last` µs after its first.
    fn leg_ending(
        flow: u64,
        client: u16,
        server: u16,
        lag: u64,
        rlag: u64,
        segs: u64,
        last: u64,
    ) -> Leg {
        let mut record = LegRecord::default();
        for k in 0..3u64 {
            for (dir, bytes, l) in [
                (Direction::ClientToServer, 7, lag),
                (Direction::ServerToClient, 155, rlag),
            ] {
                record
                    .turns
                    .push(TurnSig::new(dir, bytes, Timestamp((k * 10_000 + l) * 1000)));
            }
            record.responses.push(ResponseTimes {
                bytes: 155,
                first: Timestamp((k * 10_000 + rlag) * 1000),
                last: Timestamp((k * 10_000 + rlag + last) * 1000),
            });
            let s = &mut record.shape[Direction::ServerToClient.index()];
            s.messages += 1;
            s.segments += u32::try_from(segs).unwrap();
            s.whole += u32::from(segs == 1);
        }
        record.shape[Direction::ClientToServer.index()].messages = 3;
        Leg {
            flow,
            client: ep(client),
            server: ep(server),
            record,
        }
    }

    #[test]
    fn two_legs_of_a_hop_pair_and_name_the_upstream() {
        // Client-facing leg: request at 0, response at 100 µs; upstream leg: request
        // forwarded at 20 µs, response at 50 µs, sent whole.
        let legs = [
            leg(1, 50000, 9001, 0, 100, 3),
            leg(2, 50001, 8001, 20, 50, 1),
        ];
        let hops = pair(&legs);
        assert_eq!(hops.len(), 1);
        let h = &hops[0];
        assert_eq!((h.listen, h.upstream), (ep(9001), ep(8001)));
        assert_eq!((h.client_flow, h.upstream_flow), (1, 2));
        let s = h
            .sender(ep(9001), Direction::ServerToClient)
            .expect("hop sends");
        assert!(s.source_shape.all_whole());
        // Each response's first and last byte left 50 µs after it arrived.
        assert_eq!(h.forwarding.compared(), 3);
        assert_eq!(h.forwarding.max_lag(), Duration::from_micros(50));
        assert_eq!(h.forwarding.held(Duration::from_millis(1)), 0);
        assert!(h.sender(ep(9001), Direction::ClientToServer).is_none());
        assert!(h.sender(ep(8001), Direction::ClientToServer).is_none());
    }

    #[test]
    fn a_hop_that_keeps_the_last_bytes_shows_the_lag() {
        // The upstream's responses end 1 ms after they start; the hop sends the last bytes
        // 41 ms after their first (40 ms after they arrived): it held them.
        let legs = [
            leg_ending(1, 50000, 9001, 0, 100, 2, 41_050),
            leg(2, 50001, 8001, 20, 50, 9),
        ];
        let hops = pair(&legs);
        assert_eq!(hops.len(), 1);
        let fw = &hops[0].forwarding;
        assert_eq!(fw.compared(), 3);
        assert_eq!(fw.median_last(), Duration::from_micros(40_100));
        assert_eq!(fw.held(Duration::from_millis(20)), 3);
        assert_eq!(fw.held(Duration::from_millis(41)), 0);
        // Responses of other sizes are not compared: the legs stop agreeing there.
        let mut other = leg(2, 50001, 8001, 20, 50, 9);
        other.record.responses[1].bytes = 154;
        let hops = pair(&[leg_ending(1, 50000, 9001, 0, 100, 2, 41_050), other]);
        assert_eq!(hops[0].forwarding.compared(), 1);
    }

    /// A record of `n` responses, response `k` of `1000 + k` bytes, first byte at `k` ms and
    /// last byte `last(k)` µs later.
    fn sampled(n: u64, last: impl Fn(u64) -> u64) -> LegRecord {
        let mut r = LegRecord::default();
        for k in 0..n {
            r.keep_response(
                k,
                ResponseTimes {
                    bytes: 1000 + k,
                    first: Timestamp(k * 1_000_000),
                    last: Timestamp((k * 1000 + last(k)) * 1000),
                },
            );
        }
        r
    }

    #[test]
    fn the_response_sample_spreads_over_the_leg_and_matches_across_legs() {
        // 240 responses: stride 8, responses 0, 8, …, 232 kept, in order.
        let r = sampled(240, |_| 0);
        assert_eq!(r.stride, 8);
        let kept: Vec<u64> = r.responses.iter().map(|x| x.bytes - 1000).collect();
        assert_eq!(kept, (0..240).step_by(8).collect::<Vec<u64>>());
        assert!(r.responses.capacity() <= KEPT_RESPONSES);
        // The upstream leg forwards at once; the client-facing leg's last bytes leave 40 ms
        // late from response 40 on (the peer's quick-ACK start is over): the sample sees both.
        let fw = Forwarding::of(&r, &sampled(240, |k| if k < 40 { 0 } else { 40_000 }));
        assert_eq!(fw.compared(), 30);
        assert_eq!(fw.held(Duration::from_millis(20)), 25);
        // Legs of different lengths (the capture ended during the longer one): the responses
        // both kept, at the larger stride, 0, 8, …, 96.
        let fw = Forwarding::of(&sampled(100, |_| 0), &r);
        assert_eq!(fw.compared(), 13);
        assert_eq!(Forwarding::of(&r, &sampled(31, |_| 0)).compared(), 4);
        // Sizes that disagree end the comparison there.
        let mut other = sampled(240, |_| 0);
        other.responses[3].bytes += 1;
        assert_eq!(Forwarding::of(&other, &r).compared(), 3);
    }

    #[test]
    fn legs_out_of_causal_order_or_ambiguous_do_not_pair() {
        // Each leg's request comes first on the other, and each response too: no order in
        // which one could relay the other.
        assert!(pair(&[
            leg(1, 50000, 9001, 100, 200, 3),
            leg(2, 50001, 8001, 0, 50, 1)
        ])
        .is_empty());
        // Two candidate upstreams with the same turns: ambiguous, nothing named.
        let legs = [
            leg(1, 50000, 9001, 0, 100, 3),
            leg(2, 50001, 8001, 20, 50, 1),
            leg(3, 50002, 8002, 30, 60, 1),
        ];
        assert!(pair(&legs).is_empty());
        // One monitor asking two unrelated servers the same thing from one address: the
        // first is asked first and answers last, but its address is not where the second
        // leg comes from, so it is no hop.
        let at = |mut l: Leg, client: [u8; 4], server: [u8; 4]| {
            l.client.ip = IpAddr::V4(Ipv4Addr::from(client));
            l.server.ip = IpAddr::V4(Ipv4Addr::from(server));
            l
        };
        let monitor = [
            at(leg(1, 50000, 6379, 0, 100, 3), [10, 0, 0, 1], [10, 0, 0, 2]),
            at(leg(2, 50001, 6379, 20, 50, 1), [10, 0, 0, 1], [10, 0, 0, 3]),
        ];
        assert!(pair(&monitor).is_empty());
        // Different sizes: unrelated conversations.
        let mut other = leg(2, 50001, 8001, 20, 50, 1);
        let t = other.record.turns[1];
        other.record.turns[1] = TurnSig::new(t.dir(), 154, t.first);
        assert!(pair(&[leg(1, 50000, 9001, 0, 100, 3), other]).is_empty());
    }
}
