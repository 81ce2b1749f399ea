//! The charts drawn as inline SVG: latency histograms on one shared log axis, and chunk-size
//! bars. Nothing is fetched and nothing runs: the numbers are laid out, not computed.
//!
//! Each histogram is drawn twice, for a wide page ([`WIDE`], 960 units) and for a phone
//! ([`NARROW`], 360): the stylesheet shows one of them. Scaled to a phone, the wide one's
//! labels would be unreadable, and kept at its size it scrolls, hiding the bars that matter
//! (the 40 ms ones sit at its right); the narrow one fits a 390-px screen with every bar and
//! every label at 10 px or more.

use super::escape::{esc, tick_ms};
use crate::report::Bucket;
use crate::run::{ChunkView, LogBucket, ScenarioResult};

/// Where a histogram's parts go, in viewBox units.
struct Frame {
    class: &'static str,
    width: f64,
    left: f64,
    right: f64,
    top: f64,
    base: f64,
    height: f64,
    /// The "30 ms" label's baseline: in the tick row when decades are far apart, else above
    /// the plot (beside "10 ms" it would overlap it).
    stall_label_y: f64,
}

const WIDE: Frame = Frame {
    class: "chart wide",
    width: 960.0,
    left: 56.0,
    right: 940.0,
    top: 22.0,
    base: 124.0,
    height: 160.0,
    stall_label_y: 140.0,
};

const NARROW: Frame = Frame {
    class: "chart narrow",
    width: 360.0,
    left: 34.0,
    right: 346.0,
    top: 30.0,
    base: 132.0,
    height: 168.0,
    stall_label_y: 12.0,
};

/// The least room a decade's tick label gets, in viewBox units ("100 µs" at 11 px is ~36).
const TICK_ROOM: f64 = 44.0;

/// The x range every histogram shares: whole decades, at least 10 µs … 1 s.
fn domain(scenarios: &[ScenarioResult]) -> (f64, f64) {
    let bars = scenarios.iter().flat_map(|s| s.latency_histogram.iter());
    let (mut lo, mut hi) = (0.01f64, 1000.0f64);
    for b in bars.filter(|b| b.count > 0) {
        lo = lo.min(b.ge_ms.max(0.001));
        hi = hi.max(b.le_ms);
    }
    let lo = 10f64.powf((lo.log10() + 1e-9).floor());
    let hi = 10f64.powf((hi.log10() - 1e-9).ceil());
    (lo, hi)
}

struct LogAxis {
    lo: f64,
    hi: f64,
}

impl LogAxis {
    /// Where `ms` sits between `left` and `right`.
    fn x_in(&self, ms: f64, left: f64, right: f64) -> f64 {
        let f = (ms.max(self.lo).log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10());
        left + f.clamp(0.0, 1.0) * (right - left)
    }

    #[cfg(test)]
    fn x(&self, ms: f64) -> f64 {
        self.x_in(ms, WIDE.left, WIDE.right)
    }

    fn decades(&self) -> Vec<f64> {
        let mut v = Vec::new();
        let mut d = self.lo;
        while d <= self.hi * 1.0001 {
            v.push(d);
            d *= 10.0;
        }
        v
    }
}

/// One histogram per scenario, all on the same x axis, so 0.1 ms and 40 ms sit where they are.
pub fn latency_histograms(scenarios: &[ScenarioResult]) -> String {
    let (lo, hi) = domain(scenarios);
    let axis = LogAxis { lo, hi };
    let mut out = String::new();
    for s in scenarios {
        out.push_str(&format!(
            "<figure class=\"hist\"><figcaption><b>{}</b> <span class=\"muted\">{} · \
             p50 {} · p99 {} · {} at ≥ 30 ms</span></figcaption>\n",
            esc(&s.name),
            crate::numfmt::count(s.figures.exchanges, "exchange"),
            super::escape::dur_ms(s.figures.p50_ms),
            super::escape::dur_ms(s.figures.p99_ms),
            s.figures.stalls_30ms,
        ));
        for frame in [&WIDE, &NARROW] {
            out.push_str(&histogram_svg(&s.name, &s.latency_histogram, &axis, frame));
        }
        out.push_str("</figure>\n");
    }
    out
}

fn histogram_svg(name: &str, bars: &[LogBucket], axis: &LogAxis, f: &Frame) -> String {
    let Frame {
        width,
        left,
        right,
        top,
        base,
        height,
        ..
    } = *f;
    let x = |ms: f64| axis.x_in(ms, left, right);
    let max = bars.iter().map(|b| b.count).max().unwrap_or(0);
    let mut svg = format!(
        "<svg class=\"{}\" viewBox=\"0 0 {width} {height}\" role=\"img\" \
         aria-label=\"latency histogram of {}\">\n",
        f.class,
        esc(name)
    );
    // Decade grid, and labels as far apart as they need.
    let decades = axis.decades();
    let room = (right - left) / (decades.len().max(2) - 1) as f64;
    let every = (TICK_ROOM / room).ceil().max(1.0) as usize;
    for (i, d) in decades.into_iter().enumerate() {
        let x = x(d);
        svg.push_str(&format!(
            "<line class=\"grid\" x1=\"{x:.1}\" y1=\"{top}\" x2=\"{x:.1}\" y2=\"{base}\"/>"
        ));
        if i % every == 0 {
            svg.push_str(&format!(
                "<text class=\"tick\" x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                base + 16.0,
                tick_ms(d)
            ));
        }
        svg.push('\n');
    }
    for b in bars.iter().filter(|b| b.count > 0) {
        let lower = b.ge_ms;
        let (x1, x2) = (x(lower), x(b.le_ms));
        let h = ((b.count as f64 / max.max(1) as f64) * (base - top)).max(1.5);
        let class = if lower >= 20.0 { "bar slow" } else { "bar" };
        svg.push_str(&format!(
            "<rect class=\"{class}\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\">\
             <title>{} – {}: {}</title></rect>\
             <text class=\"count\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n",
            x1 + 1.0,
            base - h,
            (x2 - x1 - 2.0).max(1.0),
            tick_label(lower),
            tick_label(b.le_ms),
            b.count,
            (x1 + x2) / 2.0,
            base - h - 3.0,
            b.count
        ));
    }
    // The stall threshold, over the bars, labelled where nothing collides.
    let sx = x(crate::run::STALL_MS as f64);
    svg.push_str(&format!(
        "<line class=\"stall-line\" x1=\"{sx:.1}\" y1=\"{top}\" x2=\"{sx:.1}\" y2=\"{base}\"/>\
         <text class=\"stall-label\" x=\"{sx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">30 ms</text>\n",
        f.stall_label_y
    ));
    svg.push_str(&format!(
        "<line class=\"axis\" x1=\"{left}\" y1=\"{base}\" x2=\"{right}\" y2=\"{base}\"/>\
         <text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{max}</text>\
         <text class=\"tick\" x=\"{:.1}\" y=\"{base}\" text-anchor=\"end\">0</text>\n</svg>\n",
        left - 6.0,
        top + 4.0,
        left - 6.0
    ));
    svg
}

/// A bucket bound as a reader says it (0.2 ms → 200 µs).
fn tick_label(ms: f64) -> String {
    super::escape::dur_ms(ms)
}

/// How many sizes a chunk chart lists before it sums up the rest.
const CHUNK_ROWS: usize = 12;

/// Server→client chunk sizes as horizontal bars, most frequent first.
pub fn chunk_bars(name: &str, chunks: &ChunkView) -> String {
    let shown: Vec<&Bucket> = chunks.s2c_sizes.iter().take(CHUNK_ROWS).collect();
    let rest: u64 = chunks
        .s2c_sizes
        .iter()
        .skip(CHUNK_ROWS)
        .map(|b| b.count)
        .sum();
    let rest_sizes = chunks.s2c_sizes.len().saturating_sub(CHUNK_ROWS);
    let max = shown.iter().map(|b| b.count).max().unwrap_or(0).max(1);
    // 360 units wide: a phone's width at 1:1, so its labels stay at 11 px there.
    let (w, row, label_w, bar_w) = (360.0, 20.0, 86.0, 220.0);
    let h = row * shown.len().max(1) as f64 + 8.0;
    let mut svg = format!(
        "<svg class=\"chart\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"server to client \
         chunk sizes of {}\">\n",
        esc(name)
    );
    if shown.is_empty() {
        svg.push_str("<text class=\"tick\" x=\"0\" y=\"16\">no server→client chunks</text>\n");
    }
    for (i, b) in shown.iter().enumerate() {
        let y = 4.0 + i as f64 * row;
        let bw = (b.count as f64 / max as f64 * bar_w).max(1.5);
        let size = if b.value.parse::<u64>().is_ok() {
            format!("{} B", esc(&b.value))
        } else {
            esc(&b.value)
        };
        svg.push_str(&format!(
            "<text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{size}</text>\
             <rect class=\"bar\" x=\"{label_w}\" y=\"{y:.1}\" width=\"{bw:.1}\" height=\"{:.1}\"/>\
             <text class=\"count\" x=\"{:.1}\" y=\"{:.1}\">{}</text>\n",
            label_w - 8.0,
            y + row * 0.68,
            row - 6.0,
            label_w + bw + 5.0,
            y + row * 0.68,
            b.count
        ));
    }
    svg.push_str("</svg>\n");
    if rest > 0 {
        svg.push_str(&format!(
            "<p class=\"muted small\">and {rest} chunks of {rest_sizes} other sizes</p>\n"
        ));
    }
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_axis_spans_at_least_10us_to_1s() {
        let axis = LogAxis {
            lo: 0.01,
            hi: 1000.0,
        };
        let ticks: Vec<String> = axis.decades().into_iter().map(tick_ms).collect();
        assert_eq!(ticks, ["10 µs", "100 µs", "1 ms", "10 ms", "100 ms", "1 s"]);
        assert!((axis.x(0.01) - WIDE.left).abs() < 1e-9);
        assert!((axis.x(1000.0) - WIDE.right).abs() < 1e-9);
    }
}
