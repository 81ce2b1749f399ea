//! What crossed the proxy: bytes and chunks per connection and direction, and the chunk-size
//! distribution — the view that shows "many 3- to 8-byte chunks before the fix, one 80+ byte
//! chunk per response after".
//!
//! Counters are atomics updated by the connection tasks; the summary is a snapshot. Closed
//! connections are folded into the totals; the last [`KEEP_CLOSED`] are kept for detail, so
//! memory stays bounded however long the proxy runs.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// Closed connections kept for the per-connection part of the summary.
pub const KEEP_CLOSED: usize = 1000;
/// Connections listed one per line in a printed summary.
const LISTED: usize = 20;
/// Power-of-two size buckets: bucket `i` holds chunks of `2^i ..= 2^(i+1) - 1` bytes.
pub const BUCKETS: usize = 32;

pub const C2S: usize = 0;
pub const S2C: usize = 1;
pub const DIR_NAMES: [&str; 2] = ["c2s", "s2c"];

/// Counters of one direction.
#[derive(Default)]
pub struct DirStats {
    pub bytes: AtomicU64,
    pub chunks: AtomicU64,
    pub sizes: [AtomicU64; BUCKETS],
    /// Timed writes (a delayed or paced chunk) by how late they left, in power-of-two µs
    /// buckets: the proxy's own check that it held the delay it was given.
    pub late: [AtomicU64; BUCKETS],
}

impl DirStats {
    pub fn add_chunk(&self, len: usize) {
        self.bytes.fetch_add(len as u64, Relaxed);
        self.chunks.fetch_add(1, Relaxed);
        self.sizes[bucket(len)].fetch_add(1, Relaxed);
    }

    /// A delayed or paced write that left `late` after its due time.
    pub fn add_late(&self, late: std::time::Duration) {
        let us = usize::try_from(late.as_micros()).unwrap_or(usize::MAX);
        self.late[bucket(us)].fetch_add(1, Relaxed);
    }

    fn snapshot(&self) -> DirSnapshot {
        DirSnapshot {
            bytes: self.bytes.load(Relaxed),
            chunks: self.chunks.load(Relaxed),
            sizes: std::array::from_fn(|i| self.sizes[i].load(Relaxed)),
            late: std::array::from_fn(|i| self.late[i].load(Relaxed)),
        }
    }
}

fn bucket(len: usize) -> usize {
    (usize::BITS - 1 - len.max(1).leading_zeros()).min(BUCKETS as u32 - 1) as usize
}

/// One connection's counters.
pub struct ConnStats {
    pub id: u64,
    pub peer: Option<SocketAddr>,
    pub dirs: [DirStats; 2],
    open: AtomicBool,
    /// How it ended ("closed", "reset by client", "upstream refused", …).
    end: Mutex<Option<String>>,
}

impl ConnStats {
    pub fn set_end(&self, why: impl Into<String>) {
        if let Ok(mut e) = self.end.lock() {
            if e.is_none() {
                *e = Some(why.into());
            }
        }
    }
}

/// All connections, open and recently closed.
#[derive(Default)]
pub struct Registry {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    open: BTreeMap<u64, Arc<ConnStats>>,
    closed: VecDeque<ConnSnapshot>,
    closed_total: [DirSnapshot; 2],
    closed_count: u64,
}

impl Registry {
    pub fn open(&self, id: u64, peer: Option<SocketAddr>) -> Arc<ConnStats> {
        let c = Arc::new(ConnStats {
            id,
            peer,
            dirs: Default::default(),
            open: AtomicBool::new(true),
            end: Mutex::new(None),
        });
        if let Ok(mut g) = self.inner.lock() {
            g.open.insert(id, Arc::clone(&c));
        }
        c
    }

    pub fn close(&self, c: &ConnStats) {
        c.open.store(false, Relaxed);
        let snap = snapshot(c);
        if let Ok(mut g) = self.inner.lock() {
            g.open.remove(&c.id);
            for d in 0..2 {
                g.closed_total[d].add(&snap.dirs[d]);
            }
            g.closed_count += 1;
            g.closed.push_back(snap);
            if g.closed.len() > KEEP_CLOSED {
                g.closed.pop_front();
            }
        }
    }

    pub fn summary(&self) -> Summary {
        let Ok(g) = self.inner.lock() else {
            return Summary::default();
        };
        let mut conns: Vec<ConnSnapshot> = g.closed.iter().cloned().collect();
        let mut total = g.closed_total.clone();
        for c in g.open.values() {
            let s = snapshot(c);
            for (t, d) in total.iter_mut().zip(&s.dirs) {
                t.add(d);
            }
            conns.push(s);
        }
        conns.sort_by_key(|c| c.id);
        Summary {
            connections: g.closed_count + g.open.len() as u64,
            open: g.open.len() as u64,
            total,
            conns,
        }
    }
}

fn snapshot(c: &ConnStats) -> ConnSnapshot {
    ConnSnapshot {
        id: c.id,
        peer: c.peer,
        open: c.open.load(Relaxed),
        end: c.end.lock().ok().and_then(|e| e.clone()),
        dirs: [c.dirs[0].snapshot(), c.dirs[1].snapshot()],
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DirSnapshot {
    pub bytes: u64,
    pub chunks: u64,
    pub sizes: [u64; BUCKETS],
    pub late: [u64; BUCKETS],
}

impl DirSnapshot {
    fn add(&mut self, o: &DirSnapshot) {
        self.bytes += o.bytes;
        self.chunks += o.chunks;
        for i in 0..BUCKETS {
            self.sizes[i] += o.sizes[i];
            self.late[i] += o.late[i];
        }
    }

    /// The bound (µs) under which a share `q` of the timed writes left: the upper edge of the
    /// bucket that reaches it. None without timed writes.
    pub fn late_at_most_us(&self, q: f64) -> Option<u64> {
        let total: u64 = self.late.iter().sum();
        if total == 0 {
            return None;
        }
        let want = ((total as f64 * q).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &n) in self.late.iter().enumerate() {
            seen += n;
            if seen >= want {
                return Some((1u64 << (i + 1)) - 1);
            }
        }
        None
    }
}

#[derive(Clone, Debug)]
pub struct ConnSnapshot {
    pub id: u64,
    pub peer: Option<SocketAddr>,
    pub open: bool,
    pub end: Option<String>,
    pub dirs: [DirSnapshot; 2],
}

/// A snapshot of everything, ready to print.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub connections: u64,
    pub open: u64,
    pub total: [DirSnapshot; 2],
    /// Open connections and the last closed ones, by id.
    pub conns: Vec<ConnSnapshot>,
}

impl Summary {
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "tcpdoctor proxy summary: {} connections ({} open)",
            self.connections, self.open
        );
        for (name, t) in DIR_NAMES.iter().zip(&self.total) {
            let _ = writeln!(
                s,
                "  {}: {} bytes in {} chunks{}",
                name,
                t.bytes,
                t.chunks,
                if t.chunks > 0 {
                    format!(", mean {:.1} bytes/chunk", t.bytes as f64 / t.chunks as f64)
                } else {
                    String::new()
                }
            );
            render_sizes(&mut s, &t.sizes);
            render_late(&mut s, t);
        }
        let shown = self.conns.len().min(LISTED);
        for c in &self.conns[self.conns.len() - shown..] {
            let _ = writeln!(
                s,
                "  conn {}{}: c2s {} B / {} chunks, s2c {} B / {} chunks, {}",
                c.id,
                c.peer.map_or(String::new(), |p| format!(" from {p}")),
                c.dirs[0].bytes,
                c.dirs[0].chunks,
                c.dirs[1].bytes,
                c.dirs[1].chunks,
                if c.open {
                    "open".to_string()
                } else {
                    c.end.clone().unwrap_or_else(|| "closed".into())
                }
            );
        }
        if self.connections > shown as u64 {
            let _ = writeln!(
                s,
                "  ({} earlier connections not listed)",
                self.connections - shown as u64
            );
        }
        s
    }
}

/// `delay held: 1000 timed writes left late by ≤ 3 µs (p50), ≤ 63 µs (p99), ≤ 255 µs (max)`.
fn render_late(s: &mut String, t: &DirSnapshot) {
    let total: u64 = t.late.iter().sum();
    let (Some(p50), Some(p99), Some(max)) = (
        t.late_at_most_us(0.5),
        t.late_at_most_us(0.99),
        t.late_at_most_us(1.0),
    ) else {
        return;
    };
    let _ = writeln!(
        s,
        "    delay held: {total} timed writes left late by ≤ {p50} µs (p50), ≤ {p99} µs (p99), ≤ {max} µs (max)"
    );
}

/// One line per non-empty bucket: `      4-7 B   1220 ████████`.
fn render_sizes(s: &mut String, sizes: &[u64; BUCKETS]) {
    let max = sizes.iter().copied().max().unwrap_or(0);
    if max == 0 {
        return;
    }
    for (i, &n) in sizes.iter().enumerate() {
        if n == 0 {
            continue;
        }
        let lo = 1u64 << i;
        let hi = (1u64 << (i + 1)) - 1;
        let range = if lo == hi {
            format!("{lo}")
        } else {
            format!("{lo}-{hi}")
        };
        let bar = "█".repeat(((n as f64 / max as f64) * 30.0).ceil() as usize);
        let _ = writeln!(s, "    {range:>13} B {n:>9} {bar}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1), 0);
        assert_eq!(bucket(3), 1);
        assert_eq!(bucket(8), 3);
        assert_eq!(bucket(80), 6);
        assert_eq!(bucket(usize::MAX), BUCKETS - 1);
    }

    #[test]
    fn totals_survive_closing() {
        let r = Registry::default();
        let a = r.open(1, None);
        a.dirs[S2C].add_chunk(5);
        a.dirs[S2C].add_chunk(6);
        let b = r.open(2, None);
        b.dirs[S2C].add_chunk(90);
        r.close(&a);
        let s = r.summary();
        assert_eq!(s.connections, 2);
        assert_eq!(s.open, 1);
        assert_eq!(s.total[S2C].bytes, 101);
        assert_eq!(s.total[S2C].sizes[2], 2);
        assert_eq!(s.total[S2C].sizes[6], 1);
        let text = s.render();
        assert!(text.contains("4-7 B"), "{text}");
        assert!(text.contains("64-127 B"), "{text}");
        assert!(!text.contains("delay held"), "no timed writes: {text}");
    }

    #[test]
    fn lateness_is_summed_over_connections_and_bounded_by_bucket_edges() {
        use std::time::Duration;
        let r = Registry::default();
        let a = r.open(1, None);
        for us in [0u64, 1, 2, 3, 5, 6, 7, 9] {
            a.dirs[C2S].add_late(Duration::from_micros(us));
        }
        r.close(&a);
        let b = r.open(2, None);
        b.dirs[C2S].add_late(Duration::from_millis(3));
        let s = r.summary();
        let t = &s.total[C2S];
        assert_eq!(t.late.iter().sum::<u64>(), 9);
        // 0 and 1 µs in bucket 0 (≤ 1), 2-3 in bucket 1 (≤ 3), 5-7 in bucket 2 (≤ 7), 9 in
        // bucket 3 (≤ 15), 3000 in bucket 11 (≤ 4095).
        assert_eq!(t.late_at_most_us(0.2), Some(1));
        assert_eq!(t.late_at_most_us(0.5), Some(7));
        assert_eq!(t.late_at_most_us(0.99), Some(4095));
        assert_eq!(s.total[S2C].late_at_most_us(0.5), None);
        let text = s.render();
        assert!(
            text.contains("delay held: 9 timed writes left late by ≤ 7 µs (p50), ≤ 4095 µs (p99), ≤ 4095 µs (max)"),
            "{text}"
        );
    }
}
