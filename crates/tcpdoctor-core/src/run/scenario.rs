//! Scenarios: the named paths between the driver and the target that `run` compares.

use std::time::Duration;

use crate::impair::PathSpec;
use crate::units::{fmt_duration, parse_duration};

/// The kinds of path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScenarioKind {
    /// The driver connects to the target itself.
    Direct,
    /// Through a transparent hop: Nagle off on both legs, every chunk re-emitted as read.
    Proxy,
    /// Through a hop that re-emits each chunk with Nagle on towards the driver: the middlebox
    /// of PHYSICS §3.
    ProxyNagle,
    /// Through a hop that delays every chunk by the given time each way (`proxy-delay:D`): the
    /// hop terminates TCP, so neither end's kernel sees the delay.
    ProxyDelay(Duration),
    /// A real path (`wan:…`): the server in a far network namespace, the driver in a near one,
    /// a delay line moving IP packets between them through the path definition's impairments.
    Wan(Box<PathSpec>),
}

/// One scenario as the user named it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scenario {
    pub name: String,
    pub kind: ScenarioKind,
}

/// The names `--scenarios` accepts, for help and errors.
pub const SCENARIO_NAMES: &str = "direct, proxy, proxy-nagle, proxy-delay:DELAY (e.g. \
                                  proxy-delay:15ms), wan:PATH (e.g. wan:15ms, wan:15ms,loss=1%)";

impl Scenario {
    pub fn parse(text: &str) -> Result<Scenario, String> {
        let t = text.trim();
        let kind = match t {
            "direct" => ScenarioKind::Direct,
            "proxy" => ScenarioKind::Proxy,
            "proxy-nagle" => ScenarioKind::ProxyNagle,
            _ if t.starts_with("wan:") => ScenarioKind::Wan(Box::new(
                PathSpec::parse(t).map_err(|e| format!("scenario `{t}`: {e}"))?,
            )),
            _ => match t.strip_prefix("proxy-delay:") {
                Some(d) => {
                    let d = parse_duration(d).map_err(|e| format!("scenario `{t}`: {e}"))?;
                    if d.is_zero() || d > Duration::from_secs(10) {
                        return Err(format!(
                            "scenario `{t}`: the delay must be above 0 and at most 10s"
                        ));
                    }
                    ScenarioKind::ProxyDelay(d)
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

    /// A comma-separated list; names must be unique. A `wan:` path definition keeps its own
    /// options: `direct,wan:15ms,loss=1%,proxy` is three scenarios.
    pub fn parse_list(text: &str) -> Result<Vec<Scenario>, String> {
        let mut items: Vec<String> = Vec::new();
        for part in text.split(',') {
            match items.last_mut() {
                Some(last)
                    if last.starts_with("wan:")
                        && !part.trim().starts_with("wan:")
                        && PathSpec::continues(part) =>
                {
                    last.push(',');
                    last.push_str(part.trim());
                }
                _ => items.push(part.trim().to_string()),
            }
        }
        let mut out: Vec<Scenario> = Vec::new();
        for part in items.iter().filter(|p| !p.is_empty()) {
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

    /// What the path is, exactly: a saved report records it, and `--baseline` compares only
    /// scenarios whose definitions are equal (the canonical `wan:` form, defaults filled in).
    pub fn definition(&self) -> String {
        match &self.kind {
            ScenarioKind::Wan(spec) => spec.to_string(),
            _ => self.name.clone(),
        }
    }

    /// The path in words.
    pub fn describe(&self) -> String {
        match &self.kind {
            ScenarioKind::Direct => "driver → server".into(),
            ScenarioKind::Proxy => "driver → proxy (Nagle off, chunks as read) → server".into(),
            ScenarioKind::ProxyNagle => {
                "driver → proxy (Nagle ON towards the driver, chunks as read) → server".into()
            }
            ScenarioKind::ProxyDelay(d) => format!(
                "driver → proxy (+{} each way, round trip +{}) → server",
                fmt_duration(*d),
                fmt_duration(*d * 2)
            ),
            ScenarioKind::Wan(spec) => format!(
                "driver → a real path ({spec}: round trip {}; kernel TCP at both ends) → server \
                 in a far network namespace",
                fmt_duration(spec.base_rtt())
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_names_users_type() {
        let v = Scenario::parse_list(
            "direct, proxy,proxy-nagle,proxy-delay:15ms,wan:15ms,loss=1%,wan:c2s=40ms,s2c=5ms",
        )
        .unwrap();
        let names: Vec<&str> = v.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "direct",
                "proxy",
                "proxy-nagle",
                "proxy-delay:15ms",
                "wan:15ms,loss=1%",
                "wan:c2s=40ms,s2c=5ms"
            ]
        );
        assert_eq!(
            v[3].kind,
            ScenarioKind::ProxyDelay(Duration::from_millis(15))
        );
        assert!(v[3].describe().contains("+30.0 ms"), "{}", v[3].describe());
        let ScenarioKind::Wan(spec) = &v[4].kind else {
            panic!("{:?}", v[4].kind)
        };
        assert_eq!(spec.base_rtt(), Duration::from_millis(30));
        assert!(
            v[4].definition().starts_with("wan:15ms"),
            "{}",
            v[4].definition()
        );
        assert!(v[4].describe().contains("kernel TCP at both ends"));
        assert_eq!(v[0].definition(), "direct");
    }

    #[test]
    fn rejects_what_it_cannot_run() {
        for (text, needle) in [
            ("lan", "unknown scenario `lan`"),
            ("wan:", "scenario `wan:`"),
            ("wan:fast", "scenario `wan:fast`"),
            ("wan:15ms,loss=1", "loss=1: give a percentage"),
            ("proxy-delay:0ms", "above 0"),
            ("proxy-delay:fast", "scenario `proxy-delay:fast`"),
            ("direct,direct", "listed twice"),
            (" , ", "no scenario"),
        ] {
            let e = Scenario::parse_list(text).unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }
}
