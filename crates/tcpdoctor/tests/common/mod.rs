//! Shared helpers for the end-to-end tests: run the real binary, validate its JSON.

#![allow(dead_code)]

pub mod exchange;
pub mod live;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn tcpdoctor(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("run tcpdoctor")
}

/// Runs `analyze --format json` and returns the report, validated against the schema.
pub fn analyze_json(file: &Path) -> (serde_json::Value, i32) {
    let out = tcpdoctor(&[
        "analyze",
        "--format",
        "json",
        file.to_str().expect("utf-8 path"),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() == Some(0),
        "analyze {} exited {:?}: {stderr}",
        file.display(),
        out.status.code()
    );
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("analyze --format json prints JSON");
    validate(&report);
    (report, out.status.code().unwrap_or(-1))
}

pub fn validate(report: &serde_json::Value) {
    let schema_text = std::fs::read_to_string(repo().join("schema/analyze-report.schema.json"))
        .expect("schema file");
    let schema: serde_json::Value = serde_json::from_str(&schema_text).expect("schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(report)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "report violates the schema: {errors:#?}");
}
