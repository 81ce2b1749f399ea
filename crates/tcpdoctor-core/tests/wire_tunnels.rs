//! Real tunnelled captures (testdata/wire/tunnels, from the tcpdump and Zeek test suites) decoded
//! and compared with tshark: frame by frame against the committed tshark view (`F.tshark`, made
//! by expected.sh), and in total against counts written here from tshark.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tcpdoctor_core::wire::{decode_tcp, CaptureReader, Decoded, NotTcp, Tunnel};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/wire/tunnels")
}

/// tshark's TCP fields of a frame: ports, raw sequence number, payload length.
type TcpRow = (u16, u16, u32, u32);

/// Frame number → (protocols, TCP fields if tshark found TCP).
fn tshark_rows(name: &str) -> BTreeMap<u64, (String, Option<TcpRow>)> {
    let path = dir().join(format!("{name}.tshark"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut rows = BTreeMap::new();
    for line in text.lines() {
        let c: Vec<&str> = line.split('\t').collect();
        assert_eq!(c.len(), 6, "{name}: {line}");
        let num = |s: &str| {
            s.parse::<u64>()
                .unwrap_or_else(|_| panic!("{s:?} in {line}"))
        };
        let tcp = (!c[2].is_empty()).then(|| {
            (
                num(c[2]) as u16,
                num(c[3]) as u16,
                num(c[4]) as u32,
                num(c[5]) as u32,
            )
        });
        rows.insert(num(c[0]), (c[1].to_string(), tcp));
    }
    rows
}

/// What a capture held, as tcpdoctor decoded it.
#[derive(Debug, Default, PartialEq, Eq)]
struct Totals {
    frames: u64,
    tcp: u64,
    /// TCP segments found inside a tunnel, and the (outermost) tunnel.
    tcp_in_tunnel: BTreeMap<Tunnel, u64>,
    /// Tunnel packets without TCP inside.
    not_tcp_in_tunnel: BTreeMap<Tunnel, u64>,
}

/// Decodes every frame of `name`, checking each against tshark's view.
fn check(name: &str) -> Totals {
    let rows = tshark_rows(name);
    let bytes = std::fs::read(dir().join(name)).expect("capture");
    let mut r = CaptureReader::new(&bytes[..]).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut t = Totals::default();
    while let Some(f) = r.next_frame().unwrap_or_else(|e| panic!("{name}: {e}")) {
        let at = format!("{name} frame {}", f.number);
        let (protocols, tcp) = rows
            .get(&f.number)
            .unwrap_or_else(|| panic!("{at}: no row"));
        t.frames += 1;
        match (decode_tcp(f.link, f.data, f.orig_len), tcp) {
            (Decoded::Tcp(seg, via), Some(want)) => {
                t.tcp += 1;
                if let Some(via) = via {
                    *t.tcp_in_tunnel.entry(via).or_default() += 1;
                }
                let got = (seg.src.port, seg.dst.port, seg.seq, seg.payload_len);
                assert_eq!(got, *want, "{at}: ports, seq, payload length ({protocols})");
            }
            (Decoded::NotTcp(what), None) => {
                if let NotTcp::InTunnel(via) = what {
                    *t.not_tcp_in_tunnel.entry(via).or_default() += 1;
                }
            }
            (other, _) => panic!("{at}: decoded {other:?}, tshark saw {protocols} {tcp:?}"),
        }
    }
    assert_eq!(t.frames as usize, rows.len(), "{name}: every frame read");
    t
}

#[test]
fn tunnelled_tcp_is_found_as_tshark_finds_it() {
    use Tunnel::*;
    // (capture, frames, TCP segments, tunnel, TCP segments inside it, its packets without
    // TCP). From `tshark -r F -T fields -e frame.protocols | sort | uniq -c`: the TCP count
    // is the frames with `tcp`, the tunnel's are the frames through `geneve`, `vxlan`, `gre`,
    // `erspan`, `mpls`, `pppoes`, or `ipv6:ip` (IP in IP).
    type Case = (&'static str, u64, u64, Option<Tunnel>, u64, u64);
    let cases: [Case; 13] = [
        ("geneve_tcp.pcap", 39, 33, Some(Geneve), 33, 6),
        ("vxlan_gso_ipv4.pcap", 1, 1, Some(Vxlan), 1, 0),
        ("vxlan_http.pcap", 12, 12, Some(Vxlan), 12, 0),
        ("vxlan_no_tcp.pcap", 10, 0, Some(Vxlan), 0, 10),
        ("gre_ip.pcap", 40, 22, Some(Gre), 22, 18),
        ("gre_in_udp.pcap", 14, 10, Some(Gre), 10, 4),
        ("gre_wccp_redirect.pcap", 1, 1, Some(Gre), 1, 0),
        ("erspan2_no_tcp.pcap", 16, 0, Some(Erspan), 0, 16),
        ("erspan3_no_tcp.pcap", 9, 0, Some(Erspan), 0, 9),
        ("mpls_vlan_mixed.pcap", 47, 47, Some(Mpls), 11, 0),
        ("pppoe_over_qinq.pcap", 86, 86, Some(Pppoe), 86, 0),
        ("ipv4_in_ipv6.pcap", 1, 1, Some(IpInIp), 1, 0),
        ("qinqinq.pcap", 14, 14, None, 0, 0),
    ];
    let mut files: Vec<String> = std::fs::read_dir(dir())
        .expect("testdata/wire/tunnels")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".pcap"))
        .collect();
    files.sort();
    let mut listed: Vec<String> = cases.iter().map(|c| c.0.to_string()).collect();
    listed.sort();
    assert_eq!(
        files, listed,
        "every capture in the folder has its line here"
    );
    for (name, frames, tcp, tunnel, inside, without) in cases {
        let size = std::fs::metadata(dir().join(name)).expect("size").len();
        assert!(size < 100_000, "{name} is {size} bytes");
        let mut want = Totals {
            frames,
            tcp,
            ..Totals::default()
        };
        if let Some(t) = tunnel {
            if inside > 0 {
                want.tcp_in_tunnel.insert(t, inside);
            }
            if without > 0 {
                want.not_tcp_in_tunnel.insert(t, without);
            }
        }
        assert_eq!(check(name), want, "{name}");
    }
}

/// The GSO super-packet's payload length must come from the inner IP header (its ~7,000
/// bytes, several MTUs), not from the outer packet's or the captured length.
#[test]
fn a_vxlan_gso_super_packet_keeps_its_inner_length() {
    let rows = tshark_rows("vxlan_gso_ipv4.pcap");
    let want = rows[&1].1.expect("tcp").3;
    assert!(want > 6000, "{want}");
    let bytes = std::fs::read(dir().join("vxlan_gso_ipv4.pcap")).expect("capture");
    let mut r = CaptureReader::new(&bytes[..]).expect("header");
    let f = r.next_frame().expect("ok").expect("frame");
    let seg = decode_tcp(f.link, f.data, f.orig_len);
    assert_eq!(seg.tcp().map(|s| s.payload_len), Some(want));
}
