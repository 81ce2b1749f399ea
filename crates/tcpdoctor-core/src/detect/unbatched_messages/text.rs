//! The words of an `unbatched_messages` finding: verdict, facts, counts and fix of the
//! longest burst of a direction, from its rule 6 or 6′ proof.

use std::time::Duration;

use super::{Burst, Proof, State, FRAMES_QUOTED, INITIAL_WINDOW, SPAN_MAX, WARN_SHARE};
use crate::detect::{of, FindingHead, Groups};
use crate::flow::Direction;
use crate::report::{Evidence, Finding, FindingKind, Severity, TimelineEntry};
use crate::units::fmt_count;

pub(super) fn finding(
    group: usize,
    dir: Direction,
    st: &State,
    groups: &Groups,
) -> Option<Finding> {
    let ex = st.example.as_ref()?;
    let extra = st.segments.saturating_sub(st.batched);
    let share = extra as f64 / st.dir_segments.max(1) as f64;
    let severity = if share >= WARN_SHARE {
        Severity::Warning
    } else {
        Severity::Info
    };
    let (whats, whatone, sender, peer) = crate::detect::message_words(dir);
    let (what, one) = ("messages", "message");
    let acked = format!(
        "the {peer} sent data acknowledging a first part of the burst before the rest had \
         reached it, so the burst held at least two messages"
    );
    let framed = format!(
        "the script's framing shows each segment carried exactly one whole {whatone} (the \
         driver's own message ends)"
    );
    let proved = match st.framed {
        0 => acked,
        n if n == st.bursts => framed,
        n => format!(
            "in {} of the bursts {framed}; in the rest {acked}",
            fmt_count(n)
        ),
    };
    let together = format!(
        "in each the {sender} had received none of the {peer}'s data between the first message \
         and the last, and {proved}"
    );
    let b = &ex.burst;
    let first = b.segs[0];
    let last = b.segs[b.segs.len() - 1];
    let span = last.ts.since(first.ts);
    let ex_extra = (b.segs.len() as u64).saturating_sub(ex.batched);
    let header_bytes = extra * ex.header;
    let typical = ex.typical;
    let verdict = format!(
        "The {sender} sends its {what} unbatched: {} small {what} left one segment each in {} \
         {} ({together}, median {} bytes); written together per peer they need {} — {} extra \
         packets, {} of its data segments.",
        fmt_count(st.segments),
        fmt_count(st.bursts),
        if st.bursts == 1 { "burst" } else { "bursts" },
        typical,
        segments_word(st.batched),
        fmt_count(extra),
        of(extra, st.dir_segments),
    );
    let mut ev = Evidence::default();
    let why = format!(
        "the {sender} had received none of the {peer}'s data between them, so none waited for \
         the {peer}"
    );
    ev.facts.push(format!(
        "frames {}–{}: {} {what} of {} bytes left in {} segments within {} (a burst spans at \
         most {}), every one carrying ACK number {} and one TSval (sent within one tick of \
         the {sender}'s clock): {why}; one write of their {} bytes needs \
         {}, so {} of them are extra packets",
        first.frame,
        last.frame,
        b.segs.len(),
        size_range(b),
        b.segs.len(),
        crate::units::fmt_duration(span),
        crate::units::fmt_duration(SPAN_MAX),
        ex.ack,
        fmt_count(b.bytes),
        segments_word(ex.batched),
        ex_extra,
    ));
    if let (Some(Proof::Framing), Some((m0, m1))) = (b.proof, b.messages) {
        ev.facts.push(format!(
            "the script's framing: the {} segments in frames {}–{} each carry exactly one \
             whole {whatone} ({whats} {m0}–{m1} of this connection, counted by the driver, which \
             {}): each starts where the previous {whatone} ended and ends where the next one \
             does, so they are {} separate {whats}, never one {whatone} in pieces",
            b.segs.len(),
            first.frame,
            last.frame,
            match dir {
                Direction::ClientToServer => "wrote each request",
                Direction::ServerToClient => "read each response by its step's framing",
            },
            b.segs.len(),
        ));
    }
    if let Some(Proof::Ack(p)) = b.proof {
        let lo = first.seq;
        let at = p.ack.map_or(0, |a| a.diff(lo));
        ev.facts.push(format!(
            "frame {}: the {peer} sent {} bytes of data carrying an ACK number {at} bytes into \
             this burst's {} bytes — it had received the burst's first {at} bytes, not the \
             rest, and sent data before the rest arrived: those first bytes were at least one \
             whole {one}, so the burst held at least two; without such a segment a burst is not \
             named, for one {one} written in pieces and answered in pieces looks the same on \
             the wire (fragmented_writes)",
            p.frame,
            p.len,
            fmt_count(b.bytes),
        ));
    }
    if let (Some(c), Some(Proof::Ack(_))) = (&ex.counts, b.proof) {
        let [(cb, cs, cm), (sb, ss, sm)] = c.side;
        ev.facts.push(format!(
            "on flow {} the client's {} bytes come to {:.0} of its typical {cs}-byte segment and \
             the server's {} bytes to {:.0} of its typical {ss}-byte segment: the counts agree \
             (rule 2)",
            ex.flow.id,
            fmt_count(cb),
            cm,
            fmt_count(sb),
            sm,
        ));
    }
    ev.facts.push(format!(
        "each extra packet costs a send syscall, {} bytes of IP and TCP headers ({} in all; \
         Ethernet adds 14 per packet) and an ACK from the {peer} for every one or two; the \
         congestion window counts packets, and this burst's {} segments are {:.1} initial \
         windows (10 packets) where its bytes fit in {}",
        ex.header,
        fmt_count(header_bytes),
        b.segs.len(),
        b.segs.len() as f64 / INITIAL_WINDOW,
        segments_word(ex.batched),
    ));
    ev.counts.insert("bursts".into(), st.bursts);
    if st.framed > 0 {
        ev.counts.insert("bursts_by_framing".into(), st.framed);
    }
    ev.counts.insert("messages".into(), st.segments);
    ev.counts.insert("segments".into(), st.segments);
    ev.counts.insert("segments_if_batched".into(), st.batched);
    ev.counts.insert("extra_packets".into(), extra);
    ev.counts.insert("header_bytes".into(), header_bytes);
    ev.counts
        .insert("direction_segments".into(), st.dir_segments);
    ev.values
        .insert("extra_share".into(), crate::stats::round3(share));
    ev.frames = b.segs.iter().take(FRAMES_QUOTED).map(|s| s.frame).collect();
    for s in b.segs.iter().take(FRAMES_QUOTED) {
        ev.timeline.push(TimelineEntry {
            frame: s.frame,
            t_ms: crate::detect::rel_ms(s.ts, first.ts),
            direction: dir,
            what: format!("{} bytes", s.len),
            payload_bytes: Some(u64::from(s.len)),
            note: if s.frame == first.frame {
                format!("one {one}, one segment")
            } else {
                String::new()
            },
        });
    }
    let fix = match dir {
        Direction::ClientToServer => {
            "Batch per peer: gather the requests queued for one server and write them with one \
             call — writev/sendmsg, or one buffered write per peer per event-loop turn — or \
             cork the burst (TCP_CORK, or MSG_MORE on every send but the last). In asyncio, \
             collect the messages and call transport.write once (b''.join) or \
             transport.writelines(). Keep TCP_NODELAY: a whole batch then leaves at once."
        }
        Direction::ServerToClient => {
            "Batch per peer: answer all the requests one read delivered, then write the answers \
             with one call — writev/sendmsg, or one buffered write per connection per \
             event-loop turn — or cork them (TCP_CORK, or MSG_MORE on every send but the \
             last). In asyncio, collect the answers of one data_received and call \
             transport.write once (b''.join) or transport.writelines(). Keep TCP_NODELAY: a \
             whole batch then leaves at once."
        }
    };
    Some(
        FindingHead {
            kind: FindingKind::UnbatchedMessages,
            severity,
            group,
            direction: dir,
            flows_affected: st.flows,
            example_flow: ex.flow.clone(),
            time_lost: Duration::ZERO,
        }
        .finish(groups, verdict, ev, fix),
    )
}

/// `40` or `38–42`.
fn size_range(b: &Burst) -> String {
    let min = b.segs.iter().map(|s| s.len).min().unwrap_or(0);
    let max = b.segs.iter().map(|s| s.len).max().unwrap_or(0);
    if min == max {
        min.to_string()
    } else {
        format!("{min}–{max}")
    }
}

fn segments_word(n: u64) -> String {
    if n == 1 {
        "1 segment".into()
    } else {
        format!("{} segments", fmt_count(n))
    }
}
