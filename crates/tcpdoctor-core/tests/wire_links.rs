//! Real captures on the link types beyond Ethernet and Linux cooked (testdata/wire/links: 802.11
//! with and without radio headers, 802.11 in an access point's GRE, PPP, Cisco HDLC, NFLOG,
//! IPNET) decoded and compared with tshark frame by frame (`F.tshark`, made by expected.sh), and
//! in total against counts written here from tshark.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tcpdoctor_core::wire::{decode_frame, decode_tcp, CaptureReader, Decoded, LinkType, WlanSkip};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/wire/links")
}

/// One frame as tshark saw it.
struct Row {
    protocols: String,
    /// Ports, raw sequence number, payload length of each TCP segment (several in an
    /// A-MSDU, whose subframes tshark lists comma-separated).
    tcp: Vec<(u16, u16, u32, u32)>,
    /// 802.11 type/subtype, Protected bit, A-MSDU bit.
    wlan: Option<(u16, bool, bool)>,
}

fn tshark_rows(name: &str) -> BTreeMap<u64, Row> {
    let path = dir().join(format!("{name}.tshark"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut rows = BTreeMap::new();
    for line in text.lines() {
        let c: Vec<&str> = line.split('\t').collect();
        assert_eq!(c.len(), 9, "{name}: {line}");
        let num = |s: &str| {
            s.parse::<u64>()
                .unwrap_or_else(|_| panic!("{s:?} in {line}"))
        };
        let field =
            |i: usize| -> Vec<u64> { c[i].split(',').filter(|v| !v.is_empty()).map(num).collect() };
        let (sp, dp, seq, len) = (field(2), field(3), field(4), field(5));
        assert!(
            [dp.len(), seq.len(), len.len()]
                .iter()
                .all(|&n| n == sp.len()),
            "{name}: {line}"
        );
        let tcp = (0..sp.len())
            .map(|i| (sp[i] as u16, dp[i] as u16, seq[i] as u32, len[i] as u32))
            .collect();
        let wlan = (!c[6].is_empty()).then(|| {
            let kind = u16::from_str_radix(c[6].trim_start_matches("0x"), 16).expect("subtype");
            (kind, c[7] == "1", c[8] == "1")
        });
        rows.insert(
            num(c[0]),
            Row {
                protocols: c[1].to_string(),
                tcp,
                wlan,
            },
        );
    }
    rows
}

/// What tcpdoctor must make of an 802.11 frame, from tshark's fields: only data frames with
/// a payload (type 2, subtype without the no-data bit) hold a packet; of those, protected
/// ones are encrypted. A-MSDUs are split (`decode_frame`), and aggregated to `decode_tcp`.
fn wlan_expected(kind: u16, protected: bool) -> Option<WlanSkip> {
    let data_with_payload = (0x20..0x30).contains(&kind) && kind & 0x4 == 0;
    if !data_with_payload {
        Some(WlanSkip::NoData)
    } else if protected {
        Some(WlanSkip::Encrypted)
    } else {
        None
    }
}

#[derive(Debug, Default, PartialEq, Eq)]
struct Totals {
    link: String,
    frames: u64,
    tcp: u64,
    not_tcp: u64,
    encrypted: u64,
    no_data: u64,
    /// A-MSDU frames (split into their subframes).
    amsdu: u64,
}

/// Decodes every frame of `name`, checking each against tshark's view.
fn check(name: &str) -> Totals {
    let rows = tshark_rows(name);
    let bytes = std::fs::read(dir().join(name)).expect("capture");
    let mut r = CaptureReader::new(&bytes[..]).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut t = Totals::default();
    while let Some(f) = r.next_frame().unwrap_or_else(|e| panic!("{name}: {e}")) {
        let at = format!("{name} frame {}", f.number);
        let row = rows
            .get(&f.number)
            .unwrap_or_else(|| panic!("{at}: no row"));
        t.frames += 1;
        t.link = f.link.to_string();
        let skip = row.wlan.and_then(|(k, p, _)| wlan_expected(k, p));
        let amsdu = row.wlan.is_some_and(|(_, _, a)| a) && skip.is_none();
        let packets = decode_frame(f.link, f.data, f.orig_len);
        assert_eq!(packets.is_amsdu(), amsdu, "{at} ({})", row.protocols);
        let packets: Vec<Decoded> = packets.collect();
        if amsdu {
            t.amsdu += 1;
            let one = decode_tcp(f.link, f.data, f.orig_len);
            assert_eq!(one, Decoded::Wlan(WlanSkip::Aggregated), "{at}");
        } else {
            assert_eq!(packets.len(), 1, "{at}: one packet");
            assert_eq!(packets[0], decode_tcp(f.link, f.data, f.orig_len), "{at}");
        }
        let mut segments = Vec::new();
        for decoded in packets {
            match (decoded, skip) {
                (Decoded::Wlan(got), Some(want)) => {
                    assert_eq!(got, want, "{at} ({})", row.protocols);
                    match got {
                        WlanSkip::Encrypted => t.encrypted += 1,
                        WlanSkip::NoData => t.no_data += 1,
                        other => panic!("{at}: {other:?}"),
                    }
                }
                (Decoded::Tcp(seg, _), None) => {
                    t.tcp += 1;
                    segments.push((seg.src.port, seg.dst.port, seg.seq, seg.payload_len));
                }
                (Decoded::NotTcp(_), None) => t.not_tcp += 1,
                (other, skip) => panic!(
                    "{at}: decoded {other:?}, tshark saw {} (802.11 {skip:?})",
                    row.protocols
                ),
            }
        }
        assert_eq!(
            segments, row.tcp,
            "{at}: ports, seq, payload ({})",
            row.protocols
        );
    }
    assert_eq!(t.frames as usize, rows.len(), "{name}: every frame read");
    t
}

#[test]
fn every_link_type_decodes_as_tshark_does() {
    // (capture, link type, frames, TCP segments, not TCP, 802.11 encrypted, without data,
    // A-MSDU frames). From tshark: `-T fields -e frame.protocols` (the TCP segments each frame
    // lists, two in the A-MSDU's; the rest
    // not TCP) and `-e wlan.fc.type_subtype -e wlan.fc.protected -e wlan.qos.amsdupresent`.
    type Case = (&'static str, &'static str, [u64; 6]);
    let cases: [Case; 28] = [
        (
            "aruba_gre_zero_window.pcap",
            "Ethernet",
            [288, 288, 0, 0, 0, 0],
        ),
        ("aruba_gre_amsdu.pcap", "Ethernet", [1, 2, 0, 0, 0, 1]),
        ("aruba_gre_ccmp.pcap", "Ethernet", [2, 0, 0, 2, 0, 0]),
        (
            "wlan_from_aruba.pcap",
            "IEEE 802.11",
            [100, 100, 0, 0, 0, 0],
        ),
        (
            "radiotap_from_aruba.pcap",
            "802.11 radiotap",
            [100, 100, 0, 0, 0, 0],
        ),
        ("ppi_from_aruba.pcap", "PPI", [100, 100, 0, 0, 0, 0]),
        (
            "radiotap_amsdu_from_aruba.pcap",
            "802.11 radiotap",
            [50, 100, 0, 0, 0, 50],
        ),
        (
            "prism_from_aruba.pcap",
            "802.11 with Prism header",
            [100, 100, 0, 0, 0, 0],
        ),
        (
            "avs_from_aruba.pcap",
            "802.11 with AVS header",
            [100, 100, 0, 0, 0, 0],
        ),
        ("wlan_dns.pcap", "IEEE 802.11", [3, 0, 3, 0, 0, 0]),
        ("wlan_arp.pcap", "IEEE 802.11", [2, 0, 2, 0, 0, 0]),
        ("radiotap_dns.pcap", "802.11 radiotap", [3, 0, 3, 0, 0, 0]),
        ("radiotap_arp.pcap", "802.11 radiotap", [2, 0, 2, 0, 0, 0]),
        (
            "radiotap_htc_dhcp.pcap",
            "802.11 radiotap",
            [1, 0, 1, 0, 0, 0],
        ),
        ("radiotap_ccmp.pcap", "802.11 radiotap", [3, 0, 0, 3, 0, 0]),
        (
            "prism_wpa_handshake.pcap",
            "802.11 with Prism header",
            [13, 0, 4, 2, 7, 0],
        ),
        ("ppi_eth_dns.pcap", "PPI", [6, 0, 6, 0, 0, 0]),
        ("ppp_bgp.pcap", "PPP", [1, 1, 0, 0, 0, 0]),
        ("ppp_mpls_bgp.pcap", "PPP", [13, 3, 10, 0, 0, 0]),
        ("ppp_quic.pcap", "PPP", [26, 0, 26, 0, 0, 0]),
        (
            "ppp_hdlc_escaped.pcap",
            "PPP in HDLC framing",
            [1, 0, 1, 0, 0, 0],
        ),
        ("chdlc_ipv6_tcp.pcap", "Cisco HDLC", [3, 1, 2, 0, 0, 0]),
        ("chdlc_icmp_slarp.pcap", "Cisco HDLC", [38, 0, 38, 0, 0, 0]),
        ("nflog_http.pcap", "Linux NFLOG", [13, 13, 0, 0, 0, 0]),
        ("nflog_dns.pcap", "Linux NFLOG", [4, 0, 4, 0, 0, 0]),
        ("ipnet_icmp.pcap", "Solaris IPNET", [20, 0, 20, 0, 0, 0]),
        (
            "juniper_ether_bgp.pcap",
            "Juniper Ethernet",
            [1, 1, 0, 0, 0, 0],
        ),
        (
            "juniper_ether_isis.pcap",
            "Juniper Ethernet",
            [1, 0, 1, 0, 0, 0],
        ),
    ];
    let mut files: Vec<String> = std::fs::read_dir(dir())
        .expect("testdata/wire/links")
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
    for (name, link, [frames, tcp, not_tcp, encrypted, no_data, amsdu]) in cases {
        let size = std::fs::metadata(dir().join(name)).expect("size").len();
        assert!(size < 100_000, "{name} is {size} bytes");
        let want = Totals {
            link: link.to_string(),
            frames,
            tcp,
            not_tcp,
            encrypted,
            no_data,
            amsdu,
        };
        assert_eq!(check(name), want, "{name}");
    }
}

/// The link types decoded here are named, not "not decoded"; one still not decoded says so.
#[test]
fn link_type_names() {
    for (code, name) in [
        (9, "PPP"),
        (50, "PPP in HDLC framing"),
        (104, "Cisco HDLC"),
        (105, "IEEE 802.11"),
        (119, "802.11 with Prism header"),
        (127, "802.11 radiotap"),
        (163, "802.11 with AVS header"),
        (192, "PPI"),
        (226, "Solaris IPNET"),
        (239, "Linux NFLOG"),
        (178, "Juniper Ethernet"),
    ] {
        let link = LinkType::from_code(code);
        assert!(link.is_supported(), "{code}");
        assert_eq!(link.to_string(), name);
    }
    assert_eq!(
        LinkType::from_code(201).to_string(),
        "Bluetooth HCI H4 (201, not decoded)"
    );
}

/// Every prefix of the first frames of every capture, and each of their first 256 bytes set to
/// 0x00, 0xff or flipped: the decoder answers without a panic, and a TCP answer never claims
/// more payload than the frame's length on the wire.
#[test]
fn cut_and_mutated_real_frames_never_panic() {
    let mut decoded = 0u64;
    for entry in std::fs::read_dir(dir()).expect("testdata/wire/links") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("pcap") {
            continue;
        }
        let bytes = std::fs::read(&path).expect("capture");
        let mut r = CaptureReader::new(&bytes[..]).expect("header");
        let mut n = 0;
        while let Some(f) = r.next_frame().expect("frame") {
            n += 1;
            if n > 12 {
                break;
            }
            let (link, orig) = (f.link, f.orig_len);
            let mut check = |data: &[u8]| {
                decoded += 1;
                let room = (orig as usize).max(data.len()) as u32;
                if let Decoded::Tcp(seg, _) = decode_tcp(link, data, orig) {
                    assert!(seg.payload_len <= room, "{path:?} frame {n}");
                }
                for d in decode_frame(link, data, orig) {
                    if let Decoded::Tcp(seg, _) = d {
                        assert!(seg.payload_len <= room, "{path:?} frame {n}");
                    }
                }
            };
            for cut in 0..=f.data.len() {
                check(&f.data[..cut]);
            }
            let mut data = f.data.to_vec();
            for i in 0..data.len().min(256) {
                let keep = data[i];
                for b in [0x00, 0xff, !keep] {
                    data[i] = b;
                    check(&data);
                }
                data[i] = keep;
            }
        }
    }
    assert!(decoded > 50_000, "{decoded}");
}
