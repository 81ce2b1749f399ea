//! `ab --stream`: what each side's traced stream run says per message, side by side.
//!
//! After the measured rounds, one more run of each side is traced (`stream --server`
//! traced: its rates are not measured). Its count per message of the server's send (or
//! receive) calls is an exact count of that run; it still follows the pace (a sender that
//! writes whatever is queued batches more when its peer is slower), so a difference is named
//! only from a factor of [`CALLS_FACTOR`]. Segments per message are not taken from the
//! traced run: the tracer's stops change them (the kernel merges writes only when unsent
//! bytes are queued), and the measured rounds compare them untraced, with their interval.

use serde::{Deserialize, Serialize};

use super::Side;
use crate::numfmt::num;

/// Calls per message that differ by this factor or more are a difference.
pub const CALLS_FACTOR: f64 = 2.0;

/// One side's traced stream run, as its report gave it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamSide {
    /// The stream report's file.
    pub source: String,
    /// `send` or `receive`.
    pub family: Option<String>,
    pub calls_per_message: Option<f64>,
    /// The stream report's reading (one call and one packet per message, batching, …).
    pub reading: Option<String>,
    /// Why the calls were not counted.
    pub calls_unknown: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StreamWhy {
    pub a: Option<StreamSide>,
    pub b: Option<StreamSide>,
    pub differences: Vec<String>,
}

fn factor(a: f64, b: f64) -> Option<f64> {
    (a > 0.0 && b > 0.0).then(|| if a > b { a / b } else { b / a })
}

impl StreamWhy {
    pub fn of(a: Option<StreamSide>, b: Option<StreamSide>) -> StreamWhy {
        let mut differences = Vec::new();
        if let (Some(x), Some(y)) = (&a, &b) {
            let family = x.family.as_deref().unwrap_or("send");
            let compare = |differences: &mut Vec<String>,
                           what: String,
                           va: Option<f64>,
                           vb: Option<f64>,
                           min: f64| {
                let (Some(va), Some(vb)) = (va, vb) else {
                    return;
                };
                if let Some(f) = factor(va, vb).filter(|f| *f >= min) {
                    let (more, fewer) = if vb > va {
                        (Side::B, Side::A)
                    } else {
                        (Side::A, Side::B)
                    };
                    differences.push(format!(
                        "{} makes {}× the {what} per message of {} ({} against {})",
                        more.letter(),
                        num(f),
                        fewer.letter(),
                        num(va.max(vb)),
                        num(va.min(vb))
                    ));
                }
            };
            compare(
                &mut differences,
                format!("server's {family} calls"),
                x.calls_per_message,
                y.calls_per_message,
                CALLS_FACTOR,
            );
        }
        StreamWhy { a, b, differences }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(calls: f64) -> StreamSide {
        StreamSide {
            source: "x.json".into(),
            family: Some("send".into()),
            calls_per_message: Some(calls),
            ..StreamSide::default()
        }
    }

    #[test]
    fn differences_are_named_from_their_factor_in_either_direction() {
        let w = StreamWhy::of(Some(side(0.0015)), Some(side(1.0)));
        assert_eq!(w.differences.len(), 1, "{:?}", w.differences);
        assert!(
            w.differences[0].starts_with(
                "B makes 667× the server's send calls per message of A (1 against 0.002)"
            ),
            "{:?}",
            w.differences
        );
        let w = StreamWhy::of(Some(side(1.0)), Some(side(0.6)));
        assert!(w.differences.is_empty(), "{:?}", w.differences);
        let w = StreamWhy::of(Some(side(1.0)), None);
        assert!(w.differences.is_empty());
    }
}
