//! Helpers for the live-capture tests: privileges, a directory another user can write,
//! reading captures back, tshark, and finding leftover processes.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use tcpdoctor_core::wire::{decode_tcp, CaptureReader, Decoded, LinkType};

/// The unprivileged uid and gid the tests switch to (nobody).
pub const NOBODY: u32 = 65534;

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Prints why a test does not run here (never a silent pass).
pub fn skip(test: &str, why: &str) {
    super::skipped(test, why);
}

/// A fresh directory every user may write (mode 0777), removed on drop.
pub struct OpenDir(pub PathBuf);

impl OpenDir {
    pub fn new(tag: &str) -> OpenDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "tcpdoctor-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create temp dir");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        OpenDir(p)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Copies an executable here (mode 0755) so another uid can run it whatever the
    /// permissions on the build directory are. The copy is made by install(1): a file this
    /// process held open for writing could be inherited by a concurrent test's fork and make
    /// exec fail with "Text file busy".
    pub fn install(&self, from: &Path) -> PathBuf {
        let to = self.0.join(from.file_name().expect("file name"));
        let status = Command::new("install")
            .arg("-m")
            .arg("0755")
            .arg(from)
            .arg(&to)
            .status()
            .expect("run install(1)");
        assert!(
            status.success(),
            "install {} {}",
            from.display(),
            to.display()
        );
        to
    }
}

impl Drop for OpenDir {
    /// Removes the directory, unless the test failed: then its captures stay for a look.
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept for a look: {}", self.0.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The tcpdoctor binary under test.
pub fn tcpdoctor_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tcpdoctor"))
}

/// The `exchange` example, built by `cargo test` next to the binary.
pub fn exchange_bin() -> PathBuf {
    let p = tcpdoctor_bin()
        .parent()
        .expect("target dir")
        .join("examples/exchange");
    assert!(
        p.exists(),
        "{} is missing: `cargo test` builds the examples (run `cargo build --examples`)",
        p.display()
    );
    p
}

/// `program args…`, as uid/gid [`NOBODY`] with no supplementary groups when root, else as
/// the current (unprivileged) user.
pub fn unprivileged(program: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("setpriv");
        c.arg(format!("--reuid={NOBODY}"))
            .arg(format!("--regid={NOBODY}"))
            .arg("--clear-groups")
            .arg(program);
        c
    } else {
        Command::new(program)
    }
}

/// Spawns `cmd` with piped stderr and waits for its line containing `marker`; returns the
/// child (the caller waits for it) and the rest of stderr. Panics (with what it saw) if
/// stderr ends first.
#[allow(clippy::zombie_processes)]
pub fn spawn_until(cmd: &mut Command, marker: &str) -> (Child, BufReader<ChildStderr>) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).expect("read stderr") == 0 {
            let _ = child.kill();
            let _ = child.wait();
            panic!("never printed `{marker}`; stderr: {seen}");
        }
        seen.push_str(&line);
        if line.contains(marker) {
            return (child, err);
        }
    }
}

/// What a capture file holds.
#[derive(Debug, Default)]
pub struct Contents {
    pub frames: u64,
    pub tcp: u64,
    /// TCP payload bytes by source port.
    pub payload_from: BTreeMap<u16, u64>,
    /// Segments by source port.
    pub segments_from: BTreeMap<u16, u64>,
    pub syn_only: u64,
    pub link: Option<LinkType>,
    pub timestamps_ordered: bool,
    pub max_caplen: usize,
}

pub fn read_capture(path: &Path) -> Contents {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut r = CaptureReader::new(f).expect("a capture");
    let mut c = Contents {
        timestamps_ordered: true,
        ..Contents::default()
    };
    let mut last = 0;
    while let Some(f) = r.next_frame().expect("readable") {
        c.frames += 1;
        c.link = Some(f.link);
        c.max_caplen = c.max_caplen.max(f.data.len());
        c.timestamps_ordered &= f.ts.as_nanos() >= last;
        last = f.ts.as_nanos();
        if let Decoded::Tcp(s, _) = decode_tcp(f.link, f.data, f.orig_len) {
            c.tcp += 1;
            *c.payload_from.entry(s.src.port).or_default() += u64::from(s.payload_len);
            *c.segments_from.entry(s.src.port).or_default() += 1;
            if s.flags.syn() && !s.flags.ack() {
                c.syn_only += 1;
            }
        }
    }
    c
}

/// Reads `file` with tshark (as nobody when root: tshark warns about running as root) and
/// asserts it exits 0 and says nothing on stderr. Skips, saying so, when tshark is missing.
pub fn tshark_reads_cleanly(file: &Path) {
    if Command::new("tshark").arg("--version").output().is_err() {
        skip(
            "tshark check",
            "tshark is not installed (.ci/run installs it)",
        );
        return;
    }
    let tshark = PathBuf::from("tshark");
    let mut cmd = if is_root() {
        unprivileged(&tshark)
    } else {
        Command::new(&tshark)
    };
    // Its own profile directory: as nobody, root's would be unreadable.
    let home = file.parent().expect("file in a directory");
    let out = cmd
        .arg("-r")
        .arg(file)
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .expect("run tshark");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.trim().is_empty(),
        "tshark -r {}: {:?}, stderr: {stderr}",
        file.display(),
        out.status
    );
    assert!(!out.stdout.is_empty(), "tshark printed no packets");
}

/// Processes whose command line contains `marker`.
pub fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if text.contains(marker) {
            found.push(format!("{}: {text}", entry.file_name().to_string_lossy()));
        }
    }
    found
}

/// Sends SIGINT to `child` (Ctrl-C).
pub fn interrupt(child: &Child) {
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
}
