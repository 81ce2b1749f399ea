//! Real captures (tcpdump on 127.0.0.1, converted with editcap/mergecap and variants.py) read
//! by the wire module and compared field by field with what tshark said about them. The
//! tshark output is committed next to each capture (`F.tshark`, made by expected.sh), so this
//! test does not need tshark.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use tcpdoctor_core::wire::{decode_tcp, CaptureFormat, CaptureReader, Decoded, LinkType};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/wire")
}

/// One line of tshark `-T fields` output (columns as in expected.sh).
#[derive(Debug)]
struct Row {
    time: String,
    len: u32,
    cap_len: usize,
    src: String,
    tcp: Option<Vec<String>>,
}

fn tshark_rows(capture: &Path) -> BTreeMap<u64, Row> {
    let path = PathBuf::from(format!("{}.tshark", capture.display()));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut rows = BTreeMap::new();
    for line in text.lines() {
        let c: Vec<&str> = line.split('\t').collect();
        assert_eq!(c.len(), 18, "{path:?}: {line}");
        let num = |s: &str| {
            s.parse::<u64>()
                .unwrap_or_else(|_| panic!("{s:?} in {line}"))
        };
        let src = if c[4].is_empty() { c[5] } else { c[4] };
        let tcp = (!c[12].is_empty()).then(|| c[6..18].iter().map(|s| s.to_string()).collect());
        let row = Row {
            time: c[1].to_string(),
            len: num(c[2]) as u32,
            cap_len: num(c[3]) as usize,
            src: src.to_string(),
            tcp,
        };
        rows.insert(num(c[0]), row);
    }
    rows
}

/// "1795324189.448514153" → nanoseconds.
fn epoch_ns(s: &str) -> u64 {
    let (sec, frac) = s.split_once('.').unwrap_or((s, ""));
    let frac = format!("{frac:0<9}");
    sec.parse::<u64>().expect("seconds") * 1_000_000_000 + frac[..9].parse::<u64>().expect("ns")
}

fn opt<T: std::str::FromStr>(s: &str) -> Option<T> {
    (!s.is_empty()).then(|| s.parse().ok()).flatten()
}

/// What a capture should look like overall.
struct Summary {
    format: CaptureFormat,
    links: Vec<LinkType>,
    frames: usize,
    tcp: usize,
    payload_bytes: u64,
    /// Segments whose payload is longer than the bytes captured after the headers.
    snapped: usize,
}

/// Reads the capture and checks every frame against tshark; returns the summary.
fn check(name: &str) -> Summary {
    let path = dir().join(name);
    let rows = tshark_rows(&path);
    let file = File::open(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut r = CaptureReader::new(BufReader::new(file)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut s = Summary {
        format: r.format(),
        links: Vec::new(),
        frames: 0,
        tcp: 0,
        payload_bytes: 0,
        snapped: 0,
    };
    let mut seen = Vec::new();
    while let Some(f) = r.next_frame().unwrap_or_else(|e| panic!("{name}: {e}")) {
        let at = format!("{name} frame {}", f.number);
        let row = rows
            .get(&f.number)
            .unwrap_or_else(|| panic!("{at}: not in tshark output"));
        seen.push(f.number);
        s.frames += 1;
        if !s.links.contains(&f.link) {
            s.links.push(f.link);
        }
        assert_eq!(f.ts.as_nanos(), epoch_ns(&row.time), "{at}: time");
        assert_eq!(
            (f.orig_len, f.data.len()),
            (row.len, row.cap_len),
            "{at}: lengths"
        );
        let decoded = decode_tcp(f.link, f.data, f.orig_len);
        let Some(t) = &row.tcp else {
            assert!(
                !matches!(decoded, Decoded::Tcp(..)),
                "{at}: tshark says not TCP"
            );
            continue;
        };
        let Decoded::Tcp(seg, None) = decoded else {
            panic!("{at}: tshark says TCP, decoded {decoded:?}");
        };
        s.tcp += 1;
        s.payload_bytes += u64::from(seg.payload_len);
        if seg.payload_len as usize > f.data.len() {
            s.snapped += 1;
        }
        let flags = u16::from_str_radix(t[4].trim_start_matches("0x"), 16).expect("flags");
        assert_eq!(seg.src.ip.to_string(), row.src, "{at}: src");
        let got = (
            seg.src.port,
            seg.dst.port,
            seg.seq,
            seg.ack,
            u16::from(seg.flags.0),
        );
        let want = (opt(&t[0]), opt(&t[1]), opt(&t[2]), opt(&t[3]), flags & 0xff);
        assert_eq!(
            (Some(got.0), Some(got.1), Some(got.2), Some(got.3), got.4),
            want,
            "{at}: ports/seq/ack/flags"
        );
        assert_eq!(Some(seg.window), opt(&t[5]), "{at}: window");
        assert_eq!(Some(seg.payload_len), opt(&t[6]), "{at}: payload length");
        let o = seg.options;
        assert_eq!(o.mss, opt(&t[7]), "{at}: mss");
        assert_eq!(o.window_scale, opt(&t[8]), "{at}: wscale");
        assert_eq!(
            o.sack_permitted,
            t[9].split(',').any(|k| k == "4"),
            "{at}: sack_perm"
        );
        let ts = opt::<u32>(&t[10]).zip(opt::<u32>(&t[11]));
        assert_eq!(o.timestamp, ts, "{at}: timestamps");
    }
    // tshark lists non-packet records (custom blocks) as frames without a time; nothing else
    // may be missing.
    for (n, row) in &rows {
        if !seen.contains(n) {
            assert!(
                row.time.is_empty(),
                "{name}: frame {n} was not read: {row:?}"
            );
        }
    }
    assert_eq!(
        r.bytes_read(),
        std::fs::metadata(&path).expect("size").len()
    );
    s
}

/// Every frame's number, time, bytes and original length, read with a given buffer size.
fn frames(name: &str, buffer: usize) -> Vec<(u64, u64, Vec<u8>, u32)> {
    let file = File::open(dir().join(name)).expect("open");
    let mut r = CaptureReader::with_buffer_size(file, buffer).expect("header");
    let mut out = Vec::new();
    while let Some(f) = r.next_frame().expect("frame") {
        out.push((f.number, f.ts.as_nanos(), f.data.to_vec(), f.orig_len));
    }
    out
}

#[test]
fn every_capture_has_a_tshark_view_and_matches_it() {
    let mut names: Vec<String> = std::fs::read_dir(dir())
        .expect("testdata/wire")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".pcap") || n.ends_with(".pcapng"))
        .collect();
    names.sort();
    assert!(names.len() >= 14, "{names:?}");
    for name in names {
        let s = check(&name);
        assert!(
            s.tcp > 0 && s.tcp == s.frames,
            "{name}: {} of {}",
            s.tcp,
            s.frames
        );
        assert!(std::fs::metadata(dir().join(&name)).expect("size").len() < 100_000);
        // Buffers smaller than a packet take the refill-and-grow paths: same frames.
        let want = frames(&name, 1 << 20);
        assert_eq!(frames(&name, 16), want, "{name}");
        assert_eq!(frames(&name, 1500), want, "{name}");
    }
}

#[test]
fn link_types_formats_and_totals() {
    use CaptureFormat::{Pcap, Pcapng};
    use LinkType::*;
    // (file, format, link types in order of appearance, frames, payload bytes, snapped)
    type Case = (
        &'static str,
        CaptureFormat,
        &'static [LinkType],
        usize,
        u64,
        usize,
    );
    let cases: [Case; 15] = [
        ("lo_eth.pcap", Pcap, &[Ethernet], 29, 5973, 0),
        ("lo_nano.pcap", Pcap, &[Ethernet], 29, 5973, 0),
        ("lo_be.pcap", Pcap, &[Ethernet], 29, 5973, 0),
        ("any_sll2.pcap", Pcap, &[LinuxSll2], 29, 5973, 0),
        ("any_sll.pcap", Pcap, &[LinuxSll], 29, 5973, 0),
        ("lo_snap96.pcap", Pcap, &[Ethernet], 42, 305_981, 11),
        ("rawip.pcap", Pcap, &[RawIp], 29, 5973, 0),
        ("null.pcap", Pcap, &[Null], 29, 5973, 0),
        ("loop.pcap", Pcap, &[Loop], 29, 5973, 0),
        ("v6_ext.pcap", Pcap, &[Ethernet], 29, 5973, 0),
        ("lo_eth.pcapng", Pcapng, &[Ethernet], 29, 5973, 0),
        ("lo_nano.pcapng", Pcapng, &[Ethernet], 29, 5973, 0),
        ("rawip4_snap96.pcapng", Pcapng, &[Ipv4], 42, 305_981, 11),
        (
            "merged.pcapng",
            Pcapng,
            &[Ethernet, LinuxSll],
            58,
            11_946,
            0,
        ),
        ("multi.pcapng", Pcapng, &[Ethernet, LinuxSll2], 24, 3_684, 0),
    ];
    for (name, format, links, frames, payload, snapped) in cases {
        let s = check(name);
        assert_eq!(s.format, format, "{name}");
        assert_eq!(s.links, links, "{name}");
        assert_eq!(
            (s.frames, s.payload_bytes, s.snapped),
            (frames, payload, snapped),
            "{name}"
        );
    }
}
