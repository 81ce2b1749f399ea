//! The malformed-capture corpus (testdata/malformed, made by testdata/make_malformed.py).
//!
//! Every file in the folder is listed in exactly one of:
//! - `EXPECTED` (`filename<TAB>substring`): the file is refused with that error, which names a
//!   byte offset;
//! - `EXPECTED_WARNINGS` (`filename<TAB>exit status<TAB>warning`): the file ends mid-record,
//!   which `analyze` forgives after analysing the complete records before it; the warning is
//!   the exact sentence it prints (the exit status is checked by the CLI's tests).
//!
//! Nothing may panic.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tcpdoctor_core::report::Truncation;
use tcpdoctor_core::wire::{decode_tcp, CaptureReader};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/malformed")
}

/// How reading a whole file (decoding every frame) ended.
#[derive(Debug)]
enum End {
    Clean,
    /// An error, and whether the capture was merely cut short after a complete record.
    Error(String, bool),
    Warning(String),
}

fn read(bytes: &[u8]) -> End {
    let mut r = match CaptureReader::new(bytes) {
        Ok(r) => r,
        Err(e) => return End::Error(e.to_string(), false),
    };
    loop {
        match r.next_frame() {
            Ok(Some(f)) => {
                let _ = decode_tcp(f.link, f.data, f.orig_len);
            }
            Ok(None) => return End::Clean,
            Err(e) => {
                return match Truncation::from_error(&e, r.frames_read(), false) {
                    Some(t) => End::Warning(t.message),
                    None => End::Error(e.to_string(), e.is_cut_short()),
                }
            }
        }
    }
}

/// `name<TAB>rest` lines of a listing in the folder.
fn listing(file: &str) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(dir().join(file)).expect(file);
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (name, want) = line
            .split_once('\t')
            .unwrap_or_else(|| panic!("{file}: line without a tab: {line:?}"));
        assert!(
            out.insert(name.to_string(), want.to_string()).is_none(),
            "{file}: {name} twice"
        );
    }
    out
}

#[test]
fn every_malformed_file_gives_its_error_or_warning() {
    let errors = listing("EXPECTED");
    let warnings = listing("EXPECTED_WARNINGS");
    let mut files: Vec<String> = std::fs::read_dir(dir())
        .expect("testdata/malformed")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with("EXPECTED"))
        .collect();
    files.sort();
    assert!(files.len() >= 12, "{files:?}");
    assert!(warnings.len() >= 3, "{warnings:?}");
    let mut failures = Vec::new();
    for name in &files {
        let bytes = std::fs::read(dir().join(name)).expect("read");
        let end = read(&bytes);
        match (errors.get(name), warnings.get(name), end) {
            (Some(_), Some(_), _) => failures.push(format!("{name}: listed twice")),
            (None, None, _) => failures.push(format!("{name}: in neither listing")),
            (Some(want), None, End::Error(e, cut)) => {
                if !e.contains(want.as_str()) {
                    failures.push(format!("{name}: {e:?} does not contain {want:?}"));
                } else if !e.contains("at byte ") {
                    failures.push(format!("{name}: {e:?} names no byte offset"));
                } else if cut {
                    failures.push(format!("{name}: {e:?} would be forgiven as cut short"));
                }
            }
            (None, Some(want), End::Warning(w)) => {
                let want = want.split_once('\t').map_or("", |(_, w)| w);
                if w != want {
                    failures.push(format!("{name}: warning {w:?}, expected {want:?}"));
                }
            }
            (_, _, end) => failures.push(format!("{name}: ended with {end:?}")),
        }
    }
    for name in errors.keys().chain(warnings.keys()) {
        if !files.contains(name) {
            failures.push(format!("{name}: listed but not in the folder"));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
