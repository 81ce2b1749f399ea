//! Helpers for the tests across the WAN path (`tcpdoctor sandbox --delay`): run tcpdoctor as
//! another uid, read both ends' captures, and compare what one end sent with what the other
//! received.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use super::live::{self, OpenDir};
use serde_json::Value;
use tcpdoctor_core::wire::readdress::{ipv4_addr, set_ipv4_addr, Field};
use tcpdoctor_core::wire::CaptureReader;

pub const FAR: [u8; 4] = [198, 18, 0, 1];
pub const NEAR: [u8; 4] = [198, 18, 0, 2];

/// `program`, as `uid` (same gid, no supplementary groups) when this test runs as root, else
/// as the current (unprivileged) user.
pub fn as_uid(uid: u32, program: &Path) -> Command {
    if live::is_root() {
        let mut c = Command::new("setpriv");
        c.arg(format!("--reuid={uid}"))
            .arg(format!("--regid={uid}"))
            .arg("--clear-groups")
            .arg(program);
        c
    } else {
        Command::new(program)
    }
}

/// Runs `tcpdoctor ARGS` as `uid` in `dir`; None (the reason printed) when this machine cannot
/// build the path for that user, unless it is required.
pub fn tcpdoctor_as(uid: u32, dir: &OpenDir, test: &str, args: &[String]) -> Option<Output> {
    tcpdoctor_as_env(uid, dir, test, args, &[])
}

/// As [`tcpdoctor_as`], with `env` set in tcpdoctor's environment.
pub fn tcpdoctor_as_env(
    uid: u32,
    dir: &OpenDir,
    test: &str,
    args: &[String],
    env: &[(&str, &str)],
) -> Option<Output> {
    let bin = dir.install(&live::tcpdoctor_bin());
    let out = as_uid(uid, &bin)
        .current_dir(&dir.0)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run tcpdoctor");
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(2) && super::wan_unavailable(test, &err) {
        return None;
    }
    Some(out)
}

/// One WAN path at a time in a test binary: the delay line is a user-space process whose
/// timing the tests measure, and several paths at once (with their servers, clients and
/// captures) on a 2-core machine delay its packets by the scheduler's whim, not the path's.
static ONE_PATH: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `sandbox --delay … --server SERVER --server-port 7070 -- CLIENT` as nobody; must exit 0.
/// Runs while no other test of this binary runs one ([`ONE_PATH`]).
pub fn sandbox(
    dir: &OpenDir,
    test: &str,
    path: &[&str],
    server: &str,
    client: &str,
) -> Option<Output> {
    let mut args = vec!["sandbox".to_string()];
    args.extend(path.iter().map(|s| s.to_string()));
    args.extend([
        "--server".into(),
        server.into(),
        "--server-port".into(),
        "7070".into(),
        "--".into(),
        client.into(),
    ]);
    let out = {
        let _path = ONE_PATH.lock().unwrap_or_else(|e| e.into_inner());
        tcpdoctor_as(live::NOBODY, dir, test, &args)?
    };
    assert_eq!(
        out.status.code(),
        Some(0),
        "{test}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(out)
}

pub fn exchange(dir: &OpenDir) -> String {
    dir.install(&live::exchange_bin()).display().to_string()
}

/// `key=value` words of a line.
pub fn fields(line: &str) -> BTreeMap<String, i64> {
    line.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
        .collect()
}

pub fn analyze(file: &Path) -> Value {
    let (r, _) = super::analyze_json(file);
    r
}

pub fn kinds(r: &Value) -> Vec<String> {
    r["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| format!("{} {}", f["kind"].as_str().unwrap_or("?"), f["direction"]))
        .collect()
}

/// Every packet of a capture, the line's address rewrite undone (so the two ends compare).
pub fn packets(file: &Path) -> Vec<Vec<u8>> {
    packets_at(file).0
}

/// [`packets`], with each one's capture time in nanoseconds, in one read of the file.
pub fn packets_at(file: &Path) -> (Vec<Vec<u8>>, Vec<u64>) {
    let f = std::fs::File::open(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let mut r = CaptureReader::new(f).expect("a capture");
    let (mut v, mut at) = (Vec::new(), Vec::new());
    while let Some(fr) = r.next_frame().expect("readable") {
        let mut p = fr.data.to_vec();
        for field in [Field::Source, Field::Destination] {
            if ipv4_addr(&p, field) == Some([127, 0, 0, 1]) {
                set_ipv4_addr(&mut p, field, FAR);
            }
        }
        v.push(p);
        at.push(fr.ts.as_nanos());
    }
    (v, at)
}

pub fn from(v: &[Vec<u8>], src: [u8; 4]) -> Vec<Vec<u8>> {
    v.iter()
        .filter(|p| ipv4_addr(p, Field::Source) == Some(src))
        .cloned()
        .collect()
}

/// What the line did to one direction: `sent` as the sender's end captured it, `got` as the
/// receiver's end did. Returns the numbers (from 1, as `drop=` counts) of the packets that did
/// not arrive; panics unless every other packet arrived bit-exact and in order.
pub fn dropped(sent: &[Vec<u8>], got: &[Vec<u8>], what: &str) -> Vec<usize> {
    let mut lost = Vec::new();
    let mut j = 0;
    for (i, p) in sent.iter().enumerate() {
        if got.get(j) == Some(p) {
            j += 1;
        } else {
            lost.push(i + 1);
        }
    }
    assert_eq!(
        j,
        got.len(),
        "{what}: packet {} of {} at the receiver's end is not the next one sent (altered, \
         reordered or invented)",
        j + 1,
        got.len()
    );
    lost
}

/// The TCP sequence number and payload length of an IPv4 packet (no options assumed beyond IHL).
pub fn seq_len(p: &[u8]) -> Option<(u32, u32, u32)> {
    let ihl = usize::from(p.first()? & 0x0f) * 4;
    let total = u32::from(u16::from_be_bytes([*p.get(2)?, *p.get(3)?]));
    let tcp = p.get(ihl..)?;
    let off = u32::from(tcp.get(12)? >> 4) * 4;
    let seq = u32::from_be_bytes(tcp.get(4..8)?.try_into().ok()?);
    let ack = u32::from_be_bytes(tcp.get(8..12)?.try_into().ok()?);
    Some((seq, total - ihl as u32 - off, ack))
}
