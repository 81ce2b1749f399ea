//! `analyze` bounded under attack and honest about time (issue 29): a SYN flood is analysed
//! in a capped table of half-open attempts, with what was not tracked reported; a capture whose
//! timestamps step backwards spans its earliest to its latest timestamp, reports the steps,
//! and keeps its true findings through the evidence audit.

mod common;

use std::path::Path;

use serde_json::Value;

/// One pcap record: (timestamp in the file's units, captured bytes, original length).
struct Record {
    sec: u32,
    frac: u32,
    orig: u32,
    data: Vec<u8>,
}

/// A classic pcap file, little-endian: its header and records.
fn read_pcap(path: &Path) -> ([u8; 24], Vec<Record>) {
    let b = std::fs::read(path).expect("read capture");
    let mut header = [0u8; 24];
    header.copy_from_slice(&b[..24]);
    assert!(
        matches!(
            &header[..4],
            [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1]
        ),
        "{}: a little-endian pcap",
        path.display()
    );
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
    let mut records = Vec::new();
    let mut o = 24;
    while o + 16 <= b.len() {
        let caplen = u32_at(o + 8) as usize;
        records.push(Record {
            sec: u32_at(o),
            frac: u32_at(o + 4),
            orig: u32_at(o + 12),
            data: b[o + 16..o + 16 + caplen].to_vec(),
        });
        o += 16 + caplen;
    }
    (header, records)
}

fn write_pcap(path: &Path, header: &[u8; 24], records: &[Record]) {
    let mut out = header.to_vec();
    for r in records {
        for v in [r.sec, r.frac, r.data.len() as u32, r.orig] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&r.data);
    }
    std::fs::write(path, out).expect("write capture");
}

/// Microseconds since the epoch (the captures used here are microsecond pcaps).
fn us(r: &Record) -> i64 {
    i64::from(r.sec) * 1_000_000 + i64::from(r.frac)
}

fn capture(path: &str) -> ([u8; 24], Vec<Record>) {
    let (h, r) = read_pcap(&common::repo().join(path));
    assert_eq!(
        &h[..4],
        &[0xd4, 0xc3, 0xb2, 0xa1],
        "{path}: microsecond pcap"
    );
    (h, r)
}

fn analyze_text(file: &Path) -> String {
    let out = common::tcpdoctor(&["analyze", file.to_str().expect("utf-8 path")]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn kinds(report: &Value, key: &str) -> Vec<String> {
    report[key]
        .as_array()
        .expect("an array")
        .iter()
        .map(|f| {
            format!(
                "{} {}",
                f["kind"].as_str().expect("a string"),
                f["direction"].as_str().unwrap_or("")
            )
        })
        .collect()
}

fn has(report: &Value, key: &str, what: &str) -> bool {
    kinds(report, key).iter().any(|k| k.starts_with(what))
}

/// Two recordings merged end to end, the later one first (`mergecap -a later.pcap
/// earlier.pcap`): the span runs from the earlier file's first frame to the later file's
/// last; the step back is reported at the frame it lands on; the Nagle finding of the earlier
/// file, 31 stalls of ~40 ms, is not withdrawn as "more time lost than the capture lasted"
/// (measured from the first frame to the latest it was the churn file's 31 ms).
#[test]
fn merged_captures_later_first_span_both_and_keep_their_findings() {
    let (header, later) = capture("testdata/captures/churn_conn_per_request.pcap");
    let (_, earlier) = capture("testdata/captures/nagle_perline_server.pcap");
    assert!(
        us(&earlier[earlier.len() - 1]) < us(&later[0]),
        "the fixture's premise"
    );
    let dir = common::Scratch::new("merged");
    let merged = dir.join("merged.pcap");
    let n_later = later.len();
    let first_earlier = us(&earlier[0]);
    let last_later = us(&later[n_later - 1]);
    let step = us(&later[n_later - 1]) - first_earlier;
    let mut all = later;
    all.extend(earlier);
    write_pcap(&merged, &header, &all);

    let (r, _) = common::analyze_json(&merged);
    let c = &r["captures"][0];
    let span_ms = (last_later - first_earlier) as f64 / 1e3;
    assert!(
        (c["duration_ms"].as_f64().expect("a number") - span_ms).abs() < 0.01,
        "duration {} ms, span {span_ms} ms",
        c["duration_ms"]
    );
    let b = &c["time_steps_back"];
    assert_eq!(b["count"], 1, "{b}");
    assert_eq!(
        b["largest_at_frame"].as_u64(),
        Some(n_later as u64 + 1),
        "{b}"
    );
    assert!(
        (b["largest_ms"].as_f64().expect("a number") - step as f64 / 1e3).abs() < 0.01,
        "{b}"
    );
    assert!(
        has(&r, "findings", "nagle_delayed_ack server_to_client"),
        "found {:?}, withdrawn {:?}",
        kinds(&r, "findings"),
        kinds(&r, "withdrawn")
    );
    assert!(
        has(&r, "findings", "connection_churn"),
        "{:?}",
        kinds(&r, "findings")
    );
    assert!(
        !has(&r, "withdrawn", "nagle_delayed_ack"),
        "{:?}",
        kinds(&r, "withdrawn")
    );
    let text = analyze_text(&merged);
    assert!(
        text.contains(&format!(
            "timestamps went backwards 1 time, the largest step 19.6 s at frame {}",
            n_later + 1
        )),
        "{text}"
    );

    // The earlier file alone: no step, its own span, the same finding.
    let alone = common::repo().join("testdata/captures/nagle_perline_server.pcap");
    let (r, _) = common::analyze_json(&alone);
    let c = &r["captures"][0];
    assert!(c.get("time_steps_back").is_none(), "{c}");
    assert!(
        (c["duration_ms"].as_f64().expect("a number") - 1715.827).abs() < 0.01,
        "{c}"
    );
    assert!(has(&r, "findings", "nagle_delayed_ack server_to_client"));
    assert!(!analyze_text(&alone).contains("went backwards"));
}

/// One recording whose second half was stamped an hour earlier (a clock stepped back
/// mid-capture): the connection straddles the step, its Nagle stalls on both sides of it are
/// still found, and the capture spans the hour.
#[test]
fn a_clock_stepped_back_mid_connection_keeps_the_finding() {
    let (header, mut records) = capture("testdata/captures/nagle_perline_server.pcap");
    let mid = records.len() / 2;
    for r in &mut records[mid..] {
        r.sec -= 3600;
    }
    let earliest = records.iter().map(us).min().expect("records");
    let latest = records.iter().map(us).max().expect("records");
    let dir = common::Scratch::new("stepped");
    let stepped = dir.join("stepped.pcap");
    write_pcap(&stepped, &header, &records);

    let (r, _) = common::analyze_json(&stepped);
    let c = &r["captures"][0];
    let span_ms = (latest - earliest) as f64 / 1e3;
    assert!(span_ms > 3_500_000.0);
    assert!(
        (c["duration_ms"].as_f64().expect("a number") - span_ms).abs() < 0.01,
        "{c}"
    );
    assert_eq!(c["time_steps_back"]["count"], 1, "{c}");
    assert_eq!(
        c["time_steps_back"]["largest_at_frame"].as_u64(),
        Some(mid as u64 + 1)
    );
    assert_eq!(c["flows"], 1, "the step does not split the connection");
    let nagle = r["findings"]
        .as_array()
        .expect("an array")
        .iter()
        .find(|f| f["kind"] == "nagle_delayed_ack" && f["direction"] == "server_to_client")
        .unwrap_or_else(|| {
            panic!(
                "{:?} / withdrawn {:?}",
                kinds(&r, "findings"),
                kinds(&r, "withdrawn")
            )
        });
    let stalls = nagle["evidence"]["counts"]["stalled_turns"].as_u64();
    assert!(
        stalls.is_some_and(|s| s >= 25),
        "{}",
        nagle["evidence"]["counts"]
    );
}

/// A SYN packet from 10.x.y.z:PORT to 192.0.2.1:80, Ethernet.
fn syn_frame(i: u32) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    let src = [10, (i >> 16) as u8, (i >> 8) as u8, i as u8];
    f.extend_from_slice(&[0x45, 0, 0, 44, 0, 0, 0x40, 0, 64, 6, 0, 0]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&[192, 0, 2, 1]);
    let sport = 1024 + (i % 60_000) as u16;
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&80u16.to_be_bytes());
    f.extend_from_slice(&i.wrapping_mul(2_654_435_761).to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0, 0x60, 0x02, 0xfa, 0xf0, 0, 0, 0, 0]);
    f.extend_from_slice(&[2, 4, 0x05, 0xb4]);
    f
}

/// `n` one-SYN attempts from distinct sources, 1 µs apart, ending 10 s before `before_us`,
/// followed by the records of `then`.
fn flood_then(n: u32, before_us: i64, then: Vec<Record>) -> Vec<Record> {
    let start = before_us - 10_000_000 - i64::from(n);
    let mut v: Vec<Record> = (0..n)
        .map(|i| {
            let t = start + i64::from(i);
            let data = syn_frame(i);
            Record {
                sec: (t / 1_000_000) as u32,
                frac: (t % 1_000_000) as u32,
                orig: data.len() as u32,
                data,
            }
        })
        .collect();
    v.extend(then);
    v
}

/// A SYN flood of 70,000 attempts ahead of a real capture of 120 short connections: 4,465
/// attempts beyond the cap of 65,536 are reported as not tracked, and the real connections
/// that follow are analysed as before (the churn finding stands). 1,000 attempts: nothing is
/// dropped and nothing is said.
#[test]
fn a_syn_flood_beyond_the_cap_is_counted_and_the_real_traffic_still_analysed() {
    let (header, churn) = capture("testdata/captures/churn_conn_per_request.pcap");
    let first = us(&churn[0]);
    let dir = common::Scratch::new("flood");
    let flood = dir.join("flood.pcap");
    write_pcap(&flood, &header, &flood_then(70_000, first, churn));
    let (r, _) = common::analyze_json(&flood);
    let c = &r["captures"][0];
    // The flood evicts 4,464 attempts; the first real SYN, arriving at a full table, one more
    // (the attempts that follow it find room: each real one is promoted by its SYN-ACK).
    assert_eq!(c["half_open_untracked"], 70_000 - 65_536 + 1, "{c}");
    assert_eq!(c["flows"], 70_000 + 120, "{c}");
    assert!(c.get("time_steps_back").is_none(), "{c}");
    assert!(
        has(&r, "findings", "connection_churn"),
        "{:?}",
        kinds(&r, "findings")
    );
    let text = analyze_text(&flood);
    assert!(
        text.contains(
            "4,465 half-open connection attempts beyond the cap of 65,536 were not tracked"
        ),
        "{text}"
    );

    let (_, churn) = capture("testdata/captures/churn_conn_per_request.pcap");
    let small = dir.join("small.pcap");
    write_pcap(&small, &header, &flood_then(1_000, first, churn));
    let (r, _) = common::analyze_json(&small);
    let c = &r["captures"][0];
    assert!(c.get("half_open_untracked").is_none(), "{c}");
    assert_eq!(c["flows"], 1_000 + 120, "{c}");
    assert!(
        has(&r, "findings", "connection_churn"),
        "{:?}",
        kinds(&r, "findings")
    );
    assert!(!analyze_text(&small).contains("not tracked"));
}
