//! `ab --stream`: what each side's traced stream run says per message, side by side.
//!
//! After the measured rounds, one more run of each side is traced (`stream --server`
//! traced: its rates are not measured). Its counts per message — the server's send (or
//! receive) calls and the data segments that carried the stream — are exact counts of that
//! run; the per-message figures still follow the pace (a sender batches more when its peer
//! is slower), so a difference is named only from a factor of [`CALLS_FACTOR`] (calls) or
//! [`SEGMENTS_FACTOR`] (segments), as `why` does for requests.

use serde::{Deserialize, Serialize};

use super::Side;
use crate::numfmt::num;

/// Calls per message that differ by this factor or more are a difference.
pub const CALLS_FACTOR: f64 = 2.0;
/// Segments per message that differ by this factor or more are a difference.
pub const SEGMENTS_FACTOR: f64 = 1.25;

/// One side's traced stream run, as its report gave it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamSide {
    /// The stream report's file.
    pub source: String,
    /// `send` or `receive`.
    pub family: Option<String>,
    pub calls_per_message: Option<f64>,
    pub segments_per_message: Option<f64>,
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
            let mut compare = |what: String, va: Option<f64>, vb: Option<f64>, min: f64| {
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
                format!("server's {family} calls"),
                x.calls_per_message,
                y.calls_per_message,
                CALLS_FACTOR,
            );
            compare(
                "data segments".into(),
                x.segments_per_message,
                y.segments_per_message,
                SEGMENTS_FACTOR,
            );
        }
        StreamWhy { a, b, differences }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(calls: f64, segs: f64) -> StreamSide {
        StreamSide {
            source: "x.json".into(),
            family: Some("send".into()),
            calls_per_message: Some(calls),
            segments_per_message: Some(segs),
            ..StreamSide::default()
        }
    }

    #[test]
    fn differences_are_named_from_their_factor_in_either_direction() {
        let w = StreamWhy::of(Some(side(0.0015, 0.002)), Some(side(1.0, 0.99)));
        assert_eq!(w.differences.len(), 2, "{:?}", w.differences);
        assert!(
            w.differences[0].starts_with(
                "B makes 667× the server's send calls per message of A (1 against 0.002)"
            ),
            "{:?}",
            w.differences
        );
        let w = StreamWhy::of(Some(side(1.0, 0.99)), Some(side(0.6, 0.9)));
        assert!(w.differences.is_empty(), "{:?}", w.differences);
        let w = StreamWhy::of(Some(side(1.0, 1.0)), None);
        assert!(w.differences.is_empty());
    }
}
