//! Real Zino 2 from PyPI, for the tests that log in and walk its cases: each version in its own
//! venv (created on first use: `python3 -m venv`, `pip install zino==VERSION`, kept under the
//! target directory for the next run), started offline from `specimens/zino_fixture.py` (no SNMP
//! device, no SNMP agent, no trap port). Stock zino, unpatched: its API port is fixed at 8001
//! on all addresses, so it runs in its own network namespace (`run --sandbox`).
//!
//! Where python3, venv or PyPI is missing the tests skip with the reason, unless
//! `TCPDOCTOR_REQUIRE_ZINO=1` (CI), where they fail.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Zino's legacy API port: fixed, on all addresses.
pub const PORT: u16 = 8001;

/// Written into a venv once zino is installed in it.
const READY: &str = "tcpdoctor-ready";

fn unavailable(test: &str, why: &str) -> Option<PathBuf> {
    super::skip_unless_required(
        "TCPDOCTOR_REQUIRE_ZINO",
        test,
        &format!("no real Zino here: {why}"),
    );
    None
}

/// The venv holding `zino==version`, created if needed; None (the reason printed) when it
/// cannot be made here.
pub fn venv(version: &str, test: &str) -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("zino");
    let dir = root.join(version);
    if dir.join(READY).exists() {
        return Some(dir);
    }
    std::fs::create_dir_all(&root).expect("target dir");
    // Built aside and renamed into place: a test running at the same time never sees half a
    // venv. (A venv's entry-point scripts name its old path: zino is started as
    // `python -m zino.zino`, which a moved venv runs as well.)
    let tmp = root.join(format!("{version}.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&tmp)
        .output();
    match made {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            return unavailable(
                test,
                &format!(
                    "python3 -m venv: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ),
            )
        }
        Err(e) => return unavailable(test, &format!("python3: {e}")),
    }
    let pip = Command::new(tmp.join("bin/pip"))
        .args(["install", "-q", "--disable-pip-version-check"])
        .arg(format!("zino=={version}"))
        .output()
        .expect("pip runs");
    if !pip.status.success() {
        let _ = std::fs::remove_dir_all(&tmp);
        let err = String::from_utf8_lossy(&pip.stderr);
        let last = err.lines().last().unwrap_or("").trim().to_string();
        return unavailable(test, &format!("pip install zino=={version}: {last}"));
    }
    std::fs::write(tmp.join(READY), version).expect("mark the venv ready");
    if std::fs::rename(&tmp, &dir).is_err() {
        // Another test made it first.
        let _ = std::fs::remove_dir_all(&tmp);
    }
    Some(dir)
}

/// An offline Zino working directory with `cases` open cases, user `bench`, secret
/// `bench-secret`; returns the server command that starts stock zino there.
pub fn fixture(venv: &Path, dir: &Path, cases: u32) -> String {
    let script = super::repo().join("specimens/zino_fixture.py");
    let out = Command::new(venv.join("bin/python"))
        .arg(&script)
        .arg(dir)
        .args(["--cases", &cases.to_string()])
        .output()
        .expect("the fixture script runs");
    assert!(
        out.status.success(),
        "zino_fixture.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    format!(
        "cd {} && exec {} -m zino.zino --config-file zino.toml --polldevs polldevs.cf \
         --trap-port 0",
        dir.display(),
        venv.join("bin/python").display()
    )
}
