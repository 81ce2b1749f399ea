//! `tcpdoctor sandbox` as an unprivileged user (uid 65534 via setpriv when the tests run as
//! root, as in CI; the current user otherwise): the commands' loopback traffic is captured in
//! a private namespace, their exit status comes back, and no process they started survives —
//! when they succeed, when they fail, and on Ctrl-C.

mod common;

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::live::{self, is_root, skip, OpenDir, NOBODY};

/// A number no other process on the machine has in its command line: `sleep <marker>`.
fn marker(tag: u32) -> (String, String) {
    let id = std::process::id();
    let n = 80_000 + tag;
    // The shell computes the number, so only the sleeper's own argv holds it.
    (format!("sleep $(({n}+0)).{id}"), format!("sleep {n}.{id}"))
}

fn leftovers(markers: &[&str]) -> Vec<String> {
    markers
        .iter()
        .flat_map(|m| live::processes_with(m))
        .collect()
}

struct Sandbox {
    dir: OpenDir,
    bin: PathBuf,
    exchange: PathBuf,
}

impl Sandbox {
    fn new() -> Sandbox {
        let dir = OpenDir::new("sandbox");
        let bin = dir.install(&live::tcpdoctor_bin());
        let exchange = dir.install(&live::exchange_bin());
        Sandbox { dir, bin, exchange }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = live::unprivileged(&self.bin);
        c.arg("sandbox").args(args).current_dir(&self.dir.0);
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run tcpdoctor sandbox")
    }
}

/// Whether user namespaces work for this user; prints why not. Where they do not (a hardened
/// host, a container's seccomp profile), what can still be checked is that the refusal is the
/// clear one: exit 2, naming the setting to change.
fn userns_available(out: &Output, test: &str) -> bool {
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("cannot create a user namespace") {
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("user.max_user_namespaces") || err.contains("userns"),
            "{err}"
        );
        skip(
            test,
            &format!("user namespaces are not available here: {err}"),
        );
        return false;
    }
    true
}

fn owner(p: &Path) -> u32 {
    std::fs::metadata(p).expect("file").uid()
}

#[test]
fn sandbox_captures_a_server_and_client_as_an_unprivileged_user() {
    let sb = Sandbox::new();
    let ex = sb.exchange.display().to_string();
    let (sleep, sleeper) = marker(1);
    let script =
        format!("{ex} serve 127.0.0.1:7000 & {ex} client 127.0.0.1:7000 6 > client.txt; {sleep} &");
    let out = sb.run(&[
        "-w",
        "run.pcap",
        "--analyze",
        "--format",
        "json",
        "--",
        &script,
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    if !userns_available(&out, "sandbox end to end") {
        return;
    }
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(
        leftovers(&[&sleeper, &format!("{ex} serve")]),
        Vec::<String>::new(),
        "processes the command left running must be gone"
    );

    let file = sb.dir.path("run.pcap");
    if is_root() {
        assert_eq!(owner(&file), NOBODY, "the file belongs to the user");
    }
    let said = std::fs::read_to_string(sb.dir.path("client.txt")).expect("client output");
    let field = |name: &str| -> u64 {
        said.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} in `{said}`"))
    };
    let c = live::read_capture(&file);
    assert_eq!(c.tcp, c.frames, "only TCP on the sandbox's loopback");
    // One connection, after any attempts the server refused before it listened.
    assert!(c.syn_only >= 1);
    assert_eq!(c.payload_from[&7000], field("received_bytes"));
    let from_clients: u64 = c
        .payload_from
        .iter()
        .filter(|(p, _)| **p != 7000)
        .map(|(_, b)| b)
        .sum();
    assert_eq!(from_clients, field("sent_bytes"));
    let client_segments: u64 = c
        .segments_from
        .iter()
        .filter(|(p, _)| **p != 7000)
        .map(|(_, n)| n)
        .sum();
    assert!(client_segments >= field("segments"));
    assert!(
        err.contains(&format!("{} packets captured, 0 dropped", c.frames)),
        "{err}"
    );
    live::tshark_reads_cleanly(&file);

    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON findings");
    common::validate(&report);
    let kinds: Vec<&str> = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"nagle_delayed_ack"), "{kinds:?}");
}

#[test]
fn a_failing_command_exits_with_its_status_and_leaves_nothing() {
    let sb = Sandbox::new();
    let (sleep, sleeper) = marker(2);
    let (daemon, daemon_sleeper) = marker(4);
    // Matches the daemon sleeper's command line but not its own (grep's argv holds it).
    let seen = format!("8000[4][.]{}", std::process::id());
    // Several words: executed as they are, no shell in between. The second sleeper leaves the
    // process group and the session (setsid): only the PID namespace can still end it. The
    // command fails (7) once that sleeper runs, or with 9 if it never starts.
    let script = format!(
        "{sleep} & setsid sh -c '{daemon} & wait' & i=0; \
         while [ $i -lt 500 ] && ! grep -qs '{seen}' /proc/[0-9]*/cmdline; do \
         sleep 0.01; i=$((i+1)); done; \
         grep -qs '{seen}' /proc/[0-9]*/cmdline && exit 7; exit 9"
    );
    let out = sb.run(&["--", "sh", "-c", &script]);
    if !userns_available(&out, "sandbox failing command") {
        return;
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{err}");
    assert!(err.contains("the command exited with status 7"), "{err}");
    assert_eq!(
        leftovers(&[&sleeper, &daemon_sleeper]),
        Vec::<String>::new()
    );
    let c = live::read_capture(&sb.dir.path("sandbox.pcap"));
    assert_eq!(c.frames, 0, "nothing was sent");

    let out = sb.run(&["-w", "none.pcap", "--", "/nonexistent/program", "--flag"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(127), "{err}");
    assert!(err.contains("cannot run `/nonexistent/program`"), "{err}");
}

#[test]
fn ctrl_c_ends_the_commands_and_keeps_the_capture() {
    let sb = Sandbox::new();
    let ex = sb.exchange.display().to_string();
    let (sleep, sleeper) = marker(3);
    let script = format!("{sleep} & {ex} serve 127.0.0.1:7000");
    let mut cmd = sb.command(&["-w", "cut.pcapng", "--", &script]);
    let (mut child, mut rest) = live::spawn_until(&mut cmd, "sandbox: capturing on lo");
    let mut seen = false;
    for _ in 0..500 {
        if !leftovers(&[&sleeper]).is_empty() {
            seen = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(seen, "the sandboxed sleeper never started");
    live::interrupt(&child);
    let mut err = String::new();
    rest.read_to_string(&mut err).expect("stderr");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(130), "{err}");
    assert_eq!(
        leftovers(&[&sleeper, &format!("{ex} serve")]),
        Vec::<String>::new()
    );
    assert!(err.contains("0 packets captured"), "{err}");
    assert_eq!(live::read_capture(&sb.dir.path("cut.pcapng")).frames, 0);
}

#[test]
fn disabled_user_namespaces_are_named() {
    let sb = Sandbox::new();
    // A user namespace of its own in which user.max_user_namespaces is 0 (the host's is
    // untouched: the limit is per user namespace).
    let script = format!(
        "echo 0 > /proc/sys/user/max_user_namespaces && exec {} sandbox -- true",
        sb.bin.display()
    );
    let out = match Command::new("unshare")
        .args(["-Ur", "sh", "-c", &script])
        .current_dir(&sb.dir.0)
        .output()
    {
        Ok(o) => o,
        Err(e) => return skip("userns disabled", &format!("no unshare(1): {e}")),
    };
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("unshare failed") || err.contains("Permission denied") {
        return skip("userns disabled", &format!("cannot set up the test: {err}"));
    }
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("sysctl user.max_user_namespaces=0"), "{err}");
    assert!(
        !sb.dir.path("sandbox.pcap").exists(),
        "no file is left behind"
    );
}
