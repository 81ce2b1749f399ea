//! Shared helpers for the end-to-end tests: run the real binary, validate its JSON.

#![allow(dead_code)]

pub mod ab;
pub mod exchange;
pub mod live;
pub mod run;
pub mod trace;
pub mod wan;
pub mod watch;
pub mod zino;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `tcpdoctor ARGS` in the repository, with a temporary directory of its own (`TMPDIR`),
/// removed after: what the command keeps there (a failed `run`'s captures and logs, kept on
/// purpose for a person to read) does not pile up in /tmp, run after run.
pub fn tcpdoctor(args: &[&str]) -> Output {
    tcpdoctor_env(args, &[])
}

/// [`tcpdoctor`] with these environment variables set too.
pub fn tcpdoctor_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let tmp = Scratch::new("cmd");
    Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(args)
        .current_dir(repo())
        .env("TMPDIR", &*tmp)
        .envs(env.iter().copied())
        .output()
        .expect("run tcpdoctor")
}

/// A directory under the temp dir, removed when dropped — kept, and named on stderr, when
/// the test is failing (its files explain what went wrong).
pub struct Scratch(PathBuf);

impl Scratch {
    /// `$TMPDIR/tcpdoctor-test-NAME-PID-N`, empty.
    pub fn new(name: &str) -> Scratch {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let d =
            std::env::temp_dir().join(format!("tcpdoctor-test-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("scratch dir");
        Scratch(d)
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for Scratch {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

/// A file written in a [`Scratch`] of its own, which goes with it.
pub struct ScratchFile {
    path: PathBuf,
    _dir: Scratch,
}

/// Writes `text` to NAME in a new scratch directory tagged `tag`.
pub fn scratch_file(tag: &str, name: &str, text: impl AsRef<[u8]>) -> ScratchFile {
    let dir = Scratch::new(tag);
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write the scratch file");
    ScratchFile { path, _dir: dir }
}

impl std::ops::Deref for ScratchFile {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<std::ffi::OsStr> for ScratchFile {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.path.as_os_str()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept for inspection: {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
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
    validate_with("analyze-report.schema.json", report);
}

/// Whether python3 runs here; else the test skips (or fails where CI requires the tools).
pub fn has_python3(test: &str) -> bool {
    if std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok()
    {
        return true;
    }
    skip_unless_required("TCPDOCTOR_REQUIRE_TOOLS", test, "python3 is not installed");
    false
}

/// Validates `value` against `$defs/<def>` of `schema/<schema_file>`.
pub fn validate_with_def(schema_file: &str, def: &str, value: &serde_json::Value) {
    let schema_text =
        std::fs::read_to_string(repo().join("schema").join(schema_file)).expect("schema file");
    let mut schema: serde_json::Value = serde_json::from_str(&schema_text).expect("schema is JSON");
    schema["$ref"] = serde_json::Value::String(format!("#/$defs/{def}"));
    if let Some(o) = schema.as_object_mut() {
        for k in ["type", "required", "properties", "additionalProperties"] {
            o.remove(k);
        }
    }
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "violates {schema_file} $defs/{def}: {errors:#?}"
    );
}

/// Validates `report` against `schema/<schema_file>`.
pub fn validate_with(schema_file: &str, report: &serde_json::Value) {
    let schema_text =
        std::fs::read_to_string(repo().join("schema").join(schema_file)).expect("schema file");
    let schema: serde_json::Value = serde_json::from_str(&schema_text).expect("schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(report)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "report violates the schema: {errors:#?}");
}

/// Runs `bench --format json ARGS`, validates the report against the schema.
pub fn bench_json(args: &[&str]) -> (Value, i32, String) {
    let mut all = vec!["bench", "--format", "json"];
    all.extend_from_slice(args);
    let out = tcpdoctor(&all);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let code = out.status.code().unwrap_or(-1);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("bench {args:?} (exit {code}) printed no JSON ({e}): {stderr}"));
    validate_with("bench-report.schema.json", &report);
    (report, code, stderr)
}

pub fn run0(r: &Value) -> &Value {
    &r["runs"][0]
}

pub fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

pub fn step<'a>(run: &'a Value, name: &str) -> &'a Value {
    run["steps"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("no step {name} in {}", run["steps"]))
}

/// Says `test` is skipped because `why`, unless the environment variable `flag` (e.g.
/// `TCPDOCTOR_REQUIRE_TOOLS`) is set and not `0` — then what is missing fails the test: CI
/// (`.ci/run`) sets each flag for what it installs.
#[allow(dead_code)]
pub fn skip_unless_required(flag: &str, test: &str, why: &str) {
    let required = std::env::var(flag).is_ok_and(|v| v != "0");
    assert!(!required, "{test}: {flag} is set but {why}");
    skipped(test, why);
}

/// The tests of this binary that said they skipped.
static SKIPPED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Says, past the test harness's output capture (it captures `eprintln!`, not writes to the
/// stream), that `test` did not run here and why; and, once the binary's tests are done,
/// counts the skipped ones in a line under the harness's own `test result:` line, so a skip
/// is never a silent pass.
#[allow(dead_code)]
pub fn skipped(test: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
    let mut list = SKIPPED.lock().unwrap_or_else(|e| e.into_inner());
    if list.is_empty() {
        // SAFETY: registers a plain function with no preconditions, run once at exit.
        unsafe {
            libc::atexit(count_skipped);
        }
    }
    list.push(test.to_string());
}

extern "C" fn count_skipped() {
    use std::io::Write;
    let list = SKIPPED.lock().unwrap_or_else(|e| e.into_inner());
    let _ = writeln!(
        std::io::stderr(),
        "tcpdoctor tests: {} skipped in this binary (passed without running here): {}",
        list.len(),
        list.join(", ")
    );
}

/// Whether `text` (stderr, or a report's reasons) says this machine cannot build a WAN path
/// for this user: user namespaces off or restricted, no TUN device or not open to the user.
/// A test that needs the path skips then, unless `TCPDOCTOR_REQUIRE_WAN=1` (CI), where it fails.
#[allow(dead_code)]
pub fn wan_unavailable(test: &str, text: &str) -> bool {
    let unavailable = [
        "cannot create a user namespace",
        "in the new user namespace",
        "opening /dev/net/tun",
        "no WAN path here",
    ]
    .iter()
    .any(|m| text.contains(m));
    if unavailable {
        skip_unless_required(
            "TCPDOCTOR_REQUIRE_WAN",
            test,
            &format!("no WAN path here: {text}"),
        );
    }
    unavailable
}

/// `name` on `PATH`, or in /usr/sbin (where Debian puts nginx and lighttpd for non-root
/// users' `PATH`); None when it is not installed.
#[allow(dead_code)]
pub fn installed(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}
