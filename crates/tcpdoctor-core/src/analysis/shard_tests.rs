//! A capture's flows divided among shards give the report one analyzer gives, byte for byte:
//! every capture of the repository, at 2 and 3 shards (each reading every frame, or fed by a
//! dispatcher that decodes them once), the shards run one after another.

use std::path::{Path, PathBuf};

use super::Analyzer;
use crate::detect::{self, Detector};
use crate::wire::CaptureReader;

/// Every capture file under `testdata` (the corpus the identity holds over).
fn corpus() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata");
    let mut out = Vec::new();
    let mut dirs = vec![root];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).expect("testdata") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                dirs.push(p);
            } else if p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.contains(".pcap") || n.ends_with(".cap"))
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Feeds every frame of `bytes` to `a`; false when the file is not a capture at all.
fn feed(bytes: &[u8], a: &mut Analyzer) -> bool {
    let Ok(mut r) = CaptureReader::new(bytes) else {
        return false;
    };
    while let Ok(Some(f)) = r.next_frame() {
        a.on_frame(f.number, f.ts, f.link, f.data, f.orig_len);
    }
    true
}

/// The JSON of the report of `bytes` analysed by `shards` shards (0: one plain analyzer).
type Make<'a> = &'a dyn Fn() -> Vec<Box<dyn Detector>>;

/// The JSON of the report of `bytes` analysed by `shards` shards (0: one plain analyzer;
/// negative: that many shards fed by a dispatcher that decodes every frame once).
fn report(bytes: &[u8], shards: isize, make: Make) -> Option<String> {
    let (summary, findings) = if shards < 0 {
        let n = shards.unsigned_abs();
        let mut d = Analyzer::dispatcher(n);
        let mut all: Vec<Analyzer> = (0..n).map(|i| Analyzer::sharded(make(), i, n)).collect();
        let Ok(mut r) = CaptureReader::new(bytes) else {
            return None;
        };
        while let Ok(Some(f)) = r.next_frame() {
            d.on_frame(f.number, f.ts, f.link, f.data, f.orig_len);
            // Batches of a few segments, as the threads would take them.
            if d.batched() >= 7 {
                for (i, a) in all.iter_mut().enumerate() {
                    for routed in d.take_batch(i, Vec::new()).expect("a dispatcher") {
                        a.on_routed(&routed);
                    }
                }
            }
        }
        for (i, a) in all.iter_mut().enumerate() {
            for routed in d.take_batch(i, Vec::new()).expect("a dispatcher") {
                a.on_routed(&routed);
            }
        }
        Analyzer::merge_dispatched(d, all, "f", "pcap")
    } else if shards == 0 {
        let mut a = Analyzer::new(make());
        if !feed(bytes, &mut a) {
            return None;
        }
        a.finish("f", "pcap")
    } else {
        let mut all = Vec::new();
        for i in 0..shards as usize {
            let mut a = Analyzer::sharded(make(), i, shards as usize);
            if !feed(bytes, &mut a) {
                return None;
            }
            all.push(a);
        }
        Analyzer::merge(all, "f", "pcap")
    };
    Some(serde_json::to_string_pretty(&(summary, findings)).expect("json"))
}

/// Asserts the identity over the corpus for the detectors `make` gives; returns how many
/// captures had findings (so that a test can tell it compared something that matters).
pub(crate) fn same_over_corpus(make: Make) -> usize {
    let files = corpus();
    assert!(files.len() > 100, "the corpus is {} files", files.len());
    let mut with_findings = 0;
    for path in files {
        let bytes = std::fs::read(&path).expect("read");
        let Some(one) = report(&bytes, 0, make) else {
            continue;
        };
        with_findings += usize::from(!one.contains("\"findings\": []") && one.contains("kind"));
        for shards in [2, 3, -2, -3] {
            let many = report(&bytes, shards, make).expect("read once already");
            if one != many {
                let line = one
                    .lines()
                    .zip(many.lines())
                    .position(|(a, b)| a != b)
                    .unwrap_or(0);
                panic!(
                    "{}: {shards} shards differ from one analyzer at line {line}:\n{}\n--- vs ---\n{}",
                    path.display(),
                    one.lines().skip(line.saturating_sub(3)).take(8).collect::<Vec<_>>().join("\n"),
                    many.lines().skip(line.saturating_sub(3)).take(8).collect::<Vec<_>>().join("\n"),
                );
            }
        }
    }
    with_findings
}

#[test]
fn flows_servers_and_totals_merge_as_one_analyzer_counts_them() {
    // No detector: the summary alone (flows, servers, bytes, latency, RTT, hops' legs).
    same_over_corpus(&Vec::new);
}

#[test]
fn each_mergeable_detector_alone_merges_as_one_analyzer() {
    let mut merged = Vec::new();
    for i in 0..detect::all().len() {
        let one = move || vec![detect::all().swap_remove(i)];
        if !one()[0].mergeable() {
            continue;
        }
        // Each detector has captures that trigger it: the identity is over real findings.
        assert!(
            same_over_corpus(&one) > 0,
            "detector {i}: no capture with a finding"
        );
        merged.push(i);
    }
    eprintln!("detectors merged: {merged:?}");
    assert!(!merged.is_empty());
}

#[test]
fn every_detector_together_merges_as_one_analyzer() {
    assert!(
        Analyzer::default().can_shard(),
        "every detector is mergeable"
    );
    assert!(same_over_corpus(&detect::all) > 20);
}
