//! Durations and sizes as people write them: `40ms`, `1.5s`, `250us`, `10mbit`, `64KiB`.
//!
//! Every flag and script field that takes a duration or a size parses through here, so the
//! whole tool accepts the same spellings.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    #[error("empty value")]
    Empty,
    #[error("`{0}` is not a number followed by a unit")]
    NotANumber(String),
    #[error("unknown unit `{unit}` in `{text}` (expected one of {expected})")]
    UnknownUnit {
        text: String,
        unit: String,
        expected: &'static str,
    },
    #[error("`{0}` is out of range")]
    OutOfRange(String),
    /// A bare number where a unit is needed: `15` could mean 15 ms or 15 s.
    #[error("`{text}` has no unit: write `{number}s` (or `{number}ms`; units: {expected})")]
    MissingUnit {
        text: String,
        number: String,
        expected: &'static str,
    },
}

fn split_number(text: &str) -> Result<(f64, &str), UnitError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(UnitError::Empty);
    }
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(end);
    let num: String = num.chars().filter(|&c| c != '_').collect();
    let value: f64 = num
        .parse()
        .map_err(|_| UnitError::NotANumber(text.to_string()))?;
    if !value.is_finite() || value < 0.0 {
        return Err(UnitError::OutOfRange(text.to_string()));
    }
    Ok((value, unit.trim()))
}

/// Parses `40ms`, `1.5s`, `250us`, `250µs`, `100ns`, `2m`, `1h`. A bare `0` is zero.
pub fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    let (value, unit) = split_number(text)?;
    let ns_per = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" | "sec" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        "" if value == 0.0 => 1.0,
        "" => {
            return Err(UnitError::MissingUnit {
                text: text.to_string(),
                number: text.trim().to_string(),
                expected: "ns, us, ms, s, m, h",
            })
        }
        _ => {
            return Err(UnitError::UnknownUnit {
                text: text.to_string(),
                unit: unit.to_string(),
                expected: "ns, us, ms, s, m, h",
            })
        }
    };
    let ns = value * ns_per;
    if ns > u64::MAX as f64 {
        return Err(UnitError::OutOfRange(text.to_string()));
    }
    Ok(Duration::from_nanos(ns.round() as u64))
}

/// Parses a size in bytes: `1500`, `64KiB`, `1MB`, `4k`.
pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    let (value, unit) = split_number(text)?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "kib" => 1024.0,
        "m" | "mb" => 1e6,
        "mib" => 1024.0 * 1024.0,
        "g" | "gb" => 1e9,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => {
            return Err(UnitError::UnknownUnit {
                text: text.to_string(),
                unit: unit.to_string(),
                expected: "B, KB, KiB, MB, MiB, GB, GiB",
            })
        }
    };
    let bytes = value * mult;
    if bytes > u64::MAX as f64 {
        return Err(UnitError::OutOfRange(text.to_string()));
    }
    Ok(bytes.round() as u64)
}

/// Parses a rate in bits per second: `10mbit`, `1gbit`, `512kbit`, or bytes: `1MB/s`, `64KiB/s`.
pub fn parse_rate_bps(text: &str) -> Result<u64, UnitError> {
    let t = text.trim();
    if let Some(bytes) = t.strip_suffix("/s") {
        return parse_size(bytes).map(|b| b.saturating_mul(8));
    }
    let (value, unit) = split_number(t)?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "bit" | "bps" => 1.0,
        "kbit" | "kbps" => 1e3,
        "mbit" | "mbps" => 1e6,
        "gbit" | "gbps" => 1e9,
        _ => {
            return Err(UnitError::UnknownUnit {
                text: text.to_string(),
                unit: unit.to_string(),
                expected: "bit, kbit, mbit, gbit, or a size per second such as 1MB/s",
            })
        }
    };
    Ok((value * mult).round() as u64)
}

/// Prints a duration the way a person reads it: `40.1 ms`, `312 µs`, `1.52 s`.
pub fn fmt_duration(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    if ns >= 10e9 {
        format!("{:.1} s", ns / 1e9)
    } else if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 100e6 {
        format!("{:.0} ms", ns / 1e6)
    } else if ns >= 1e6 {
        format!("{:.1} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.0} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// A count with thousands separators, the way a person reads it: `1,204`.
pub fn fmt_count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Milliseconds as a float, for JSON and arithmetic in reports.
pub fn ms(d: Duration) -> f64 {
    d.as_nanos() as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts() {
        for (n, want) in [
            (0, "0"),
            (999, "999"),
            (1000, "1,000"),
            (1204, "1,204"),
            (123_456_789, "123,456,789"),
            (u64::MAX, "18,446,744,073,709,551,615"),
        ] {
            assert_eq!(fmt_count(n), want);
        }
    }

    #[test]
    fn durations() {
        let cases = [
            ("40ms", 40_000_000u64),
            ("1.5s", 1_500_000_000),
            ("250us", 250_000),
            ("250µs", 250_000),
            ("100ns", 100),
            ("2m", 120_000_000_000),
            ("0", 0),
            (" 15ms ", 15_000_000),
        ];
        for (text, ns) in cases {
            assert_eq!(
                parse_duration(text).unwrap().as_nanos() as u64,
                ns,
                "{text}"
            );
        }
        assert!(matches!(
            parse_duration("40"),
            Err(UnitError::MissingUnit { .. })
        ));
        assert_eq!(
            parse_duration("15").unwrap_err().to_string(),
            "`15` has no unit: write `15s` (or `15ms`; units: ns, us, ms, s, m, h)"
        );
        assert!(matches!(
            parse_duration("40 parsecs"),
            Err(UnitError::UnknownUnit { .. })
        ));
        assert!(matches!(
            parse_duration("ms"),
            Err(UnitError::NotANumber(_))
        ));
        assert!(matches!(parse_duration(""), Err(UnitError::Empty)));
    }

    #[test]
    fn sizes_and_rates() {
        assert_eq!(parse_size("64KiB").unwrap(), 65536);
        assert_eq!(parse_size("1500").unwrap(), 1500);
        assert_eq!(parse_size("1MB").unwrap(), 1_000_000);
        assert_eq!(parse_rate_bps("10mbit").unwrap(), 10_000_000);
        assert_eq!(parse_rate_bps("1MB/s").unwrap(), 8_000_000);
        assert!(parse_size("12 parsecs").is_err());
    }

    #[test]
    fn printing() {
        assert_eq!(fmt_duration(Duration::from_micros(40_100)), "40.1 ms");
        assert_eq!(fmt_duration(Duration::from_micros(312)), "312 µs");
        assert_eq!(fmt_duration(Duration::from_millis(1520)), "1.52 s");
    }
}
