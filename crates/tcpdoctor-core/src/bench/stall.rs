//! The stall view: do exchange latencies cluster near the TCP timers that cause stalls?
//!
//! A load generator cannot see packets, but it sees their shadow: when a message waits for a
//! delayed ACK, its exchange costs one ACK timer, so latencies pile up near that timer, far from
//! the median of the healthy ones. The rule:
//!
//! 1. Two bands, taken from the latency histogram: 35–60 ms (Linux's 40 ms delayed-ACK timer,
//!    plus scheduling and a round trip) and 180–260 ms (200 ms: Windows' delayed ACK, a grown
//!    Linux `ato`, and the retransmission-timeout floor).
//! 2. A band is *hit* when it holds at least 1 % of the exchanges and at least 3 of them.
//! 3. A hit band names `nagle_delayed_ack` as the likely cause (the 200 ms band also names
//!    `retransmission_stall`), says whether the stall is the rule (the median lies in the band)
//!    or a second mode (the median is far below it), and points at `tcpdoctor analyze` on a
//!    capture, which confirms or rules it out from the packets.
//! 4. No hit band: the view says so; latency alone then names no timer.

use std::time::Duration;

use serde::Serialize;

use super::histogram::LatencyHistogram;
use crate::stats::round3;

const MIN_SHARE: f64 = 0.01;
const MIN_COUNT: u64 = 3;

struct Timer {
    name: &'static str,
    from_ms: u64,
    to_ms: u64,
    cause: &'static str,
    explains: &'static str,
}

const TIMERS: [Timer; 2] = [
    Timer {
        name: "40 ms",
        from_ms: 35,
        to_ms: 60,
        cause: "nagle_delayed_ack",
        explains: "Linux's 40 ms delayed-ACK timer: a message written in pieces, its tail held by \
                   Nagle until the peer's delayed ACK",
    },
    Timer {
        name: "200 ms",
        from_ms: 180,
        to_ms: 260,
        cause: "nagle_delayed_ack",
        explains: "a 200 ms timer: a delayed ACK grown to 200 ms (or a Windows peer) holding a \
                   message written in pieces, or the 200 ms retransmission-timeout floor \
                   (retransmission_stall)",
    },
];

/// Exchanges whose latency falls in one timer's band.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StallBand {
    /// The timer this band surrounds ("40 ms", "200 ms").
    pub timer: String,
    pub from_ms: f64,
    pub to_ms: f64,
    pub count: u64,
    /// Of all measured exchanges, 0..=1.
    pub share: f64,
    pub hit: bool,
}

/// The stall view of one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StallView {
    pub median_ms: f64,
    pub bands: Vec<StallBand>,
    /// The finding kind `tcpdoctor analyze` would most likely report, when a band is hit.
    pub likely_cause: Option<String>,
    /// One sentence a person reads.
    pub verdict: String,
    /// What to do to confirm it, when a band is hit.
    pub next_step: Option<String>,
}

impl StallView {
    /// The view of `h`; `port` is the target's TCP port (None for a Unix socket), for the
    /// capture command in the next step.
    pub fn of(h: &LatencyHistogram, port: Option<u16>) -> StallView {
        let total = h.count();
        let median_ms = (h.quantile_ns(0.5) as f64 / 1e3).round() / 1e3;
        let bands: Vec<StallBand> = TIMERS
            .iter()
            .map(|t| {
                let count = h.count_in(
                    Duration::from_millis(t.from_ms),
                    Duration::from_millis(t.to_ms),
                );
                let share = if total == 0 {
                    0.0
                } else {
                    count as f64 / total as f64
                };
                StallBand {
                    timer: t.name.to_string(),
                    from_ms: t.from_ms as f64,
                    to_ms: t.to_ms as f64,
                    count,
                    share: round3(share * 1000.0) / 1000.0,
                    hit: count >= MIN_COUNT && share >= MIN_SHARE,
                }
            })
            .collect();
        let hit = bands
            .iter()
            .zip(&TIMERS)
            .filter(|(b, _)| b.hit)
            .max_by_key(|(b, _)| b.count);
        let Some((band, timer)) = hit else {
            return StallView {
                median_ms,
                verdict: format!(
                    "No cluster near the 40 ms or 200 ms timers (median {}): latency alone \
                     names no TCP timer.",
                    fmt_ms(median_ms)
                ),
                bands,
                likely_cause: None,
                next_step: None,
            };
        };
        let pct = fmt_pct(band.count, total);
        let shape = if median_ms >= band.from_ms && median_ms < band.to_ms {
            format!(
                "{} ({pct}) took {}–{} ms: the median ({}) sits on the timer",
                crate::numfmt::count(band.count, "exchange"),
                band.from_ms,
                band.to_ms,
                fmt_ms(median_ms)
            )
        } else {
            format!(
                "{} ({pct}) took {}–{} ms while the median is {}: a second mode \
                 pinned at the timer",
                crate::numfmt::count(band.count, "exchange"),
                band.from_ms,
                band.to_ms,
                fmt_ms(median_ms)
            )
        };
        StallView {
            median_ms,
            verdict: format!(
                "Stall near the {} timer — {shape}. Likely cause: {} ({}).",
                band.timer, timer.cause, timer.explains
            ),
            next_step: Some(next_step(port)),
            likely_cause: Some(timer.cause.to_string()),
            bands,
        }
    }
}

fn next_step(port: Option<u16>) -> String {
    let capture = match port {
        Some(p) => format!(
            "`tcpdoctor capture --port {p} -w stall.pcap` while this runs (needs CAP_NET_RAW; \
             `tcpdoctor sandbox` does not), or put `tcpdoctor proxy --pcap stall.pcap` in front \
             of the server"
        ),
        None => "put `tcpdoctor proxy --pcap stall.pcap` in front of the Unix socket".to_string(),
    };
    format!(
        "Capture it and run `tcpdoctor analyze stall.pcap` ({capture}) to confirm which side \
         writes in pieces; the fix is to write each message once, then TCP_NODELAY."
    )
}

pub(crate) fn fmt_ms(ms: f64) -> String {
    if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else if ms >= 1.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.3} ms")
    }
}

fn fmt_pct(n: u64, total: u64) -> String {
    if total == 0 {
        return "0%".into();
    }
    let p = n as f64 * 100.0 / total as f64;
    if p >= 10.0 {
        format!("{p:.0}%")
    } else {
        format!("{p:.1}%")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(values_us: &[(u64, usize)]) -> LatencyHistogram {
        let mut h = LatencyHistogram::default();
        for &(us, n) in values_us {
            for _ in 0..n {
                h.record(Duration::from_micros(us));
            }
        }
        h
    }

    #[test]
    fn every_exchange_on_the_40ms_timer() {
        let v = StallView::of(&hist(&[(41_500, 97), (300, 3)]), Some(6379));
        assert_eq!(v.likely_cause.as_deref(), Some("nagle_delayed_ack"));
        assert!(v.bands[0].hit && !v.bands[1].hit);
        assert!(v.verdict.contains("median"), "{}", v.verdict);
        assert!(v.verdict.contains("sits on the timer"), "{}", v.verdict);
        assert!(v
            .next_step
            .as_deref()
            .unwrap_or("")
            .contains("tcpdoctor analyze"));
    }

    #[test]
    fn a_second_mode_at_200ms() {
        let v = StallView::of(&hist(&[(250, 900), (205_000, 100)]), None);
        assert!(v.bands[1].hit);
        assert_eq!(v.bands[1].count, 100);
        assert!((v.bands[1].share - 0.1).abs() < 1e-9);
        assert!(v.verdict.contains("second mode"), "{}", v.verdict);
        assert!(v.verdict.contains("retransmission_stall"));
    }

    #[test]
    fn healthy_or_rare_outliers_name_nothing() {
        for h in [
            hist(&[(250, 1000)]),
            hist(&[(250, 1000), (40_000, 2)]),
            hist(&[(250, 10_000), (40_000, 50)]),
            LatencyHistogram::default(),
        ] {
            let v = StallView::of(&h, None);
            assert_eq!(v.likely_cause, None, "{v:?}");
            assert!(v.verdict.starts_with("No cluster"));
        }
    }
}
