//! Runs a script's `exec` entries (the core models them; this is the I/O): once, before the
//! first connection, in script order, each under its timeout.
//!
//! The rules:
//! 1. Nothing runs without `--allow-exec`: a script that has an `exec` is refused, naming the
//!    flag and the line.
//! 2. The command runs directly (no shell), stdin from /dev/null, in a process group of its
//!    own; when its timeout passes the whole group is killed (a script's children too).
//! 3. Its standard output, at most 1MiB, trimmed of surrounding whitespace, is the value; a
//!    non-zero exit, a timeout, a program that cannot start, or no output is an error that
//!    names the line and the command, with the first line of its standard error (secrets
//!    masked).

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use tcpdoctor_core::script::Script;

/// The most output an exec may print.
const MAX_OUTPUT: u64 = 1 << 20;

/// Runs every `exec` of `script` and passes each output in; `source` names the script in
/// errors.
pub(crate) fn run_execs(script: &mut Script, allow: bool, source: &str) -> anyhow::Result<()> {
    if script.execs().is_empty() {
        return Ok(());
    }
    if !allow {
        let e = &script.execs()[0];
        bail!(
            "{source}: line {}: `exec` runs an outside command (`{}`); allow it with --allow-exec",
            e.line(),
            e.written().join(" ")
        );
    }
    for i in 0..script.execs().len() {
        let argv = script.exec_command(i);
        let e = &script.execs()[i];
        let shown = script.mask(&e.written().join(" "));
        let place = format!(
            "{source}: line {}: exec `{}` (`{shown}`)",
            e.line(),
            e.name()
        );
        let value =
            run_one(&argv, e.timeout()).map_err(|m| anyhow!("{place}: {}", script.mask(&m)))?;
        script.set_exec_value(i, value);
    }
    Ok(())
}

fn run_one(argv: &[Vec<u8>], timeout: Duration) -> Result<Vec<u8>, String> {
    use std::os::unix::ffi::OsStrExt;
    let os = |b: &Vec<u8>| std::ffi::OsStr::from_bytes(b).to_os_string();
    let Some(program) = argv.first() else {
        return Err("no command".into());
    };
    let mut child = Command::new(os(program))
        .args(argv[1..].iter().map(os))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start it: {e}"))?;
    let pid = child.id() as i32;
    let stdout = child.stdout.take().map(|s| reader(s, MAX_OUTPUT + 1));
    let stderr = child.stderr.take().map(|s| reader(s, 64 * 1024));
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                // SAFETY: kill(2) on the process group this child leads (rule 2).
                unsafe { libc::kill(-pid, libc::SIGKILL) };
                let _ = child.wait();
                return Err(format!(
                    "did not finish within its timeout of {}; killed",
                    humanize(timeout)
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(format!("waiting for it: {e}")),
        }
    };
    // The group may have children left holding the pipes: end them before reading to EOF.
    // SAFETY: as above; the group is ours.
    unsafe { libc::kill(-pid, libc::SIGKILL) };
    // A process that left the group (a daemon) may still hold a pipe: wait for EOF only
    // until the timeout, then take what was read.
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(100));
    let out = stdout
        .and_then(|r| r.recv_timeout(left).ok())
        .unwrap_or_default();
    let err = stderr
        .and_then(|r| r.recv_timeout(left).ok())
        .unwrap_or_default();
    let first_err = String::from_utf8_lossy(&err)
        .lines()
        .find(|l| !l.trim().is_empty())
        .map(|l| format!(": {}", l.trim()))
        .unwrap_or_default();
    if !status.success() {
        let how = match status.code() {
            Some(c) => format!("exited with status {c}"),
            None => "was killed by a signal".to_string(),
        };
        return Err(format!("{how}{first_err}"));
    }
    if out.len() as u64 > MAX_OUTPUT {
        return Err("printed more than 1MiB".into());
    }
    let value = out.trim_ascii().to_vec();
    if value.is_empty() {
        return Err(format!("printed nothing on its standard output{first_err}"));
    }
    Ok(value)
}

/// Reads `pipe` to its end (at most `limit` bytes) on a thread; the bytes come on the channel.
fn reader(pipe: impl Read + Send + 'static, limit: u64) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = pipe.take(limit).read_to_end(&mut v);
        let _ = tx.send(v);
    });
    rx
}

fn humanize(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}
