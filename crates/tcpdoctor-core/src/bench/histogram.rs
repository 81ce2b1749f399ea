//! Latency histograms for `bench`: HDR (three significant digits), nanoseconds, 1 ns to 1 h.
//!
//! The driver records every exchange, so the histogram must be cheap to record into and to merge,
//! and precise enough that a 25 µs loopback exchange and a 40 ms stall are both read to within
//! 0.1 %. Values above one hour are clamped to one hour (and still counted).

use std::time::Duration;

use hdrhistogram::Histogram;

const HIGHEST_NS: u64 = 3_600 * 1_000_000_000;

/// A histogram of exchange latencies in nanoseconds.
#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    h: Histogram<u64>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            h: Histogram::new_with_bounds(1, HIGHEST_NS, 3).expect("constant bounds are valid"),
        }
    }
}

impl LatencyHistogram {
    pub fn record(&mut self, latency: Duration) {
        self.record_ns(latency.as_nanos().min(u128::from(HIGHEST_NS)) as u64);
    }

    pub fn record_ns(&mut self, ns: u64) {
        self.h.saturating_record(ns.clamp(1, HIGHEST_NS));
    }

    pub fn merge(&mut self, other: &LatencyHistogram) {
        // Same bounds on both sides: adding cannot fail.
        let _ = self.h.add(&other.h);
    }

    pub fn count(&self) -> u64 {
        self.h.len()
    }

    pub fn is_empty(&self) -> bool {
        self.h.is_empty()
    }

    /// The latency at quantile `q` (0..=1), in nanoseconds.
    pub fn quantile_ns(&self, q: f64) -> u64 {
        if self.h.is_empty() {
            return 0;
        }
        self.h.value_at_quantile(q.clamp(0.0, 1.0))
    }

    pub fn min_ns(&self) -> u64 {
        if self.h.is_empty() {
            0
        } else {
            self.h.min()
        }
    }

    pub fn max_ns(&self) -> u64 {
        self.h.max()
    }

    pub fn mean_ns(&self) -> f64 {
        self.h.mean()
    }

    pub fn stdev_ns(&self) -> f64 {
        self.h.stdev()
    }

    /// Exchanges whose latency lies in `[from, to)` (within the histogram's precision).
    pub fn count_in(&self, from: Duration, to: Duration) -> u64 {
        let lo = from.as_nanos().min(u128::from(HIGHEST_NS)) as u64;
        let hi = to.as_nanos().min(u128::from(HIGHEST_NS)) as u64;
        if self.h.is_empty() || hi <= lo {
            return 0;
        }
        let below_hi = self.count_below(hi);
        let below_lo = self.count_below(lo);
        below_hi.saturating_sub(below_lo)
    }

    /// Exchanges strictly below `ns` (by bucket: values in `ns`'s own bucket are not counted).
    fn count_below(&self, ns: u64) -> u64 {
        if ns <= 1 {
            return 0;
        }
        let top = self.h.lowest_equivalent(ns);
        if top == 0 {
            return 0;
        }
        self.h.count_between(0, top - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_significant_digits_from_microseconds_to_a_minute() {
        let mut h = LatencyHistogram::default();
        for v in [25_123u64, 40_812_345, 59_999_000_000] {
            h.record_ns(v);
        }
        assert!((h.quantile_ns(0.0) as f64 - 25_123.0).abs() / 25_123.0 < 1e-3);
        let mid = h.quantile_ns(0.5) as f64;
        assert!((mid - 40_812_345.0).abs() / 40_812_345.0 < 1e-3, "{mid}");
        let top = h.max_ns() as f64;
        assert!((top - 59_999e6).abs() / 59_999e6 < 1e-3, "{top}");
        h.record(Duration::from_secs(7200));
        assert_eq!(h.count(), 4, "values past an hour are clamped, not dropped");
    }

    #[test]
    fn counts_a_band_and_merges() {
        let mut a = LatencyHistogram::default();
        for _ in 0..70 {
            a.record(Duration::from_micros(300));
        }
        let mut b = LatencyHistogram::default();
        for _ in 0..30 {
            b.record(Duration::from_micros(40_800));
        }
        a.merge(&b);
        assert_eq!(a.count(), 100);
        let band = a.count_in(Duration::from_millis(35), Duration::from_millis(60));
        assert_eq!(band, 30);
        assert_eq!(
            a.count_in(Duration::from_millis(180), Duration::from_millis(260)),
            0
        );
        assert_eq!(a.count_in(Duration::ZERO, Duration::from_millis(1)), 70);
        assert_eq!(
            LatencyHistogram::default().count_in(Duration::ZERO, Duration::MAX),
            0
        );
    }
}
