//! The join in words, as strace names the calls and Wireshark numbers the frames.

use super::{JoinedWrite, SocketJoin};
use crate::units::{fmt_count, fmt_duration};

/// "frames 41, 43, 45 carry the bytes of write() calls #7, #8, #9 (12, 35, 35 bytes, 4 µs
/// apart)": the writes whose bytes the given frames carried for the first time, in the
/// words of strace. Frames that carry several writes each, or share one, are told frame by
/// frame ("frame 5 carries …; frame 7 carries …") when they are few. None when the join
/// holds none of them.
pub fn describe_frames(join: &SocketJoin, frames: &[u64]) -> Option<String> {
    // Each frame with the writes it carried first.
    let mut per: Vec<(u64, Vec<&JoinedWrite>)> = Vec::new();
    for fw in frames.iter().filter_map(|&n| join.frame(n)) {
        let n = fw.segment.frame;
        let w: Vec<&JoinedWrite> = (fw.first_write.max(1)..=fw.last_write)
            .filter_map(|k| join.write(k))
            .filter(|w| w.frames.contains(&n))
            .collect();
        if !w.is_empty() && !per.iter().any(|(m, _)| *m == n) {
            per.push((n, w));
        }
    }
    let mut all: Vec<&JoinedWrite> = per.iter().flat_map(|(_, w)| w.iter().copied()).collect();
    all.sort_by_key(|w| w.write.index);
    all.dedup_by_key(|w| w.write.index);
    if all.is_empty() {
        return None;
    }
    let one_each = per.len() == all.len() && per.iter().all(|(_, w)| w.len() == 1);
    let carries = |n: usize| if n == 1 { "carries" } else { "carry" };
    if per.len() == 1 || one_each || per.len() > 6 {
        let shown: Vec<u64> = per.iter().map(|(n, _)| *n).collect();
        return Some(format!(
            "{} {} the bytes of {}",
            list(&shown, "frame", "frames"),
            carries(shown.len()),
            describe_writes(&all)
        ));
    }
    // Consecutive frames carrying the same writes (one write split over them) go together.
    let mut groups: Vec<(Vec<u64>, &Vec<&JoinedWrite>)> = Vec::new();
    for (n, w) in &per {
        let same = |g: &Vec<&JoinedWrite>| {
            g.iter()
                .map(|x| x.write.index)
                .eq(w.iter().map(|x| x.write.index))
        };
        match groups.last_mut() {
            Some((frames, g)) if same(g) => frames.push(*n),
            _ => groups.push((vec![*n], w)),
        }
    }
    let parts: Vec<String> = groups
        .iter()
        .map(|(f, w)| {
            let split = match (f.len(), w.len()) {
                (1, _) => String::new(),
                (n, 1) => format!(", one write split over {n} frames"),
                (n, _) => format!(", split over {n} frames"),
            };
            format!(
                "{} {} the bytes of {}{split}",
                list(f, "frame", "frames"),
                carries(f.len()),
                describe_writes(w)
            )
        })
        .collect();
    Some(parts.join("; "))
}

/// "write() calls #7, #8, #9 (12, 35, 35 bytes, 4 µs apart)"; a long run of calls is
/// summarised ("write() calls #8–#20 (13 calls, 420 bytes in all, 3–5 µs apart)").
pub fn describe_writes(writes: &[&JoinedWrite]) -> String {
    let Some(first) = writes.first() else {
        return String::new();
    };
    let same_kind = writes.iter().all(|w| w.write.kind == first.write.kind);
    let name = |w: &JoinedWrite| format!("{}()", w.write.kind.name());
    let mut out = match (writes.len(), same_kind) {
        (1, _) => format!("{} call #{}", name(first), first.write.index),
        (n, true) if n > 5 => format!(
            "{} calls #{}–#{}",
            name(first),
            first.write.index,
            writes[n - 1].write.index
        ),
        (_, true) => format!(
            "{} calls {}",
            name(first),
            writes
                .iter()
                .map(|w| format!("#{}", w.write.index))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (_, false) => format!(
            "calls {}",
            writes
                .iter()
                .map(|w| format!("{} #{}", name(w), w.write.index))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let total: u64 = writes.iter().map(|w| w.write.bytes).sum();
    let sizes = if writes.len() > 5 {
        format!("{} calls, {} bytes in all", writes.len(), fmt_count(total))
    } else {
        let s: Vec<String> = writes.iter().map(|w| fmt_count(w.write.bytes)).collect();
        format!("{} bytes", s.join(", "))
    };
    let partial: Vec<String> = writes
        .iter()
        .filter(|w| w.write.asked > w.write.bytes as i64)
        .map(|w| {
            format!(
                "#{} took {} of {}",
                w.write.index, w.write.bytes, w.write.asked
            )
        })
        .collect();
    out.push_str(&format!(" ({sizes}"));
    if let Some(gaps) = gaps(writes) {
        out.push_str(&format!(", {gaps}"));
    }
    if !partial.is_empty() {
        out.push_str(&format!("; partial: {}", partial.join(", ")));
    }
    out.push(')');
    out
}

/// "4 µs apart" or "3–9 µs apart": the gaps between consecutive calls' entries.
fn gaps(writes: &[&JoinedWrite]) -> Option<String> {
    let g: Vec<String> = writes
        .windows(2)
        .map(|w| fmt_duration(w[1].write.at.since(w[0].write.at)))
        .collect();
    let (lo, hi) = writes
        .windows(2)
        .map(|w| w[1].write.at.since(w[0].write.at))
        .fold(None, |acc: Option<(_, _)>, d| match acc {
            None => Some((d, d)),
            Some((lo, hi)) => Some((d.min(lo), d.max(hi))),
        })?;
    let (lo, hi) = (fmt_duration(lo), fmt_duration(hi));
    Some(if g.iter().all(|x| *x == g[0]) || lo == hi {
        format!("{} apart", g[0])
    } else {
        format!("{lo} to {hi} apart")
    })
}

/// "frame 41", "frames 41, 43, 45"; a long list as "20 frames, 41 to 80".
fn list(frames: &[u64], one: &str, many: &str) -> String {
    let nums: Vec<String> = frames.iter().map(u64::to_string).collect();
    match frames.len() {
        1 => format!("{one} {}", nums[0]),
        n if n > 6 => format!("{n} {many}, {} to {},", nums[0], nums[n - 1]),
        _ => format!("{many} {}", nums.join(", ")),
    }
}

/// Retransmissions among `frames`: "frame 50 carries the bytes of write() call #7 again (a
/// retransmission)".
pub fn describe_resent(join: &SocketJoin, frames: &[u64]) -> Vec<String> {
    frames
        .iter()
        .filter_map(|&n| join.frame(n))
        .filter(|fw| fw.retransmission && fw.first_write > 0)
        .map(|fw| {
            let w: Vec<&JoinedWrite> = (fw.first_write..=fw.last_write)
                .filter_map(|k| join.write(k))
                .filter(|w| w.resent_in.contains(&fw.segment.frame))
                .collect();
            format!(
                "frame {} carries the bytes of {} again (a retransmission)",
                fw.segment.frame,
                describe_writes(&w)
            )
        })
        .collect()
}
