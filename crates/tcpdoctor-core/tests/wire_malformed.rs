//! The malformed-capture corpus (testdata/malformed, made by testdata/make_malformed.py):
//! each file must fail with its specific error (testdata/malformed/EXPECTED lists
//! `filename<TAB>substring`), name a byte offset, and never panic. Every file in the folder
//! must have an entry.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tcpdoctor_core::wire::{decode_tcp, CaptureReader};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/malformed")
}

/// Reads the whole file (decoding every frame); returns the first error and the frame count.
fn first_error(bytes: &[u8]) -> (Option<String>, u64) {
    let mut r = match CaptureReader::new(bytes) {
        Ok(r) => r,
        Err(e) => return (Some(e.to_string()), 0),
    };
    let mut frames = 0;
    loop {
        match r.next_frame() {
            Ok(Some(f)) => {
                frames += 1;
                let _ = decode_tcp(f.link, f.data, f.orig_len);
            }
            Ok(None) => return (None, frames),
            Err(e) => return (Some(e.to_string()), frames),
        }
    }
}

#[test]
fn every_malformed_file_gives_its_error() {
    let expected_text = std::fs::read_to_string(dir().join("EXPECTED")).expect("EXPECTED");
    let mut expected = BTreeMap::new();
    for line in expected_text.lines().filter(|l| !l.trim().is_empty()) {
        let (name, want) = line
            .split_once('\t')
            .unwrap_or_else(|| panic!("EXPECTED line without a tab: {line:?}"));
        assert!(
            expected
                .insert(name.to_string(), want.to_string())
                .is_none(),
            "{name} twice"
        );
    }
    let mut files: Vec<String> = std::fs::read_dir(dir())
        .expect("testdata/malformed")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "EXPECTED")
        .collect();
    files.sort();
    assert!(files.len() >= 12, "{files:?}");
    let mut failures = Vec::new();
    for name in &files {
        let Some(want) = expected.get(name) else {
            failures.push(format!("{name}: no entry in EXPECTED"));
            continue;
        };
        let bytes = std::fs::read(dir().join(name)).expect("read");
        let (err, frames) = first_error(&bytes);
        match err {
            None => failures.push(format!("{name}: no error after {frames} frames")),
            Some(e) if !e.contains(want.as_str()) => {
                failures.push(format!("{name}: {e:?} does not contain {want:?}"))
            }
            Some(e) if !e.contains("at byte ") => {
                failures.push(format!("{name}: {e:?} names no byte offset"))
            }
            Some(_) => {}
        }
    }
    for name in expected.keys() {
        if !files.contains(name) {
            failures.push(format!("{name}: in EXPECTED but not in the folder"));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
