//! How numbers read, in every report: the one formatting every renderer uses (run and demo
//! text, the HTML page, bench text, check messages), so a figure shows the same digits wherever
//! a reader meets it.
//!
//! 1. A figure keeps about three significant digits: `0.082`, `1.25`, `43.8`, `5012`.
//! 2. Digits that say nothing are dropped: a count is `39`, never `39.0`; zero is `0`, never
//!    `0.000`.
//! 3. A duration given in milliseconds picks the unit that reads best: `85 µs`, `43.8 ms`,
//!    `1.2 s`.
//! 4. A count beside its noun agrees with it: `1 exchange`, `2 exchanges`.
//! 5. In JSON a whole number is written as an integer (`39`, not `39.0`): counts carried in
//!    a float field (a before/after row, a check's actual value) come out as counts
//!    ([`whole_as_int`]).
//! 6. A name shown in a column (a step, a scenario) keeps at most the column's characters:
//!    a longer one is cut and ends in `…` ([`ellipsize`]), so a name from a script or a flag
//!    cannot push a table off the screen (nor past what `{:<width$}` can pad).

use serde::Serializer;

/// A figure with as many digits as a reader needs (rules 1 and 2).
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return "–".to_string();
    }
    let a = v.abs();
    let s = if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.001 || a == 0.0 {
        format!("{v:.3}")
    } else {
        // A small ratio (0.0005×) keeps its first two digits rather than reading as 0.
        let decimals = (-a.log10()).ceil() as usize + 1;
        format!("{v:.decimals$}")
    };
    if s.contains('.') {
        let t = s.trim_end_matches('0').trim_end_matches('.');
        if t == "-0" {
            "0".to_string()
        } else {
            t.to_string()
        }
    } else if s == "-0" {
        "0".to_string()
    } else {
        s
    }
}

/// `name` cut to at most `max` characters, the last of them `…` when it was cut (rule 6).
pub fn ellipsize(name: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match name.char_indices().nth(max) {
        None => std::borrow::Cow::Borrowed(name),
        Some(_) => {
            let keep: String = name.chars().take(max.saturating_sub(1)).collect();
            std::borrow::Cow::Owned(format!("{keep}…"))
        }
    }
}

/// `v` rounded to three significant digits: what a ratio keeps in JSON (0.000495, 1370).
pub fn sig3(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let scale = 10f64.powi(2 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}

/// A duration given in milliseconds, in the unit that reads best (rule 3).
pub fn dur_ms(ms: f64) -> String {
    if ms > 0.0 && ms < 1.0 {
        format!("{} µs", num(ms * 1000.0))
    } else if ms >= 1000.0 {
        format!("{} s", num(ms / 1000.0))
    } else {
        format!("{} ms", num(ms))
    }
}

/// `n` and its noun, singular or plural (rule 4): `count(1, "exchange")` is `1 exchange`.
/// Nouns whose plural is not `-s` use [`count_of`].
pub fn count(n: u64, noun: &str) -> String {
    count_of(n, noun, &format!("{noun}s"))
}

/// `n` and the noun that agrees with it: `count_of(2, "process", "processes")`.
pub fn count_of(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Serializes an optional float, writing a whole number as a JSON integer (rule 5).
pub fn whole_as_int<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(x) if x.fract() == 0.0 && x.abs() < 9.0e15 => s.serialize_i64(*x as i64),
        Some(x) => s.serialize_f64(*x),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_name_is_cut_to_its_column() {
        assert_eq!(ellipsize("get", 5), "get");
        assert_eq!(ellipsize("12345", 5), "12345");
        assert_eq!(ellipsize("123456", 5), "1234…");
        assert_eq!(ellipsize("ééééééé", 3), "éé…");
        let huge = "x".repeat(65_536);
        assert_eq!(ellipsize(&huge, 40).chars().count(), 40);
    }

    #[test]
    fn figures_read_well() {
        for (v, want) in [
            (0.0823, "0.082"),
            (1.254, "1.25"),
            (43.81, "43.8"),
            (5012.4, "5012"),
            (945.223, "945"),
            (39.0, "39"),
            (10.0, "10"),
            (0.0, "0"),
            (-0.0, "0"),
            (0.0005, "0.0005"),
            (0.000_123, "0.00012"),
            (0.08, "0.08"),
            (1.0, "1"),
            (f64::NAN, "–"),
        ] {
            assert_eq!(num(v), want, "{v}");
        }
        assert_eq!(sig3(0.000_495_2), 0.000_495);
        assert_eq!(sig3(1374.4), 1370.0);
        assert_eq!(sig3(0.0), 0.0);
        assert_eq!(dur_ms(0.085), "85 µs");
        assert_eq!(dur_ms(43.8), "43.8 ms");
        assert_eq!(dur_ms(1200.0), "1.2 s");
        assert_eq!(dur_ms(0.0), "0 ms");
    }

    #[test]
    fn nouns_agree_with_counts() {
        assert_eq!(count(0, "exchange"), "0 exchanges");
        assert_eq!(count(1, "exchange"), "1 exchange");
        assert_eq!(count(2, "error"), "2 errors");
        assert_eq!(count_of(1, "process", "processes"), "1 process");
        assert_eq!(count_of(3, "process", "processes"), "3 processes");
    }

    #[test]
    fn whole_numbers_are_json_integers() {
        #[derive(serde::Serialize)]
        struct Row {
            #[serde(serialize_with = "whole_as_int")]
            a: Option<f64>,
            #[serde(serialize_with = "whole_as_int")]
            b: Option<f64>,
            #[serde(serialize_with = "whole_as_int")]
            c: Option<f64>,
        }
        let json = serde_json::to_string(&Row {
            a: Some(39.0),
            b: Some(0.125),
            c: None,
        })
        .unwrap();
        assert_eq!(json, r#"{"a":39,"b":0.125,"c":null}"#);
    }
}
