//! One stalled exchange drawn as two lanes, client above and server below: each packet of the
//! finding's timeline is an arrow from its sender's lane to its receiver's, placed at the time
//! the capture saw it. The longest silence between two packets is shaded and labelled with the
//! note of the packet that ended it (for `nagle_delayed_ack`: the delayed ACK and how long the
//! receiver held it).
//!
//! Packets microseconds apart would sit on top of each other on a linear axis 40 ms wide, so
//! each arrow keeps at least [`SEP`] pixels from the one before; a dotted leader joins it to
//! its true time on the axis.
//!
//! When the program was traced, a row above the lanes shows its write() calls over the
//! frames that carried their bytes (the finding's [`WriteMark`]s): a frame that carried
//! several calls gets one mark naming them all.

use super::escape::{dur_ms, esc, num};
use crate::flow::Direction;
use crate::report::{TimelineEntry, WriteMark};

const WIDTH: f64 = 960.0;
const LEFT: f64 = 96.0;
const RIGHT: f64 = 900.0;
const CLIENT_Y: f64 = 78.0;
const SERVER_Y: f64 = 198.0;
const AXIS_Y: f64 = 246.0;
const HEIGHT: f64 = 280.0;
const SEP: f64 = 58.0;
/// Height of the row of write() marks above the lanes, when there is one.
const CALLS: f64 = 46.0;

/// The chart and, below it, the same packets as a table.
pub fn timeline(entries: &[TimelineEntry], writes: &[WriteMark]) -> String {
    if entries.is_empty() {
        return String::new();
    }
    // Both scroll sideways on a narrow screen rather than shrink their labels or widen the page.
    format!(
        "<div class=\"scroll\">{}</div>\n<div class=\"scroll\">{}</div>\n",
        chart(entries, writes),
        table(entries, writes)
    )
}

/// The writes each entry carried: those with a frame of the entry, else (an entry that
/// stands for several packets, "through frame N") those whose first frame follows it in
/// the same direction before the next entry of that direction.
fn marks_of<'a>(entries: &[TimelineEntry], writes: &'a [WriteMark]) -> Vec<Vec<&'a WriteMark>> {
    let mut out: Vec<Vec<&WriteMark>> = vec![Vec::new(); entries.len()];
    for w in writes {
        let exact = entries
            .iter()
            .position(|e| e.direction == w.direction && w.frames.contains(&e.frame));
        let first = w.frames.first().copied().unwrap_or(0);
        let before = || {
            entries
                .iter()
                .enumerate()
                .filter(|(_, e)| e.direction == w.direction && e.frame <= first)
                .max_by_key(|(_, e)| e.frame)
                .map(|(i, _)| i)
        };
        if let Some(i) = exact.or_else(before) {
            out[i].push(w);
        }
    }
    out
}

/// "write() #7" or "write() #2–#14", and "12 B" or "13 calls, 195 B".
fn mark_label(marks: &[&WriteMark]) -> (String, String) {
    let (first, last) = (marks[0], marks[marks.len() - 1]);
    let name = if marks.iter().all(|m| m.call == first.call) {
        format!("{}()", first.call)
    } else {
        "calls".to_string()
    };
    let bytes: u64 = marks.iter().map(|m| m.bytes).sum();
    if marks.len() == 1 {
        (format!("{name} #{}", first.index), format!("{bytes} B"))
    } else {
        (
            format!("{name} #{}–#{}", first.index, last.index),
            format!("{} calls, {bytes} B", marks.len()),
        )
    }
}

/// The row of write() marks, each over its packet's arrow.
fn calls_row(entries: &[TimelineEntry], writes: &[WriteMark], xs: &[f64]) -> String {
    let mut out = format!(
        "<text class=\"lane-label\" x=\"{:.1}\" y=\"24\" text-anchor=\"end\">calls</text>\n",
        LEFT - 14.0
    );
    for (i, marks) in marks_of(entries, writes).iter().enumerate() {
        if marks.is_empty() {
            continue;
        }
        let x = xs[i];
        let (what, size) = mark_label(marks);
        let title: Vec<String> = marks
            .iter()
            .map(|m| {
                format!(
                    "{}() #{} at {} ms, {} bytes",
                    m.call,
                    m.index,
                    num(m.t_ms),
                    m.bytes
                )
            })
            .collect();
        out.push_str(&format!(
            "<g class=\"syscall\"><title>{}</title>\
             <rect x=\"{:.1}\" y=\"4\" width=\"8\" height=\"8\"/>\
             <text class=\"call\" x=\"{x:.1}\" y=\"24\" text-anchor=\"middle\">{}</text>\
             <text class=\"tick\" x=\"{x:.1}\" y=\"37\" text-anchor=\"middle\">{}</text>\
             <line class=\"joins\" x1=\"{x:.1}\" y1=\"40\" x2=\"{x:.1}\" y2=\"{:.1}\"/>\
             <line class=\"joins\" x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\"/></g>\n",
            esc(&title.join("; ")),
            x - 4.0,
            esc(&what),
            esc(&size),
            // Around the legend's line (y 14 below the row).
            CALLS + 4.0,
            CALLS + 22.0,
            CALLS + CLIENT_Y - 40.0,
        ));
    }
    out
}

/// A round step for about six ticks over `span` milliseconds.
fn tick_step(span: f64) -> f64 {
    let mut step = 10f64.powf(span.log10().floor() - 1.0);
    for m in [1.0, 2.0, 5.0, 10.0, 20.0, 50.0] {
        let s = step * m;
        if span / s <= 7.0 {
            step = s;
            break;
        }
    }
    step
}

/// Where each arrow is drawn, and the scale of the true time axis.
fn layout(entries: &[TimelineEntry]) -> (Vec<f64>, f64, f64) {
    let t0 = entries.iter().map(|e| e.t_ms).fold(f64::INFINITY, f64::min);
    let t1 = entries
        .iter()
        .map(|e| e.t_ms)
        .fold(f64::NEG_INFINITY, f64::max);
    let span = (t1 - t0).max(1e-3);
    let spread = (SEP * (entries.len() as f64 - 1.0)).min((RIGHT - LEFT) * 0.5);
    let scale = (RIGHT - LEFT - spread) / span;
    let mut xs: Vec<f64> = Vec::with_capacity(entries.len());
    for e in entries {
        let x = LEFT + (e.t_ms - t0) * scale;
        let x = match xs.last() {
            Some(prev) => x.max(prev + SEP),
            None => x,
        };
        xs.push(x);
    }
    (xs, t0, scale)
}

/// The index of the packet that ends the longest silence.
fn longest_gap(entries: &[TimelineEntry]) -> Option<usize> {
    (1..entries.len())
        .max_by(|&a, &b| {
            let ga = entries[a].t_ms - entries[a - 1].t_ms;
            let gb = entries[b].t_ms - entries[b - 1].t_ms;
            ga.total_cmp(&gb)
        })
        .filter(|&k| entries[k].t_ms > entries[k - 1].t_ms)
}

fn chart(entries: &[TimelineEntry], writes: &[WriteMark]) -> String {
    let (xs, t0, scale) = layout(entries);
    let top = if writes.is_empty() { 0.0 } else { CALLS };
    let mut svg = format!(
        "<svg class=\"chart timeline\" viewBox=\"0 0 {WIDTH} {}\" role=\"img\" \
         aria-label=\"timeline of one stalled exchange\">\n\
         <defs><marker id=\"tl-head-c2s\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" \
         markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\">\
         <path d=\"M0,0 L10,5 L0,10 z\" class=\"head c2s\"/></marker>\
         <marker id=\"tl-head-s2c\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" \
         markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\">\
         <path d=\"M0,0 L10,5 L0,10 z\" class=\"head s2c\"/></marker>\
         <marker id=\"tl-head-gap\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" \
         markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\">\
         <path d=\"M0,0 L10,5 L0,10 z\" class=\"head gap\"/></marker></defs>\n",
        HEIGHT + top
    );
    if !writes.is_empty() {
        svg.push_str(&calls_row(entries, writes, &xs));
        svg.push_str(&format!("<g transform=\"translate(0,{top})\">\n"));
    }
    if let Some(k) = longest_gap(entries) {
        let (a, b) = (xs[k - 1] + 10.0, xs[k] - 10.0);
        let gap = entries[k].t_ms - entries[k - 1].t_ms;
        let mid = (a + b) / 2.0;
        let note = if entries[k].note.is_empty() {
            format!("nothing on the wire until frame {}", entries[k].frame)
        } else {
            entries[k].note.clone()
        };
        svg.push_str(&format!(
            "<rect class=\"gap\" x=\"{a:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\"/>\
             <line class=\"gap-span\" x1=\"{a:.1}\" y1=\"{:.1}\" x2=\"{b:.1}\" y2=\"{:.1}\" \
             marker-start=\"url(#tl-head-gap)\" marker-end=\"url(#tl-head-gap)\"/>\
             <text class=\"gap-label\" x=\"{mid:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{} \
             of silence</text>\
             <text class=\"gap-note\" x=\"{mid:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n",
            CLIENT_Y + 8.0,
            (b - a).max(1.0),
            SERVER_Y - CLIENT_Y - 16.0,
            (CLIENT_Y + SERVER_Y) / 2.0 + 12.0,
            (CLIENT_Y + SERVER_Y) / 2.0 + 12.0,
            (CLIENT_Y + SERVER_Y) / 2.0 - 6.0,
            esc(&dur_ms(gap)),
            (CLIENT_Y + SERVER_Y) / 2.0 + 32.0,
            esc(&note)
        ));
    }
    for (y, name) in [(CLIENT_Y, "client"), (SERVER_Y, "server")] {
        svg.push_str(&format!(
            "<line class=\"lane\" x1=\"{LEFT}\" y1=\"{y}\" x2=\"{:.1}\" y2=\"{y}\"/>\
             <text class=\"lane-label\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{name}</text>\n",
            RIGHT + 40.0,
            LEFT - 14.0,
            y + 5.0
        ));
    }
    // Time axis, true scale.
    let t_end = t0 + (RIGHT - LEFT) / scale;
    let step = tick_step(t_end - t0);
    svg.push_str(&format!(
        "<line class=\"axis\" x1=\"{LEFT}\" y1=\"{AXIS_Y}\" x2=\"{RIGHT}\" y2=\"{AXIS_Y}\"/>\n"
    ));
    let mut t = 0.0;
    while t0 + t <= t_end + 1e-9 {
        let x = LEFT + t * scale;
        svg.push_str(&format!(
            "<line class=\"axis\" x1=\"{x:.1}\" y1=\"{AXIS_Y}\" x2=\"{x:.1}\" y2=\"{:.1}\"/>\
             <text class=\"tick\" x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{} ms</text>\n",
            AXIS_Y + 5.0,
            AXIS_Y + 18.0,
            num(t)
        ));
        t += step;
    }
    for (e, x) in entries.iter().zip(&xs) {
        let true_x = LEFT + (e.t_ms - t0) * scale;
        let (class, y1, y2) = match e.direction {
            Direction::ClientToServer => ("c2s", CLIENT_Y + 2.0, SERVER_Y - 4.0),
            Direction::ServerToClient => ("s2c", SERVER_Y - 2.0, CLIENT_Y + 4.0),
        };
        let (kind, size) = match e.payload_bytes {
            Some(0) => (" ack", "ACK".to_string()),
            Some(n) => ("", format!("{n} B")),
            None => ("", String::new()),
        };
        svg.push_str(&format!(
            "<g class=\"packet {class}{kind}\"><title>frame {}: {}{}{}</title>\
             <circle cx=\"{x:.1}\" cy=\"{y1:.1}\" r=\"3\"/>\
             <line x1=\"{x:.1}\" y1=\"{y1:.1}\" x2=\"{x:.1}\" y2=\"{y2:.1}\" \
             marker-end=\"url(#tl-head-{class})\"/>\
             <text class=\"frame\" x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">#{}</text>\
             <text class=\"tick\" x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\
             <text class=\"size\" x=\"{:.1}\" y=\"{:.1}\">{size}</text>\
             <polyline class=\"leader\" points=\"{x:.1},{:.1} {x:.1},{:.1} {true_x:.1},{:.1}\"/>\
             </g>\n",
            e.frame,
            esc(&e.what),
            if e.note.is_empty() { "" } else { " — " },
            esc(&e.note),
            CLIENT_Y - 26.0,
            e.frame,
            CLIENT_Y - 12.0,
            esc(&format!("{} ms", num(e.t_ms))),
            x + 6.0,
            CLIENT_Y + 26.0,
            SERVER_Y + 2.0,
            SERVER_Y + 18.0,
            AXIS_Y,
        ));
    }
    svg.push_str(&format!(
        "<g class=\"legend\"><line class=\"c2s\" x1=\"{LEFT}\" y1=\"14\" x2=\"{:.1}\" y2=\"14\"/>\
         <text class=\"tick\" x=\"{:.1}\" y=\"18\">client → server</text>\
         <line class=\"s2c\" x1=\"{:.1}\" y1=\"14\" x2=\"{:.1}\" y2=\"14\"/>\
         <text class=\"tick\" x=\"{:.1}\" y=\"18\">server → client</text>\
         <line class=\"ack\" x1=\"{:.1}\" y1=\"14\" x2=\"{:.1}\" y2=\"14\"/>\
         <text class=\"tick\" x=\"{:.1}\" y=\"18\">pure ACK (no data); “19 B”: payload \
         bytes</text></g>\n",
        LEFT + 24.0,
        LEFT + 30.0,
        LEFT + 150.0,
        LEFT + 174.0,
        LEFT + 180.0,
        LEFT + 300.0,
        LEFT + 324.0,
        LEFT + 330.0
    ));
    if !writes.is_empty() {
        svg.push_str("</g>\n");
    }
    svg.push_str("</svg>\n");
    svg
}

pub fn table(entries: &[TimelineEntry], writes: &[WriteMark]) -> String {
    let marks = marks_of(entries, writes);
    let mut out = String::from(
        "<table class=\"packets\"><thead><tr><th>frame</th><th class=\"num\">t</th>\
         <th>direction</th><th>packet</th><th>why it matters</th></tr></thead><tbody>\n",
    );
    for (e, m) in entries.iter().zip(&marks) {
        let calls = match m.is_empty() {
            true => String::new(),
            false => {
                let (what, size) = mark_label(m);
                format!(
                    "<br><span class=\"syscall\">bytes of {} ({})</span>",
                    esc(&what),
                    esc(&size)
                )
            }
        };
        let (class, dir) = match e.direction {
            Direction::ClientToServer => ("c2s", "client → server"),
            Direction::ServerToClient => ("s2c", "server → client"),
        };
        out.push_str(&format!(
            "<tr><td class=\"mono\">{}</td><td class=\"num mono\">{} ms</td>\
             <td><span class=\"dir {class}\">{dir}</span></td><td>{}{calls}</td><td>{}</td></tr>\n",
            e.frame,
            esc(&num(e.t_ms)),
            esc(&e.what),
            esc(&e.note)
        ));
    }
    out.push_str("</tbody></table>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(frame: u64, t_ms: f64, direction: Direction, note: &str) -> TimelineEntry {
        TimelineEntry {
            frame,
            t_ms,
            direction,
            what: "x".into(),
            payload_bytes: None,
            note: note.into(),
        }
    }

    #[test]
    fn close_packets_are_spread_and_the_gap_is_found() {
        let e = [
            entry(24, 0.0, Direction::ClientToServer, ""),
            entry(25, 0.062, Direction::ServerToClient, ""),
            entry(26, 42.638, Direction::ClientToServer, "delayed ACK"),
            entry(27, 42.656, Direction::ServerToClient, ""),
        ];
        let (xs, _, _) = layout(&e);
        assert!(xs.windows(2).all(|w| w[1] - w[0] >= SEP - 1e-9), "{xs:?}");
        assert!(xs.iter().all(|x| *x <= RIGHT + 1e-9), "{xs:?}");
        assert_eq!(longest_gap(&e), Some(2));
        assert!(timeline(&e, &[]).contains("42.6 ms of silence"));
    }

    fn mark(index: u32, bytes: u64, t_ms: f64, frame: u64) -> WriteMark {
        WriteMark {
            call: "write".into(),
            index,
            bytes,
            t_ms,
            direction: Direction::ServerToClient,
            frames: vec![frame],
        }
    }

    #[test]
    fn write_calls_sit_above_the_frames_that_carried_them() {
        let e = [
            entry(4, 0.0, Direction::ClientToServer, ""),
            entry(5, 0.06, Direction::ServerToClient, ""),
            entry(6, 40.06, Direction::ClientToServer, "delayed ACK"),
            entry(7, 40.1, Direction::ServerToClient, ""),
        ];
        let mut w = vec![mark(1, 12, 0.055, 5)];
        w.extend((2..=14).map(|k| mark(k, 15, 0.062 + k as f64 * 0.002, 7)));
        let html = timeline(&e, &w);
        assert!(html.contains(">write() #1</text>"), "{html}");
        assert!(html.contains(">write() #2–#14</text>"));
        assert!(html.contains(">13 calls, 195 B</text>"));
        assert!(html.contains("write() #14 at 0.09 ms, 15 bytes"));
        // Two marks, over the arrows of frames 5 and 7.
        let (xs, _, _) = layout(&e);
        assert_eq!(html.matches("<g class=\"syscall\">").count(), 2);
        assert!(html.contains(&format!("x1=\"{:.1}\" y1=\"40\"", xs[1])));
        assert!(html.contains(&format!("x1=\"{:.1}\" y1=\"40\"", xs[3])));
        assert!(html.contains("viewBox=\"0 0 960 326\""));
        assert_eq!(html.matches("<g").count(), html.matches("</g>").count());
        // The table says it too, on the frames' rows.
        assert!(html.contains("bytes of write() #1 (12 B)"));
        // Untraced: no row, the usual height.
        let plain = timeline(&e, &[]);
        assert!(!plain.contains("syscall"));
        assert!(plain.contains("viewBox=\"0 0 960 280\""));
    }

    #[test]
    fn a_turn_in_one_line_gets_the_writes_of_its_frames() {
        // fragmented_writes quotes a turn as one line, "through frame 12".
        let e = [entry(5, 0.0, Direction::ServerToClient, "through frame 12")];
        let w: Vec<WriteMark> = (1..=8).map(|k| mark(k, 14, 0.0, 4 + k as u64)).collect();
        let html = timeline(&e, &w);
        assert!(html.contains(">write() #1–#8</text>"), "{html}");
        assert!(html.contains(">8 calls, 112 B</text>"));
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_step(44.0), 10.0);
        assert_eq!(tick_step(3.0), 0.5);
        assert_eq!(tick_step(250.0), 50.0);
    }
}
