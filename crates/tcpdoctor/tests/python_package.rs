//! The Python wheel (issue 30): built from this checkout with maturin (`pyproject.toml` at the
//! root, `bindings = "bin"`), installed into a fresh venv with no index (the wheel and a
//! pytest fetched beforehand), and the package's own suite (`python/tests/`) run there with
//! pytest against real servers. The test fails with pytest's output.
//!
//! The wheel is built in the dev profile into this test run's own target directory, stored
//! uncompressed (the binary is stripped, 19.7 MB; deflating it only costs time): cargo reuses
//! every dependency `cargo test` built with the same features. Those a dev-dependency widened
//! (serde_json, regex, toml, tcpdoctor-core…: `cargo test` unifies dev-dependency features,
//! a plain build of the binary does not) are compiled once more — measured 37 s of CPU
//! (1 min 40 s on a machine loaded 7–8), against several minutes for a release build with
//! fat LTO; a second run compiles nothing. That build of the binary lands on the path the other
//! tests run (`target/debug/tcpdoctor`), so the tests' own is held aside and put back
//! ([`KeepBinary`]). The build venv (maturin, pytest's wheels) is kept
//! under the target directory for the next run; only the first run downloads.
//!
//! Skips with the reason where python3, venv or PyPI is missing, unless
//! `TCPDOCTOR_REQUIRE_TOOLS` is set (CI), where it fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

const TEST: &str = "python_package";

/// Written into the build venv once maturin and pytest's wheels are in it.
const READY: &str = "tcpdoctor-ready";

fn unavailable(why: &str) {
    common::skip_unless_required("TCPDOCTOR_REQUIRE_TOOLS", TEST, why);
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn last_line(o: &Output) -> String {
    text(o).lines().last().unwrap_or("").trim().to_string()
}

/// The directory the test binaries were built into (`…/target`), from this test's binary.
fn target_dir() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_tcpdoctor"));
    // target/debug/tcpdoctor (or target/<triple>/debug/tcpdoctor)
    let profile_dir = bin.parent().expect("profile dir");
    let up = profile_dir.parent().expect("target dir");
    if up.join("CACHEDIR.TAG").exists() || up.file_name().is_some_and(|n| n == "target") {
        up.to_path_buf()
    } else {
        up.parent().unwrap_or(up).to_path_buf()
    }
}

/// The build venv: maturin installed, pytest and its dependencies downloaded as wheels into
/// `wheelhouse/`. Made once (aside, renamed into place) and kept; None when it cannot be made.
fn build_venv() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("python-package");
    let dir = root.join("build-venv");
    if dir.join(READY).exists() {
        return Some(dir);
    }
    std::fs::create_dir_all(&root).expect("target dir");
    let tmp = root.join(format!("build-venv.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    match Command::new("python3")
        .args(["-m", "venv"])
        .arg(&tmp)
        .output()
    {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            unavailable(&format!("python3 -m venv: {}", last_line(&o)));
            return None;
        }
        Err(e) => {
            unavailable(&format!("python3: {e}"));
            return None;
        }
    }
    let pip = |args: &[&str]| {
        Command::new(tmp.join("bin/pip"))
            .args(["-q", "--disable-pip-version-check"])
            .args(args)
            .output()
            .expect("pip runs")
    };
    let wheelhouse = tmp.join("wheelhouse");
    let wheelhouse = wheelhouse.to_str().expect("utf-8 path");
    for args in [
        &["install", "maturin>=1.5,<2"][..],
        &["download", "-d", wheelhouse, "pytest"][..],
    ] {
        let o = pip(args);
        if !o.status.success() {
            let _ = std::fs::remove_dir_all(&tmp);
            unavailable(&format!("pip {}: {}", args.join(" "), last_line(&o)));
            return None;
        }
    }
    std::fs::write(tmp.join(READY), "maturin, pytest wheels").expect("mark the venv ready");
    if std::fs::rename(&tmp, &dir).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    Some(dir)
}

/// Keeps the binary the other tests run (`target/debug/tcpdoctor`) while maturin builds: cargo
/// copies its own build of the binary — other features (no dev-dependency widened them), and
/// stripped — to that same path, and the test binaries that run after this one in the same
/// `cargo test` would run that one. A hard link holds the tests' binary (the same file system,
/// under the target directory); dropping this renames it back over the path.
struct KeepBinary {
    saved: PathBuf,
}

impl KeepBinary {
    fn new() -> KeepBinary {
        let bin = Path::new(env!("CARGO_BIN_EXE_tcpdoctor"));
        let saved = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("tcpdoctor-kept-{}", std::process::id()));
        let _ = std::fs::remove_file(&saved);
        std::fs::hard_link(bin, &saved)
            .unwrap_or_else(|e| panic!("hard link {} aside: {e}", bin.display()));
        KeepBinary { saved }
    }
}

impl Drop for KeepBinary {
    fn drop(&mut self) {
        let bin = Path::new(env!("CARGO_BIN_EXE_tcpdoctor"));
        if let Err(e) = std::fs::rename(&self.saved, bin) {
            let msg = format!("put {} back: {e}", bin.display());
            if std::thread::panicking() {
                eprintln!("{msg}");
            } else {
                panic!("{msg}");
            }
        }
    }
}

fn inode(p: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .ino()
}

/// PATH with cargo's directory first (maturin runs `cargo`).
fn path_with_cargo() -> std::ffi::OsString {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(cargo) = std::env::var_os("CARGO") {
        if let Some(d) = Path::new(&cargo).parent() {
            dirs.push(d.to_path_buf());
        }
    }
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(dirs).expect("PATH")
}

#[test]
fn the_wheel_installs_into_a_fresh_venv_and_its_pytest_suite_passes() {
    if !common::has_python3(TEST) {
        return;
    }
    let Some(tools) = build_venv() else { return };
    let repo = common::repo().canonicalize().expect("repo");
    let work = common::Scratch::new("python-package");

    // The wheel, from the checkout, in the dev profile and this run's target directory.
    let started = Instant::now();
    let wheels = work.join("wheels");
    let tests_binary = inode(Path::new(env!("CARGO_BIN_EXE_tcpdoctor")));
    let built = {
        let _keep = KeepBinary::new();
        Command::new(tools.join("bin/maturin"))
            .args([
                "build",
                "--profile",
                "dev",
                "--compression-method",
                "stored",
                "--out",
            ])
            .arg(&wheels)
            .current_dir(&repo)
            .env("CARGO_TARGET_DIR", target_dir())
            .env("PATH", path_with_cargo())
            .output()
            .expect("maturin runs")
    };
    assert!(built.status.success(), "maturin build:\n{}", text(&built));
    assert_eq!(
        inode(Path::new(env!("CARGO_BIN_EXE_tcpdoctor"))),
        tests_binary,
        "the other tests' binary is back in place"
    );
    let build_s = started.elapsed().as_secs_f64();
    let wheel = std::fs::read_dir(&wheels)
        .expect("wheels dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .unwrap_or_else(|| panic!("no wheel in {}:\n{}", wheels.display(), text(&built)));
    let name = wheel.file_name().unwrap_or_default().to_string_lossy();
    assert!(
        name.starts_with(&format!(
            "tcpdoctor-{}-py3-none-",
            env!("CARGO_PKG_VERSION")
        )),
        "{name}"
    );

    // A fresh venv, the wheel and pytest installed with no index: nothing downloads from here.
    let started = Instant::now();
    let venv = work.join("venv");
    let made = Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .output()
        .expect("python3 runs");
    assert!(made.status.success(), "venv: {}", text(&made));
    let installed = Command::new(tools.join("bin/python"))
        .args(["-m", "pip", "-q", "--disable-pip-version-check", "--python"])
        .arg(venv.join("bin/python"))
        .args(["install", "--no-index", "--find-links"])
        .arg(tools.join("wheelhouse"))
        .arg("pytest")
        .arg(&wheel)
        .output()
        .expect("pip runs");
    assert!(
        installed.status.success(),
        "pip install:\n{}",
        text(&installed)
    );
    let install_s = started.elapsed().as_secs_f64();
    assert!(
        venv.join("bin/tcpdoctor").is_file(),
        "the wheel put tcpdoctor in the venv's bin"
    );

    // The suite, from the installed package (TCPDOCTOR_EXPECT_WHEEL makes it check so).
    let started = Instant::now();
    let tests = repo.join("python/tests");
    let out = Command::new(venv.join("bin/python"))
        .args(["-m", "pytest", "-p", "no:cacheprovider", "-rs", "-v"])
        .arg("--basetemp")
        .arg(work.join("pytest"))
        .arg(&tests)
        .current_dir(&tests)
        .env("TCPDOCTOR_EXPECT_WHEEL", "1")
        .env("TCPDOCTOR_REPO", &repo)
        .env_remove("TCPDOCTOR_BIN")
        .output()
        .expect("pytest runs");
    let report = text(&out);
    assert!(
        out.status.success(),
        "pytest python/tests failed (exit {:?}):\n{report}",
        out.status.code()
    );
    let summary = report.lines().last().unwrap_or("").to_string();
    assert!(summary.contains(" passed"), "{report}");
    // Skips say why in pytest's -rs lines; shown past the harness's capture, as SKIPPED lines.
    for line in report.lines().filter(|l| l.starts_with("SKIPPED")) {
        common::skipped(&format!("{TEST} (pytest)"), line);
    }
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "{TEST}: wheel {name} built in {build_s:.1} s, installed in {install_s:.1} s, \
         pytest {:.1} s: {summary}",
        started.elapsed().as_secs_f64()
    );
}
