//! `run --baseline FILE.json`: a report saved by an earlier `--save`, read back, checked to
//! measure the same thing (script, scenario paths), and compared scenario by scenario.
//!
//! What is only less comparable (another target, another load) is said as warnings in the
//! table; what measures something else (another script, no scenario in common, another
//! `wan:` path) is refused before any work.

use std::path::Path;

use anyhow::{anyhow, bail, Context};
use serde::Deserialize;
use tcpdoctor_core::run::{Comparison, Figures, RunReport, RunSettings, Scenario};

#[derive(Deserialize)]
pub(crate) struct SavedScenario {
    pub name: String,
    /// Absent in reports saved before scenarios recorded their definition.
    #[serde(default)]
    definition: Option<String>,
    figures: Figures,
    /// Absent in reports saved before runs were traced (those were not).
    #[serde(default)]
    syscalls: Option<SavedTrace>,
}

/// Of a saved scenario's `syscalls`, whether its server was traced.
#[derive(Deserialize)]
struct SavedTrace {
    status: SavedTraceStatus,
}

#[derive(Deserialize)]
struct SavedTraceStatus {
    state: String,
}

impl SavedScenario {
    fn traced(&self) -> bool {
        self.syscalls
            .as_ref()
            .is_some_and(|t| t.status.state == "traced")
    }
}

/// Whether a scenario's server was traced from its start (its figures carry the tracer's cost).
fn traced_now(s: &tcpdoctor_core::run::ScenarioResult) -> bool {
    s.syscalls
        .as_ref()
        .is_some_and(|t| matches!(t.status, tcpdoctor_core::syscalls::TraceStatus::Traced))
}

/// Refuses a baseline whose scenario of the same name is another path: a `wan:` definition
/// that differs, or a `wan:` scenario saved before `wan:` became a real path (it was the
/// delaying hop, now `proxy-delay:`).
pub(crate) fn definitions_fit(
    saved: &[SavedScenario],
    now: &[Scenario],
    file: &str,
) -> anyhow::Result<()> {
    for s in now {
        let Some(b) = saved.iter().find(|b| b.name == s.name) else {
            continue;
        };
        let then = b.definition.clone().unwrap_or_else(|| {
            if b.name.starts_with("wan:") {
                format!("proxy-delay:{} (a delaying hop)", &b.name[4..])
            } else {
                b.name.clone()
            }
        });
        let today = s.definition();
        if then != today {
            bail!(
                "--baseline {file}: scenario {} was {then} in the baseline and is {today} now: \
                 another path, not comparable (save a new baseline with --save)",
                s.name
            );
        }
    }
    Ok(())
}

/// What a saved report says it measured: enough to tell a baseline of another target,
/// script or scenario set.
#[derive(Deserialize)]
pub(crate) struct SavedSettings {
    target: String,
    script: String,
    #[serde(default)]
    script_digest: Option<String>,
    scenarios: Vec<String>,
    requests: u64,
    connections: u64,
    /// Absent in reports saved before `pipeline` was recorded: those ran with 1.
    #[serde(default = "one")]
    pipeline: u64,
    #[serde(default = "one")]
    repeat: u64,
}

fn one() -> u64 {
    1
}

#[derive(Deserialize)]
pub(crate) struct SavedReport {
    schema_version: u32,
    pub settings: SavedSettings,
    pub scenarios: Vec<SavedScenario>,
}

pub(crate) fn load_baseline(path: &Path) -> anyhow::Result<SavedReport> {
    let name = path.display();
    let text = std::fs::read_to_string(path).with_context(|| format!("--baseline {name}"))?;
    let saved: SavedReport = serde_json::from_str(&text).map_err(|e| {
        anyhow!(
            "--baseline {name}: not a saved run report (line {}, column {}: {e}); write one \
             with `tcpdoctor run … --save FILE.json`",
            e.line(),
            e.column()
        )
    })?;
    if saved.schema_version != tcpdoctor_core::run::RUN_SCHEMA_VERSION {
        bail!(
            "--baseline {name}: schema_version {} (this tcpdoctor reads {})",
            saved.schema_version,
            tcpdoctor_core::run::RUN_SCHEMA_VERSION
        );
    }
    Ok(saved)
}

/// Refuses a baseline of another script, or with no scenario in common (its figures measure
/// something else); returns the warnings for what is only less comparable (another target,
/// another scenario set, other request or connection counts).
pub(crate) fn baseline_fits(
    saved: &SavedSettings,
    now: &RunSettings,
    file: &str,
) -> anyhow::Result<Vec<String>> {
    let digest_differs = matches!(
        (&saved.script_digest, &now.script_digest),
        (Some(a), Some(b)) if a != b
    );
    let with_digest = |name: &str, d: &Option<String>| match d {
        Some(d) => format!("`{name}` (source digest {d})"),
        None => format!("`{name}`"),
    };
    if saved.script != now.script || digest_differs {
        bail!(
            "--baseline {file}: saved from script {}, this run drives {}: the figures measure \
             other exchanges; save a baseline of this script with --save",
            with_digest(&saved.script, &saved.script_digest),
            with_digest(&now.script, &now.script_digest),
        );
    }
    if !now.scenarios.iter().any(|n| saved.scenarios.contains(n)) {
        bail!(
            "--baseline {file}: saved with --scenarios {}, this run has {}: no scenario to \
             compare; run the same scenarios (or save a new baseline with --save)",
            saved.scenarios.join(","),
            now.scenarios.join(",")
        );
    }
    let mut warnings = Vec::new();
    let only = |a: &[String], b: &[String]| {
        a.iter()
            .filter(|n| !b.contains(n))
            .cloned()
            .collect::<Vec<_>>()
    };
    let (gone, new) = (
        only(&saved.scenarios, &now.scenarios),
        only(&now.scenarios, &saved.scenarios),
    );
    if !gone.is_empty() || !new.is_empty() {
        warnings.push(format!(
            "another scenario set: the baseline has {}, this run {} (compared: the scenarios \
             both have)",
            saved.scenarios.join(","),
            now.scenarios.join(",")
        ));
    }
    if saved.target != now.target {
        warnings.push(format!(
            "the baseline drove {}, this run {}: another target",
            saved.target, now.target
        ));
    }
    for (what, then, today) in [
        ("--requests", saved.requests, now.requests),
        ("--connections", saved.connections, now.connections),
        ("--pipeline", saved.pipeline, now.pipeline),
    ] {
        if then != today {
            warnings.push(format!(
                "the baseline ran {what} {then}, this run {today}: figures from another load"
            ));
        }
    }
    if saved.repeat != now.repeat {
        warnings.push(format!(
            "the baseline ran --repeat {}, this run {}: the noise each side can show differs \
             (a change is judged by runs only with --repeat 3 or more on both sides)",
            saved.repeat, now.repeat
        ));
    }
    Ok(warnings)
}

/// Tables of each scenario against the same scenario in the baseline.
pub(crate) fn compare(
    report: &mut RunReport,
    baseline: &[SavedScenario],
    file: &str,
    warnings: &[String],
) {
    for s in &report.scenarios {
        if let Some(b) = baseline.iter().find(|b| b.name == s.name) {
            let mut c = Comparison::of(
                &format!("{}: baseline → now", s.name),
                (file, &b.figures),
                ("now", &s.figures),
            );
            c.scenario = s.name.clone();
            c.warnings = warnings.to_vec();
            let (then, now) = (b.traced(), traced_now(s));
            if then != now {
                let side = |t: bool| if t { "traced" } else { "not traced" };
                c.warnings.push(format!(
                    "the baseline's server was {}, this run's {}: its timing and CPU figures \
                     carry the tracer's cost (a stop per traced call) on one side only; run \
                     both sides alike (--trace on both, or neither)",
                    side(then),
                    side(now)
                ));
            }
            report.comparisons.push(c);
        }
    }
}
