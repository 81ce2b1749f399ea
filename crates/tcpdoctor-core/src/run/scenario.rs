//! Scenarios: the named paths between the driver and the target that `run` compares.

use std::time::Duration;

use crate::units::{fmt_duration, parse_duration};

/// The kinds of path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScenarioKind {
    /// The driver connects to the target itself.
    Direct,
    /// Through a transparent hop: Nagle off on both legs, every chunk re-emitted as read.
    Proxy,
    /// Through a hop that re-emits each chunk with Nagle on towards the driver: the middlebox
    /// of PHYSICS §3.
    ProxyNagle,
    /// Through a hop that delays every chunk by the given time each way.
    Wan(Duration),
}

/// One scenario as the user named it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scenario {
    pub name: String,
    pub kind: ScenarioKind,
}

/// The names `--scenarios` accepts, for help and errors.
pub const SCENARIO_NAMES: &str = "direct, proxy, proxy-nagle, wan:DELAY (e.g. wan:15ms)";

impl Scenario {
    pub fn parse(text: &str) -> Result<Scenario, String> {
        let t = text.trim();
        let kind = match t {
            "direct" => ScenarioKind::Direct,
            "proxy" => ScenarioKind::Proxy,
            "proxy-nagle" => ScenarioKind::ProxyNagle,
            _ => match t.strip_prefix("wan:") {
                Some(d) => {
                    let d = parse_duration(d).map_err(|e| format!("scenario `{t}`: {e}"))?;
                    if d.is_zero() || d > Duration::from_secs(10) {
                        return Err(format!(
                            "scenario `{t}`: the delay must be above 0 and at most 10s"
                        ));
                    }
                    ScenarioKind::Wan(d)
                }
                None => {
                    return Err(format!(
                        "unknown scenario `{t}` (expected one of: {SCENARIO_NAMES})"
                    ))
                }
            },
        };
        Ok(Scenario {
            name: t.to_string(),
            kind,
        })
    }

    /// A comma-separated list; names must be unique.
    pub fn parse_list(text: &str) -> Result<Vec<Scenario>, String> {
        let mut out: Vec<Scenario> = Vec::new();
        for part in text.split(',').filter(|p| !p.trim().is_empty()) {
            let s = Scenario::parse(part)?;
            if out.iter().any(|o| o.name == s.name) {
                return Err(format!("scenario `{}` is listed twice", s.name));
            }
            out.push(s);
        }
        if out.is_empty() {
            return Err(format!("no scenario given (expected: {SCENARIO_NAMES})"));
        }
        Ok(out)
    }

    /// The path in words.
    pub fn describe(&self) -> String {
        match self.kind {
            ScenarioKind::Direct => "driver → server".into(),
            ScenarioKind::Proxy => "driver → proxy (Nagle off, chunks as read) → server".into(),
            ScenarioKind::ProxyNagle => {
                "driver → proxy (Nagle ON towards the driver, chunks as read) → server".into()
            }
            ScenarioKind::Wan(d) => format!(
                "driver → proxy (+{} each way, round trip +{}) → server",
                fmt_duration(d),
                fmt_duration(d * 2)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_names_users_type() {
        let v = Scenario::parse_list("direct, proxy,proxy-nagle,wan:15ms").unwrap();
        let kinds: Vec<ScenarioKind> = v.iter().map(|s| s.kind).collect();
        assert_eq!(
            kinds,
            vec![
                ScenarioKind::Direct,
                ScenarioKind::Proxy,
                ScenarioKind::ProxyNagle,
                ScenarioKind::Wan(Duration::from_millis(15))
            ]
        );
        assert_eq!(v[3].name, "wan:15ms");
        assert!(v[3].describe().contains("+30.0 ms"), "{}", v[3].describe());
    }

    #[test]
    fn rejects_what_it_cannot_run() {
        for (text, needle) in [
            ("lan", "unknown scenario `lan`"),
            ("wan:", "scenario `wan:`"),
            ("wan:fast", "scenario `wan:fast`"),
            ("wan:0ms", "above 0"),
            ("direct,direct", "listed twice"),
            (" , ", "no scenario"),
        ] {
            let e = Scenario::parse_list(text).unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }
}
