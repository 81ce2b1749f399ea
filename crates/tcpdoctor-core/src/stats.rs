//! Statistics with bounded memory: a log-bucketed histogram of durations and a size counter.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::report::{Bucket, Distribution};

/// Values are scaled by this before bucketing: the finest resolution is 1/16 of the unit.
const SCALE: f64 = 16.0;
/// Sub-buckets per power of two: each bucket is 1/32 of an octave wide (±1.6%).
const SUB_BITS: u32 = 5;
const SUB: usize = 1 << SUB_BITS;
/// Scaled values below 2·SUB get a bucket each; above, log-linear buckets up to 2^63.
const BUCKETS: usize = 2 * SUB + (63 - SUB_BITS as usize) * SUB;

/// The sum's fixed point: each value is added as a whole number of 2^-20 of the unit, so that
/// the sum is exact, and the same whatever order values (or merged histograms) come in.
const SUM_ONE: f64 = (1u64 << 20) as f64;

/// A histogram of non-negative values with ±1.6% precision, exact count, min, max and sum.
/// Log-linear buckets (no logarithm is computed). Memory is allocated on the first value and
/// never grows after.
#[derive(Clone, Debug, Default)]
pub struct Histogram {
    counts: Vec<u32>,
    count: u64,
    min: f64,
    max: f64,
    /// In units of 2^-20 ([`SUM_ONE`]).
    sum: i128,
}

impl Histogram {
    pub fn record(&mut self, value: f64) {
        let value = if value.is_finite() {
            value.max(0.0)
        } else {
            0.0
        };
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS];
            self.min = value;
            self.max = value;
        }
        let i = bucket_of(value);
        self.counts[i] = self.counts[i].saturating_add(1);
        self.count += 1;
        self.min = self.min.min(value);
        self.max = self.max.max(value);
        // Non-negative here: adding a half and truncating rounds it (no library call), and a
        // value past 2^43 units (a duration past 100 days in µs) saturates.
        self.sum += i128::from((value * SUM_ONE + 0.5) as i64);
    }

    /// Records a duration in microseconds (so the ±2% holds from 1 µs to hours).
    #[inline]
    pub fn record_duration(&mut self, d: Duration) {
        // The same value as `d.as_nanos() as f64`, without a u128 → f64 conversion (a library
        // call) for any duration below 584 years.
        let ns = d
            .as_secs()
            .checked_mul(1_000_000_000)
            .and_then(|n| n.checked_add(u64::from(d.subsec_nanos())))
            .map_or_else(|| d.as_nanos() as f64, |n| n as f64);
        self.record(ns / 1e3);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The value at quantile `q` (0..=1), within the bucket precision, clamped to [min, max].
    pub fn quantile(&self, q: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        if q >= 1.0 {
            return self.max;
        }
        if q <= 0.0 {
            return self.min;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += u64::from(c);
            if seen >= rank {
                return bucket_mid(i).clamp(self.min, self.max);
            }
        }
        self.max
    }

    pub fn merge(&mut self, other: &Histogram) {
        if other.count == 0 {
            return;
        }
        if self.counts.is_empty() {
            *self = other.clone();
            return;
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a = a.saturating_add(*b);
        }
        self.count += other.count;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.sum += other.sum;
    }

    /// The summary, each value multiplied by `scale` (e.g. 1e-3 to turn µs into ms).
    pub fn distribution(&self, scale: f64) -> Distribution {
        let mean = if self.count > 0 {
            self.sum as f64 / SUM_ONE / self.count as f64
        } else {
            0.0
        };
        Distribution {
            count: self.count,
            min: round3(self.min * scale),
            p50: round3(self.quantile(0.5) * scale),
            p90: round3(self.quantile(0.9) * scale),
            p99: round3(self.quantile(0.99) * scale),
            max: round3(self.max * scale),
            mean: round3(mean * scale),
        }
    }

    /// Share of values at or above `threshold`, by bucket (exact at bucket boundaries ±2%).
    pub fn share_at_least(&self, threshold: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let from = bucket_of(threshold);
        let n: u64 = self.counts[from..].iter().map(|&c| u64::from(c)).sum();
        n as f64 / self.count as f64
    }
}

fn bucket_of(value: f64) -> usize {
    let x = (value * SCALE) as u64;
    if x < 2 * SUB as u64 {
        return x as usize;
    }
    let e = 63 - x.leading_zeros();
    let sub = (x >> (e - SUB_BITS)) as usize & (SUB - 1);
    (2 * SUB + (e - SUB_BITS - 1) as usize * SUB + sub).min(BUCKETS - 1)
}

fn bucket_mid(i: usize) -> f64 {
    if i < 2 * SUB {
        return (i as f64 + 0.5) / SCALE;
    }
    let k = i - 2 * SUB;
    let e = (k / SUB) as u32 + SUB_BITS + 1;
    let sub = (k % SUB) as u64;
    let width = 1u64 << (e - SUB_BITS);
    let lo = (SUB as u64 + sub) * width;
    (lo as f64 + width as f64 / 2.0) / SCALE
}

/// Rounds to three decimals, for stable, readable JSON.
pub fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// Counts exact values (payload sizes, segments per turn): the `uniq -c` view.
/// Keeps the [`SizeCounter::MAX_DISTINCT`] smallest distinct values; the rest are counted as
/// "other". Which values are kept depends only on what was recorded, never on the order (nor on
/// how counters were [`SizeCounter::merge`]d): a counter merged from several holds what one
/// fed every value holds.
#[derive(Clone, Debug, Default)]
pub struct SizeCounter {
    counts: BTreeMap<u32, u64>,
    other: u64,
    total: u64,
}

impl SizeCounter {
    pub const MAX_DISTINCT: usize = 4096;

    pub fn record(&mut self, value: u32) {
        self.total += 1;
        self.add(value, 1);
    }

    /// Adds `n` to `value`'s count, keeping the smallest values when there are too many.
    fn add(&mut self, value: u32, n: u64) {
        if let Some(c) = self.counts.get_mut(&value) {
            *c += n;
            return;
        }
        if self.counts.len() >= Self::MAX_DISTINCT {
            // A value larger than every kept one goes to "other"; a smaller one takes the
            // place of the largest kept. (A value once moved to "other" is larger than the
            // MAX_DISTINCT kept then, all smaller than it for good: it is never kept again.)
            match self.counts.last_key_value() {
                Some((&largest, _)) if largest > value => {
                    let moved = self.counts.remove(&largest).unwrap_or(0);
                    self.other += moved;
                }
                _ => {
                    self.other += n;
                    return;
                }
            }
        }
        self.counts.insert(value, n);
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn merge(&mut self, other: &SizeCounter) {
        for (&v, &c) in &other.counts {
            self.add(v, c);
        }
        self.other += other.other;
        self.total += other.total;
    }

    /// The most frequent values, most frequent first (ties: smaller value first).
    pub fn top(&self, n: usize) -> Vec<Bucket> {
        let mut v: Vec<(u32, u64)> = self.counts.iter().map(|(&k, &c)| (k, c)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let shown: u64 = v.iter().take(n).map(|x| x.1).sum();
        let mut out: Vec<Bucket> = v
            .into_iter()
            .take(n)
            .map(|(value, count)| Bucket {
                value: value.to_string(),
                count,
            })
            .collect();
        if self.total > shown {
            out.push(Bucket {
                value: "other".into(),
                count: self.total - shown,
            });
        }
        out
    }

    /// The value at quantile `q` over everything recorded in the exact map.
    pub fn quantile(&self, q: f64) -> u32 {
        let n: u64 = self.counts.values().sum();
        if n == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (&v, &c) in &self.counts {
            seen += c;
            if seen >= rank {
                return v;
            }
        }
        0
    }

    pub fn distribution(&self) -> Distribution {
        let n: u64 = self.counts.values().sum();
        let sum: f64 = self.counts.iter().map(|(&v, &c)| v as f64 * c as f64).sum();
        Distribution {
            count: n,
            min: self.counts.keys().next().copied().unwrap_or(0) as f64,
            p50: self.quantile(0.5) as f64,
            p90: self.quantile(0.9) as f64,
            p99: self.quantile(0.99) as f64,
            max: self.counts.keys().next_back().copied().unwrap_or(0) as f64,
            mean: if n > 0 { round3(sum / n as f64) } else { 0.0 },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_duration_converts_exactly_as_nanoseconds() {
        for d in [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_nanos(123_456_789_123),
            Duration::from_secs(u64::MAX / 1_000_000_000 + 1),
            Duration::MAX,
        ] {
            let mut a = Histogram::default();
            let mut b = Histogram::default();
            a.record_duration(d);
            b.record(d.as_nanos() as f64 / 1e3);
            assert_eq!(a.sum, b.sum, "{d:?}");
        }
    }

    #[test]
    fn quantiles_within_two_percent() {
        let mut h = Histogram::default();
        for v in 1..=1000 {
            h.record(v as f64 * 100.0);
        }
        let p50 = h.quantile(0.5);
        assert!((p50 - 50_000.0).abs() / 50_000.0 < 0.03, "{p50}");
        assert_eq!(h.quantile(1.0), 100_000.0);
        assert_eq!(h.quantile(0.0), 100.0);
        let share = h.share_at_least(90_000.0);
        assert!(
            (0.11..0.16).contains(&share),
            "{share} (one bucket is 4% wide)"
        );
    }

    #[test]
    fn buckets_round_trip_within_precision() {
        let mut v = 2.0;
        while v < 1e15 {
            let mid = bucket_mid(bucket_of(v));
            assert!((mid - v).abs() / v < 0.017, "{v} -> {mid}");
            v *= 1.013;
        }
        assert!(bucket_of(f64::MAX) < BUCKETS);
    }

    #[test]
    fn bimodal_stall_distribution() {
        let mut h = Histogram::default();
        for _ in 0..70 {
            h.record_duration(Duration::from_micros(300));
        }
        for _ in 0..30 {
            h.record_duration(Duration::from_micros(40_800));
        }
        let d = h.distribution(1e-3);
        assert!((d.p50 - 0.3).abs() < 0.01);
        assert!((d.p90 - 40.8).abs() < 1.0);
        assert!((h.share_at_least(30_000.0) - 0.30).abs() < 1e-9);
    }

    #[test]
    fn size_counter_is_uniq_c() {
        let mut s = SizeCounter::default();
        for v in [5, 5, 5, 80, 12, 5] {
            s.record(v);
        }
        let top = s.top(2);
        assert_eq!(top[0].value, "5");
        assert_eq!(top[0].count, 4);
        assert_eq!(top[1].value, "12");
        assert_eq!(top[2].value, "other");
        assert_eq!(top[2].count, 1);
        assert_eq!(s.quantile(0.5), 5);
        let mut t = SizeCounter::default();
        t.merge(&s);
        assert_eq!(t.total(), 6);
    }

    /// Past its cap a counter keeps the smallest values, whatever order they came in and
    /// however the values were split among counters merged after.
    #[test]
    fn size_counter_past_its_cap_keeps_the_smallest_values_in_any_order() {
        let max = SizeCounter::MAX_DISTINCT as u32;
        // Every value from 0 to 2 × the cap, each `v % 3 + 1` times, large ones first.
        let values: Vec<u32> = (0..2 * max)
            .rev()
            .flat_map(|v| std::iter::repeat_n(v, (v % 3 + 1) as usize))
            .collect();
        let summary = |c: &SizeCounter| (c.top(usize::MAX), c.distribution(), c.total());
        let mut one = SizeCounter::default();
        values.iter().for_each(|&v| one.record(v));
        // Kept: exactly 0..max, with their own counts; the rest is "other".
        assert_eq!(one.counts.len(), SizeCounter::MAX_DISTINCT);
        assert_eq!(one.counts.keys().next_back(), Some(&(max - 1)));
        assert_eq!(one.counts[&(max - 1)], u64::from((max - 1) % 3 + 1));
        let kept: u64 = one.counts.values().sum();
        assert_eq!(one.other, values.len() as u64 - kept);
        // Small values first, and split three ways then merged: the same counter.
        let mut sorted = SizeCounter::default();
        values.iter().rev().for_each(|&v| sorted.record(v));
        assert_eq!(summary(&sorted), summary(&one));
        let mut parts = [0, 1, 2].map(|_| SizeCounter::default());
        for (i, &v) in values.iter().enumerate() {
            parts[(v as usize * 7 + i) % 3].record(v);
        }
        let mut merged = SizeCounter::default();
        for p in parts.iter().rev() {
            merged.merge(p);
        }
        assert_eq!(summary(&merged), summary(&one));
    }
}
