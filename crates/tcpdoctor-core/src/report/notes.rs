//! How a capture was read, in words: time that stepped back, half-open attempts not tracked,
//! TCP decapsulated from tunnels, 802.11 A-MSDUs split, frames not analysed. Worded once here
//! for the text report (`text.rs`) and the HTML page (`run::html`).

use crate::units::{fmt_count, fmt_duration};

use super::CaptureSummary;

/// One line about how a capture was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// Something the reader must know to trust the figures (shown as a warning).
    pub warning: bool,
    pub text: String,
}

impl CaptureSummary {
    /// `timestamps went backwards 2 times, the largest step 1.2 s at frame 31 (…)`, when
    /// they did.
    pub fn time_steps_back_line(&self) -> Option<String> {
        let b = self.time_steps_back.as_ref()?;
        Some(format!(
            "timestamps went backwards {} time{}, the largest step {} at frame {} (the duration \
             spans the earliest to the latest timestamp)",
            fmt_count(b.count),
            if b.count == 1 { "" } else { "s" },
            fmt_duration(std::time::Duration::from_secs_f64(b.largest_ms / 1e3)),
            b.largest_at_frame
        ))
    }

    /// `12 half-open connection attempts beyond the cap of 65,536 were not tracked (…)`, when
    /// any were evicted.
    pub fn half_open_line(&self) -> Option<String> {
        let n = self.half_open_untracked;
        (n > 0).then(|| {
            format!(
                "{} half-open connection attempt{} beyond the cap of {} {} not tracked (a SYN \
                 flood? the oldest attempts were dropped first)",
                fmt_count(n),
                if n == 1 { "" } else { "s" },
                fmt_count(crate::analysis::MAX_HALF_OPEN as u64),
                if n == 1 { "was" } else { "were" },
            )
        })
    }

    /// `not analysed: 7 frames (4 UDP, 3 encrypted (…))`, when any were skipped.
    pub fn not_analysed_line(&self) -> Option<String> {
        let n = self.skipped.total();
        (n > 0).then(|| {
            format!(
                "not analysed: {} frame{} ({})",
                fmt_count(n),
                if n == 1 { "" } else { "s" },
                self.skipped_kinds()
            )
        })
    }

    /// Every line above that applies, warnings first, as the text report orders them.
    pub fn notes(&self) -> Vec<Note> {
        let warning = |text| Note {
            warning: true,
            text,
        };
        let note = |text| Note {
            warning: false,
            text,
        };
        [
            self.time_steps_back_line().map(note),
            self.half_open_line().map(warning),
            self.decapsulated().map(note),
            self.amsdu_line().map(note),
            self.not_analysed_line().map(note),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}
