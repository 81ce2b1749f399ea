//! `analyze --threads N`: the report does not depend on N. Several files are analysed at
//! once (up to N), a single file is read and decompressed on a thread of its own; either way
//! stdout, the exit status and the errors are those of one thread.

mod common;

use std::path::PathBuf;

use common::{repo, tcpdoctor, Scratch};

/// Every pcap of the repository's capture corpus, in a fixed order.
fn corpus() -> Vec<PathBuf> {
    let dir = repo().join("testdata/captures");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("testdata/captures")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "pcap"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "the corpus has its captures");
    files
}

fn analyze(threads: &str, files: &[PathBuf]) -> (Vec<u8>, Option<i32>, String) {
    let mut args = vec!["analyze", "--format", "json", "--threads", threads];
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    args.extend(names.iter().map(String::as_str));
    let out = tcpdoctor(&args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.stdout, out.status.code(), err)
}

#[test]
fn many_files_at_once_give_the_report_of_one_thread() {
    let files = corpus();
    let one = analyze("1", &files);
    assert_eq!(one.1, Some(0), "{}", one.2);
    let report: serde_json::Value = serde_json::from_slice(&one.0).expect("json");
    assert_eq!(
        report["captures"].as_array().map(Vec::len),
        Some(files.len()),
        "every file is in the report"
    );
    assert!(!report["findings"].as_array().expect("findings").is_empty());
    for n in ["2", "3", "8"] {
        let many = analyze(n, &files);
        assert!(many.0 == one.0, "--threads {n} changed the report");
        assert_eq!(many.1, one.1);
    }
}

#[test]
fn one_file_divided_among_threads_gives_the_report_of_one_thread() {
    // Every capture alone, its flows divided among 2 and 3 threads (an explicit --threads
    // divides a file of any size; TCPDOCTOR_TRACE_SHARDS says it did).
    let mut divided = 0;
    for file in corpus() {
        let one = analyze("1", std::slice::from_ref(&file));
        for n in ["2", "3"] {
            let name = file.display().to_string();
            let out = common::tcpdoctor_env(
                &["analyze", "--format", "json", "--threads", n, &name],
                &[("TCPDOCTOR_TRACE_SHARDS", "1")],
            );
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.stdout == one.0,
                "{name}: --threads {n} changed the report"
            );
            assert_eq!(out.status.code(), one.1, "{name}: {err}");
            divided += usize::from(err.contains(&format!("divided among {n} threads")));
        }
    }
    assert!(divided > 100, "only {divided} runs divided their file");
}

#[test]
fn a_bad_file_among_many_is_reported_in_its_place_whatever_the_threads() {
    let scratch = Scratch::new("analyze-threads-bad");
    let bad = scratch.join("not-a-capture.pcap");
    std::fs::write(&bad, b"this is not a capture file at all").expect("write");
    let mut files = corpus();
    files.truncate(6);
    files.insert(3, bad.clone());
    let one = analyze("1", &files);
    let two = analyze("2", &files);
    assert_eq!(one.1, Some(2), "an unreadable file exits 2: {}", one.2);
    assert!(one.2.contains("not-a-capture.pcap"), "{}", one.2);
    assert_eq!((two.0, two.1, two.2), (one.0, one.1, one.2));
}

#[test]
fn a_gzipped_file_read_ahead_gives_the_same_report_and_the_same_cut() {
    let scratch = Scratch::new("analyze-threads-gz");
    let src = repo().join("testdata/captures/bulk_fast_reader.pcap");
    let bytes = std::fs::read(&src).expect("read");
    let gz = scratch.join("bulk.pcap.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut enc, &bytes).expect("compress");
    let packed = enc.finish().expect("finish");
    std::fs::write(&gz, &packed).expect("write");
    let cut = scratch.join("cut.pcap.gz");
    std::fs::write(&cut, &packed[..packed.len() * 2 / 3]).expect("write");
    for file in [gz, cut] {
        let one = analyze("1", std::slice::from_ref(&file));
        let two = analyze("2", std::slice::from_ref(&file));
        assert_eq!(one.1, Some(0), "{}", one.2);
        assert!(
            two.0 == one.0,
            "{}: --threads 2 changed the report",
            file.display()
        );
        assert_eq!((two.1, &two.2), (one.1, &one.2));
    }
    let (_, _, warned) = analyze("2", std::slice::from_ref(&scratch.join("cut.pcap.gz")));
    assert!(
        warned.contains("cut short") || warned.contains("ends"),
        "{warned}"
    );
}

#[test]
fn zero_threads_is_refused_naming_the_flag() {
    let file = corpus().remove(0);
    let (out, code, err) = analyze("0", &[file]);
    assert_eq!(code, Some(2), "{err}");
    assert!(out.is_empty());
    assert!(err.contains("--threads"), "{err}");
}

#[test]
fn a_divided_file_cut_short_or_broken_mid_file_ends_as_one_thread_ends() {
    // An uncompressed file is divided among threads (not read ahead): cut mid-record, it is
    // analysed up to the cut with the same warning; with a record header broken mid-file, the
    // error (file, byte offset) and exit status are one thread's, and nothing hangs.
    let scratch = Scratch::new("analyze-threads-cut");
    let bytes =
        std::fs::read(repo().join("testdata/captures/bulk_fast_reader.pcap")).expect("read");
    let cut = scratch.join("cut.pcap");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).expect("write");
    // The 100th record's captured length made absurd.
    let mut broken = bytes.clone();
    let mut off = 24;
    for _ in 0..100 {
        let caplen = u32::from_le_bytes(broken[off + 8..off + 12].try_into().unwrap());
        off += 16 + caplen as usize;
    }
    broken[off + 8..off + 12].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
    let bad = scratch.join("broken.pcap");
    std::fs::write(&bad, &broken).expect("write");
    for (file, code) in [(cut, 0), (bad, 2)] {
        let name = file.display().to_string();
        let one = analyze("1", std::slice::from_ref(&file));
        assert_eq!(one.1, Some(code), "{name}: {}", one.2);
        let out = common::tcpdoctor_env(
            &["analyze", "--format", "json", "--threads", "2", &name],
            &[("TCPDOCTOR_TRACE_SHARDS", "1")],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("divided among 2 threads"), "{name}: {err}");
        // Less the trace's own lines ("tcpdoctor: NAME: flows divided…", "…merged in…").
        let trace = format!("tcpdoctor: {name}: ");
        let said: Vec<&str> = err.lines().filter(|l| !l.starts_with(&trace)).collect();
        assert_eq!(said, one.2.lines().collect::<Vec<_>>(), "{name}");
        assert!(
            out.stdout == one.0,
            "{name}: --threads 2 changed the report"
        );
        assert_eq!(out.status.code(), one.1, "{name}");
    }
}

/// The corpus's microsecond Ethernet pcaps one after another, again and again, until the file
/// holds `records` frames: each copy of a file shifted to begin 700 s (past every idle and
/// half-open timeout) after the one before ended, so every copy's connections are new.
fn corpus_replayed(records: usize) -> Vec<u8> {
    let files: Vec<Vec<u8>> = corpus()
        .iter()
        .map(|p| std::fs::read(p).expect("read"))
        // Little-endian microsecond pcap, link type 1 (Ethernet).
        .filter(|b| b.len() > 24 && b[..4] == [0xd4, 0xc3, 0xb2, 0xa1] && b[20..24] == [1, 0, 0, 0])
        .collect();
    assert!(files.len() >= 5, "the corpus has Ethernet pcaps");
    let mut out = files[0][..24].to_vec();
    let (mut written, mut start_us) = (0, 0u64);
    while written < records {
        for file in &files {
            let mut frames = Vec::new();
            let mut off = 24;
            while off + 16 <= file.len() {
                let word =
                    |at: usize| u32::from_le_bytes(file[at..at + 4].try_into().expect("4 bytes"));
                let (us, caplen) = (
                    u64::from(word(off)) * 1_000_000 + u64::from(word(off + 4)),
                    word(off + 8) as usize,
                );
                if off + 16 + caplen > file.len() {
                    break;
                }
                frames.push((us, &file[off + 8..off + 16 + caplen]));
                off += 16 + caplen;
            }
            let first = frames.iter().map(|f| f.0).min().unwrap_or(0);
            let last = frames.iter().map(|f| f.0).max().unwrap_or(0);
            for (us, rest) in frames {
                let at = start_us + (us - first);
                out.extend_from_slice(&((at / 1_000_000) as u32).to_le_bytes());
                out.extend_from_slice(&((at % 1_000_000) as u32).to_le_bytes());
                out.extend_from_slice(rest);
                written += 1;
            }
            start_us += last - first + 700_000_000;
        }
    }
    out
}

#[test]
fn a_capture_of_many_batches_gives_the_report_of_one_thread_at_every_count() {
    // Many batches of 4,096 segments per shard, so that the reading thread both analyses
    // batches itself and waits for room, and any thread takes any shard's next batch.
    let scratch = Scratch::new("analyze-threads-many");
    let file = scratch.join("replayed.pcap");
    std::fs::write(&file, corpus_replayed(300_000)).expect("write");
    let name = file.display().to_string();
    let one = analyze("1", std::slice::from_ref(&file));
    assert_eq!(one.1, Some(0), "{}", one.2);
    let report: serde_json::Value = serde_json::from_slice(&one.0).expect("json");
    assert!(
        report["captures"][0]["tcp_segments"].as_u64() >= Some(250_000),
        "{}",
        report["captures"][0]
    );
    for n in ["2", "3", "4"] {
        let out = common::tcpdoctor_env(
            &["analyze", "--format", "json", "--threads", n, &name],
            &[("TCPDOCTOR_TRACE_SHARDS", "1")],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("divided among {n} threads")), "{err}");
        assert!(out.stdout == one.0, "--threads {n} changed the report");
        assert_eq!(out.status.code(), one.1, "{err}");
    }
}
