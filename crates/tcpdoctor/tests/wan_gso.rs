//! The delay line with TUN offloads (docs/wan.md, "How the line moves packets"): with delay
//! only it carries the kernel's GSO super-packets whole, and both ends' captures hold them with
//! their checksums whole; with anything more (here a path MTU) it cuts them into wire-sized
//! packets first. A bulk transfer (the `netbench` example: it ends only when the sink has read
//! every byte and answered) runs across the path as an unprivileged user; every captured
//! packet's IP and TCP checksums are verified here, independently of the line.

mod common;

use std::path::Path;

use common::live::{self, OpenDir};
use tcpdoctor_core::wire::readdress::{ipv4_addr, set_ipv4_addr, Field};
use tcpdoctor_core::wire::CaptureReader;

const FAR: [u8; 4] = [198, 18, 0, 1];
const BYTES: u64 = 16 << 20;

/// `netbench bulk` of [`BYTES`] to `netbench sink` across `sandbox --delay 1ms ARGS -w
/// g.pcapng`; false (with a reason printed) when this machine cannot build the path.
fn bulk_across(dir: &OpenDir, test: &str, args: &[&str]) -> bool {
    let bin = dir.install(&live::tcpdoctor_bin());
    let nb_built = live::tcpdoctor_bin()
        .parent()
        .expect("target dir")
        .join("examples/netbench");
    assert!(nb_built.exists(), "{} is missing", nb_built.display());
    let nb = dir.install(&nb_built).display().to_string();
    let out = live::unprivileged(&bin)
        .current_dir(&dir.0)
        .args(["sandbox", "--delay", "1ms", "-w", "g.pcapng"])
        .args(args)
        .arg("--server")
        .arg(format!("{nb} sink 127.0.0.1:7000"))
        .args(["--server-port", "7000", "--"])
        .arg(format!("{nb} bulk 198.18.0.1:7000 {BYTES}"))
        .output()
        .expect("run tcpdoctor sandbox");
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(2) && common::wan_unavailable(test, &err) {
        return false;
    }
    assert_eq!(out.status.code(), Some(0), "{test}: {err}");
    assert!(!err.contains("dropped"), "{test}: nothing may drop: {err}");
    true
}

/// Every packet of a capture, with the line's address rewrite undone.
fn packets(file: &Path) -> Vec<Vec<u8>> {
    let f = std::fs::File::open(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let mut r = CaptureReader::new(f).expect("a capture");
    let mut v = Vec::new();
    while let Some(fr) = r.next_frame().expect("readable") {
        assert_eq!(fr.data.len() as u32, fr.orig_len, "captured whole");
        let mut p = fr.data.to_vec();
        for field in [Field::Source, Field::Destination] {
            if ipv4_addr(&p, field) == Some([127, 0, 0, 1]) {
                set_ipv4_addr(&mut p, field, FAR);
            }
        }
        v.push(p);
    }
    v
}

/// RFC 1071, one word at a time.
fn sums_to_ones(parts: &[&[u8]]) -> bool {
    let mut s = 0u32;
    for part in parts {
        for c in part.chunks(2) {
            s += u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0));
            s = (s & 0xffff) + (s >> 16);
        }
    }
    s == 0xffff
}

/// Whether an IPv4/TCP packet's IP header and TCP checksums are right.
fn checksums_ok(p: &[u8]) -> bool {
    let ihl = usize::from(p[0] & 0x0f) * 4;
    let len = usize::from(u16::from_be_bytes([p[2], p[3]]));
    assert_eq!(len, p.len(), "IP length");
    let tcp_len = ((len - ihl) as u16).to_be_bytes();
    sums_to_ones(&[&p[..ihl]]) && sums_to_ones(&[&p[12..20], &[0, 6], &tcp_len, &p[ihl..]])
}

fn client_to_server(v: &[Vec<u8>]) -> Vec<Vec<u8>> {
    v.iter()
        .filter(|p| p.get(16..20) == Some(&FAR[..]))
        .cloned()
        .collect()
}

/// Checks both ends' captures: TCP over IPv4 only, checksums right at both ends, the same
/// client → server packets in the same order at both ends; returns the near end's packets.
fn both_ends(dir: &OpenDir) -> Vec<Vec<u8>> {
    let near = packets(&dir.path("g.pcapng"));
    let far = packets(&dir.path("g.server.pcapng"));
    for (end, v) in [("client", &near), ("server", &far)] {
        assert!(v.len() > 100, "{} packets at the {end}'s end", v.len());
        for (i, p) in v.iter().enumerate() {
            assert_eq!((p[0] >> 4, p[9]), (4, 6), "packet {i} at the {end}'s end");
            assert!(
                checksums_ok(p),
                "packet {i} at the {end}'s end: a bad checksum"
            );
        }
    }
    assert!(
        client_to_server(&near) == client_to_server(&far),
        "the two ends' client → server packets differ"
    );
    near
}

#[test]
fn with_delay_only_super_packets_cross_whole_and_are_captured_with_whole_checksums() {
    let dir = OpenDir::new("wan-gso");
    let test = "GSO super-packets across a delay-only path";
    if !bulk_across(&dir, test, &[]) {
        return;
    }
    let near = both_ends(&dir);
    let biggest = client_to_server(&near)
        .iter()
        .map(Vec::len)
        .max()
        .unwrap_or(0);
    // The devices' MTU is 1500: a larger packet is a super-packet the line carried whole.
    assert!(
        biggest > 1500,
        "largest client → server packet {biggest} bytes: no super-packet crossed"
    );
}

#[test]
fn with_a_path_mtu_the_line_carries_wire_sized_packets() {
    let dir = OpenDir::new("wan-seg");
    let test = "segmented super-packets across a path with an MTU";
    if !bulk_across(&dir, test, &["--path", "mtu=1500"]) {
        return;
    }
    let near = both_ends(&dir);
    let c2s = client_to_server(&near);
    let biggest = c2s.iter().map(Vec::len).max().unwrap_or(0);
    assert_eq!(biggest, 1500, "full-sized packets, none larger");
    // The client's bytes, every one, in order: the segments' sequence numbers follow each other.
    let mut next: Option<u32> = None;
    let mut payload = 0u64;
    for p in &c2s {
        let ihl = usize::from(p[0] & 0x0f) * 4;
        let doff = usize::from(p[ihl + 12] >> 4) * 4;
        let seq = u32::from_be_bytes([p[ihl + 4], p[ihl + 5], p[ihl + 6], p[ihl + 7]]);
        let len = (p.len() - ihl - doff) as u32;
        if len == 0 {
            continue;
        }
        if let Some(n) = next {
            assert_eq!(seq, n, "a gap or an overlap in the client's bytes");
        }
        next = Some(seq.wrapping_add(len));
        payload += u64::from(len);
    }
    assert_eq!(payload, BYTES);
}
