//! Helpers of the `ab` end-to-end tests.

use std::path::Path;

use serde_json::Value;

/// `tcpdoctor ARGS` in `dir` (also its TMPDIR): the JSON on stdout (validated against
/// schema/ab-report.schema.json when there is one), the exit code and stderr.
pub fn tcpdoctor_in(dir: &Path, args: &[&str]) -> (Value, i32, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(args)
        .current_dir(dir)
        .env("TMPDIR", dir)
        .output()
        .expect("run tcpdoctor");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    if !v.is_null() {
        super::validate_with("ab-report.schema.json", &v);
    }
    (v, out.status.code().unwrap_or(-1), stderr)
}

/// The report's figure `name`.
pub fn figure<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["figures"]
        .as_array()
        .expect("figures")
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no figure {name}: {:#}", r["figures"]))
}

/// The command lines (NUL-separated, as /proc has them) of running processes that contain
/// `marker`: what a test left running (read from /proc: no pgrep needed).
#[allow(dead_code)]
pub fn running_with(marker: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).into_owned())
        .filter(|c| c.contains(marker))
        .collect()
}
