//! Where the messages of tcpdoctor's own driver ended: the script's framing as evidence.
//!
//! The capture carries no payload the core reads, so on the wire one message in pieces looks
//! like several messages one segment each. `run`'s driver knows better: it wrote every
//! request itself and its script's framing (each step's `read`) cut the server's byte stream
//! into responses. It records, per connection, the stream offset at which each message ended,
//! counted from the connection's first data byte (the byte after the ISN) in each direction,
//! and hands them to the analysis keyed by the connection's two endpoints as the driver's
//! socket saw them. [`crate::detect::unbatched_messages`] takes them as proof of where messages
//! begin and end (its rule 6′).
//!
//! Bounded: at most [`MAX_ENDS`] ends per direction and connection (the first ones), only
//! offsets below 2³² (where a sequence number maps to one offset), and the shell records at
//! most [`MAX_CONNECTIONS`] connections (the first ones it opened: a later connection that
//! reuses a recorded one's endpoints comes after it in the capture, see
//! [`MessageEnds::new`]).

use std::sync::Mutex;

use crate::flow::Direction;
use crate::fxhash::FxHashMap;
use crate::wire::Endpoint;

/// Ends kept per direction of one connection: the first this many messages.
pub const MAX_ENDS: usize = 4096;
/// Connections whose ends are recorded, at most: the first this many.
pub const MAX_CONNECTIONS: usize = 64;

/// One connection's message ends, as its driver recorded them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionEnds {
    /// The driver's end of the connection (its local address).
    pub client: Endpoint,
    /// The peer the driver connected to.
    pub server: Endpoint,
    /// Per direction ([`Direction::index`]): the stream offsets where each message ended,
    /// ascending, the first [`MAX_ENDS`] below 2³².
    ends: [Vec<u32>; 2],
    /// Bytes of each direction's stream so far.
    total: [u64; 2],
}

/// Where a segment's bytes lie against the recorded message ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// Exactly message number `.0` of its direction (from 1), whole.
    Whole(u64),
    /// Not one whole message: a message boundary lies inside it, or its start or end is not
    /// one.
    NotWhole,
    /// Beyond what was recorded.
    Unknown,
}

impl ConnectionEnds {
    pub fn new(client: Endpoint, server: Endpoint) -> ConnectionEnds {
        ConnectionEnds {
            client,
            server,
            ends: [Vec::new(), Vec::new()],
            total: [0; 2],
        }
    }

    /// A message of `len` bytes went `dir` (an empty one is no boundary).
    pub fn message(&mut self, dir: Direction, len: usize) {
        if len == 0 {
            return;
        }
        let i = dir.index();
        self.total[i] = self.total[i].saturating_add(len as u64);
        if self.ends[i].len() < MAX_ENDS {
            if let Ok(end) = u32::try_from(self.total[i]) {
                self.ends[i].push(end);
            }
        }
    }

    /// The recorded ends of `dir`.
    pub fn ends(&self, dir: Direction) -> &[u32] {
        &self.ends[dir.index()]
    }

    /// Whether anything was recorded.
    pub fn is_empty(&self) -> bool {
        self.ends.iter().all(Vec::is_empty)
    }

    /// Where bytes `[start, end)` of `dir`'s stream lie against the message ends.
    pub fn cut(&self, dir: Direction, start: u64, end: u64) -> Cut {
        let ends = &self.ends[dir.index()];
        let Some(&last) = ends.last() else {
            return Cut::Unknown;
        };
        if end > u64::from(last) || start >= end {
            return Cut::Unknown;
        }
        match ends.binary_search_by(|e| u64::from(*e).cmp(&end)) {
            Ok(i) => {
                let begins = if i == 0 { 0 } else { u64::from(ends[i - 1]) };
                if begins == start {
                    Cut::Whole(i as u64 + 1)
                } else {
                    Cut::NotWhole
                }
            }
            Err(_) => Cut::NotWhole,
        }
    }
}

impl ConnectionEnds {
    /// How many whole messages bytes `[start, end)` of `dir`'s stream are: `Some(k)` when they
    /// begin where a message begins and end where one ends (k ≥ 1 messages), `None` when a
    /// message is cut at either edge or the bytes are beyond the record.
    pub fn whole_messages(&self, dir: Direction, start: u64, end: u64) -> Option<u64> {
        let ends = &self.ends[dir.index()];
        if start >= end || end > u64::from(*ends.last()?) {
            return None;
        }
        let at = |x: u64| ends.binary_search_by(|e| u64::from(*e).cmp(&x));
        let first = match start {
            0 => 0,
            _ => at(start).ok()? + 1,
        };
        let last = at(end).ok()?;
        Some((last + 1 - first) as u64)
    }
}

/// The recorded connection of a flow: only the first flow in the capture on a recorded pair
/// of endpoints takes it (a later connection on the same ports is another one).
#[derive(Debug, Default)]
pub struct FlowFraming {
    ends: Option<std::sync::Arc<MessageEnds>>,
    taken: FxHashMap<(Endpoint, Endpoint), u64>,
}

impl FlowFraming {
    pub fn new(ends: Option<std::sync::Arc<MessageEnds>>) -> FlowFraming {
        FlowFraming {
            ends,
            taken: FxHashMap::default(),
        }
    }

    /// The ends recorded for flow `id` from `client` to `server`, if it is the first flow on
    /// those endpoints.
    pub fn of(&mut self, id: u64, client: Endpoint, server: Endpoint) -> Option<&ConnectionEnds> {
        let ends = self.ends.as_ref()?;
        ends.get(client, server)?;
        let first = *self.taken.entry((client, server)).or_insert(id);
        (first == id).then(|| ends.get(client, server)).flatten()
    }
}

/// The recorded connections, by their endpoints.
#[derive(Debug, Default)]
pub struct MessageEnds {
    by_flow: FxHashMap<(Endpoint, Endpoint), ConnectionEnds>,
}

impl MessageEnds {
    /// The connections recorded. Endpoints recorded twice (the same ports reused by a later
    /// connection) are ambiguous and dropped, as are connections with nothing recorded.
    pub fn new(conns: Vec<ConnectionEnds>) -> MessageEnds {
        let mut by_flow: FxHashMap<(Endpoint, Endpoint), ConnectionEnds> = FxHashMap::default();
        let mut twice = Vec::new();
        for c in conns.into_iter().filter(|c| !c.is_empty()) {
            let key = (c.client, c.server);
            if by_flow.insert(key, c).is_some() {
                twice.push(key);
            }
        }
        for k in twice {
            by_flow.remove(&k);
        }
        MessageEnds { by_flow }
    }

    /// The ends recorded for the connection from `client` to `server`.
    pub fn get(&self, client: Endpoint, server: Endpoint) -> Option<&ConnectionEnds> {
        self.by_flow.get(&(client, server))
    }

    pub fn len(&self) -> usize {
        self.by_flow.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_flow.is_empty()
    }
}

/// What a driver's connections hand in as they end (shared by its tasks): at most
/// [`MAX_CONNECTIONS`] are recorded, the first to [`EndsLog::claim`] a place.
#[derive(Debug, Default)]
pub struct EndsLog {
    claimed: std::sync::atomic::AtomicUsize,
    done: Mutex<Vec<ConnectionEnds>>,
}

impl EndsLog {
    /// Whether a connection just opened is to be recorded (one of the first
    /// [`MAX_CONNECTIONS`]).
    pub fn claim(&self) -> bool {
        use std::sync::atomic::Ordering;
        self.claimed.fetch_add(1, Ordering::Relaxed) < MAX_CONNECTIONS
    }

    /// A recorded connection ended.
    pub fn hand_in(&self, c: ConnectionEnds) {
        if let Ok(mut v) = self.done.lock() {
            v.push(c);
        }
    }

    /// Everything handed in, for the analysis.
    pub fn take(&self) -> MessageEnds {
        let v = self.done.lock().map(|mut v| std::mem::take(&mut *v));
        MessageEnds::new(v.unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_messages_are_counted_only_between_two_ends() {
        let mut c = ConnectionEnds::new(ep(1), ep(2));
        for len in [5, 5, 7] {
            c.message(Direction::ServerToClient, len);
        }
        let d = Direction::ServerToClient;
        assert_eq!(c.whole_messages(d, 0, 5), Some(1));
        assert_eq!(c.whole_messages(d, 0, 17), Some(3));
        assert_eq!(c.whole_messages(d, 5, 17), Some(2));
        assert_eq!(c.whole_messages(d, 5, 16), None);
        assert_eq!(c.whole_messages(d, 4, 10), None);
        assert_eq!(c.whole_messages(d, 0, 18), None);
        assert_eq!(c.whole_messages(Direction::ClientToServer, 0, 5), None);
    }
    use std::net::{IpAddr, Ipv4Addr};

    fn ep(port: u16) -> Endpoint {
        Endpoint {
            ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port,
        }
    }

    #[test]
    fn a_segment_is_whole_only_from_one_end_to_the_next() {
        let mut c = ConnectionEnds::new(ep(40000), ep(7000));
        for len in [5, 5, 0, 5, 10] {
            c.message(Direction::ServerToClient, len);
        }
        let s2c = Direction::ServerToClient;
        assert_eq!(c.ends(s2c), &[5, 10, 15, 25]);
        assert_eq!(c.cut(s2c, 0, 5), Cut::Whole(1));
        assert_eq!(c.cut(s2c, 10, 15), Cut::Whole(3));
        assert_eq!(c.cut(s2c, 15, 25), Cut::Whole(4));
        // Two messages, a piece, a piece ending on an end.
        assert_eq!(c.cut(s2c, 0, 10), Cut::NotWhole);
        assert_eq!(c.cut(s2c, 15, 20), Cut::NotWhole);
        assert_eq!(c.cut(s2c, 20, 25), Cut::NotWhole);
        // Past the last end, or the other direction: nothing known.
        assert_eq!(c.cut(s2c, 25, 30), Cut::Unknown);
        assert_eq!(c.cut(s2c, 20, 30), Cut::Unknown);
        assert_eq!(c.cut(Direction::ClientToServer, 0, 5), Cut::Unknown);
    }

    #[test]
    fn ends_are_bounded_and_below_two_to_the_32() {
        let mut c = ConnectionEnds::new(ep(40000), ep(7000));
        for _ in 0..MAX_ENDS + 10 {
            c.message(Direction::ClientToServer, 1);
        }
        assert_eq!(c.ends(Direction::ClientToServer).len(), MAX_ENDS);
        let mut c = ConnectionEnds::new(ep(40000), ep(7000));
        c.message(Direction::ClientToServer, u32::MAX as usize);
        c.message(Direction::ClientToServer, 1);
        assert_eq!(c.ends(Direction::ClientToServer), &[u32::MAX]);
    }

    #[test]
    fn endpoints_recorded_twice_are_dropped() {
        let one = |port| {
            let mut c = ConnectionEnds::new(ep(port), ep(7000));
            c.message(Direction::ClientToServer, 4);
            c
        };
        let m = MessageEnds::new(vec![
            one(1),
            one(2),
            one(1),
            ConnectionEnds::new(ep(3), ep(7000)),
        ]);
        assert_eq!(m.len(), 1);
        assert!(m.get(ep(2), ep(7000)).is_some());
        assert!(m.get(ep(1), ep(7000)).is_none());
    }

    #[test]
    fn the_log_records_the_first_connections_only() {
        let log = EndsLog::default();
        let kept = (0..MAX_CONNECTIONS + 5).filter(|_| log.claim()).count();
        assert_eq!(kept, MAX_CONNECTIONS);
    }
}
