//! Probabilities as users write them, in percent: `loss=1%`, `0.25%`.
//!
//! Rules:
//! 1. A probability is a whole number of millionths (1% = 10 000, 0.0001% = 1), so two specs
//!    that read the same compare equal and print back exactly as parsed.
//! 2. A percentage needs its `%` (a bare `1` could mean 1% or 100%) and at most four decimals.

use std::fmt;

/// A probability in millionths (1% = 10 000), so a spec compares and prints exactly.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Probability(u32);

impl Probability {
    pub const ZERO: Probability = Probability(0);
    pub const ONE: Probability = Probability(1_000_000);

    /// `millionths` above one million is one.
    pub fn from_millionths(millionths: u32) -> Probability {
        Probability(millionths.min(1_000_000))
    }

    pub fn millionths(self) -> u32 {
        self.0
    }

    pub fn as_f64(self) -> f64 {
        f64::from(self.0) / 1e6
    }

    /// Parses a percentage with at most four decimals: `1%`, `0.25%`, `100%`.
    pub fn parse_percent(text: &str) -> Result<Probability, String> {
        let Some(num) = text.strip_suffix('%') else {
            return Err("give a percentage, e.g. 1%".into());
        };
        let (int, frac) = num.split_once('.').unwrap_or((num, "0"));
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(int) || !digits(frac) {
            return Err(format!("`{text}` is not a percentage such as 1% or 0.5%"));
        }
        if frac.len() > 4 {
            return Err(format!(
                "`{text}`: at most four decimals (0.0001% is the finest)"
            ));
        }
        let int: u64 = int.parse().map_err(|_| format!("`{text}` is above 100%"))?;
        let frac_millionths: u64 = format!("{frac:0<4}").parse().unwrap_or(0);
        let millionths = int.saturating_mul(10_000).saturating_add(frac_millionths);
        if millionths > 1_000_000 {
            return Err(format!("`{text}` is above 100%"));
        }
        Ok(Probability(millionths as u32))
    }
}

impl fmt::Display for Probability {
    /// The shortest percentage that parses back to the same value: `1%`, `0.25%`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (int, frac) = (self.0 / 10_000, self.0 % 10_000);
        if frac == 0 {
            return write!(f, "{int}%");
        }
        let frac = format!("{frac:04}");
        write!(f, "{int}.{}%", frac.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pct(s: &str) -> Probability {
        Probability::parse_percent(s).unwrap()
    }

    #[test]
    fn percentages_parse_and_print_exactly() {
        for (text, millionths, shown) in [
            ("1%", 10_000, "1%"),
            ("0.5%", 5_000, "0.5%"),
            ("0.0001%", 1, "0.0001%"),
            ("12.50%", 125_000, "12.5%"),
            ("100%", 1_000_000, "100%"),
            ("0%", 0, "0%"),
        ] {
            let p = pct(text);
            assert_eq!(p.millionths(), millionths, "{text}");
            assert_eq!(p.to_string(), shown);
            assert_eq!(pct(shown), p);
        }
        for bad in [
            "1",
            "%",
            "1.%",
            "-1%",
            "101%",
            "0.00001%",
            "1e2%",
            "99999999999999999999%",
        ] {
            assert!(Probability::parse_percent(bad).is_err(), "{bad}");
        }
    }
}
