//! `analyze` on real captures of the link types beyond Ethernet (testdata/wire/links): 802.11
//! (plain, radiotap, PPI, Prism, AVS, and inside an access point's GRE), PPP, Cisco HDLC,
//! NFLOG, Juniper Ethernet. It finds the TCP flows and their finding, and says what it skipped and why.
//! Counts from tshark (see that folder's README).

mod common;

use std::path::Path;

fn dir() -> std::path::PathBuf {
    common::repo().join("testdata/wire/links")
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

fn kinds(report: &serde_json::Value) -> Vec<String> {
    report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| f["kind"].as_str().expect("kind").to_string())
        .collect()
}

/// Every link type: its name in the report, the TCP segments and flows tshark counts, and
/// the client's zero window (tshark: 3 zero-window segments in the first 100 frames of the
/// Aruba connection) found on every radio header the same 802.11 frames are written under,
/// and on none of the captures without it.
#[test]
fn tcp_on_every_link_type_is_found_with_its_finding() {
    // (file, link type, TCP segments, flows, zero window expected)
    let cases = [
        ("aruba_gre_zero_window.pcap", "Ethernet", 288, 1, true),
        ("aruba_gre_amsdu.pcap", "Ethernet", 2, 1, false),
        ("wlan_from_aruba.pcap", "IEEE 802.11", 100, 1, true),
        ("radiotap_from_aruba.pcap", "802.11 radiotap", 100, 1, true),
        ("ppi_from_aruba.pcap", "PPI", 100, 1, true),
        (
            "radiotap_amsdu_from_aruba.pcap",
            "802.11 radiotap",
            100,
            1,
            true,
        ),
        (
            "prism_from_aruba.pcap",
            "802.11 with Prism header",
            100,
            1,
            true,
        ),
        (
            "avs_from_aruba.pcap",
            "802.11 with AVS header",
            100,
            1,
            true,
        ),
        ("nflog_http.pcap", "Linux NFLOG", 13, 1, false),
        ("ppp_bgp.pcap", "PPP", 1, 1, false),
        ("ppp_mpls_bgp.pcap", "PPP", 3, 2, false),
        ("chdlc_ipv6_tcp.pcap", "Cisco HDLC", 1, 1, false),
        ("juniper_ether_bgp.pcap", "Juniper Ethernet", 1, 1, false),
    ];
    for (file, link, segments, flows, zero_window) in cases {
        let (v, _) = common::analyze_json(&dir().join(file));
        let c = &v["captures"][0];
        assert_eq!(c["link_types"], serde_json::json!([link]), "{file}");
        assert_eq!(c["tcp_segments"], segments, "{file}");
        assert_eq!(c["flows"], flows, "{file}");
        let s = &c["skipped"];
        for field in [
            "wlan_encrypted",
            "wlan_no_data",
            "wlan_aggregated",
            "wlan_bad_subframes",
            "unsupported_link",
        ] {
            assert_eq!(s[field], 0, "{file}: {field}");
        }
        assert_eq!(
            kinds(&v).contains(&"zero_window".to_string()),
            zero_window,
            "{file}: {:?}",
            kinds(&v)
        );
    }
}

/// Concatenates the records of pcap files with the same link type and byte order, in the
/// order given (their timestamps in that order only grow).
fn concat_pcaps(files: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let b = std::fs::read(dir().join(f)).expect("capture");
        out.extend_from_slice(if i == 0 { &b[..] } else { &b[24..] });
    }
    out
}

/// What could not be read is said, both ways: encrypted 802.11 frames beside TCP in one
/// capture; without them, no such line.
#[test]
fn the_report_says_what_it_skipped_and_why() {
    // 3 encrypted frames (2013), DNS and mDNS (2015), the TCP (2020), DHCP (2025): all radiotap.
    let mixed = concat_pcaps(&[
        "radiotap_ccmp.pcap",
        "radiotap_dns.pcap",
        "radiotap_from_aruba.pcap",
        "radiotap_htc_dhcp.pcap",
    ]);
    let file = common::scratch_file("analyze-links-mixed", "mixed.pcap", &mixed);
    let path = file.to_str().expect("utf-8");
    let out = common::tcpdoctor(&["analyze", path]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "\n  not analysed: 7 frames (4 UDP, 3 encrypted (802.11 protected, not decoded))\n"
        ),
        "{text}"
    );
    let (v, _) = common::analyze_json(Path::new(path));
    let s = &v["captures"][0]["skipped"];
    assert_eq!(
        (s["wlan_encrypted"].as_u64(), s["udp"].as_u64()),
        (Some(3), Some(4))
    );
    assert_eq!(
        s["not_tcp"], 4,
        "encrypted frames are not counted as not TCP"
    );
    assert!(kinds(&v).contains(&"zero_window".to_string()));

    let out = common::tcpdoctor(&["analyze", "testdata/wire/links/radiotap_from_aruba.pcap"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("not analysed"), "{text}");
    assert!(!text.contains("encrypted"), "{text}");
}

/// Captures without TCP: the error counts the encrypted and management 802.11 frames, and the non-IP frames, as tshark sees them.
#[test]
fn no_tcp_says_what_the_802_11_capture_held() {
    let cases = [
        (
            "prism_wpa_handshake.pcap",
            "13 frames — 4 not IP, 2 encrypted (802.11 protected, not decoded), 7 802.11 \
             management, control or null; link type 802.11 with Prism header",
        ),
        (
            "aruba_gre_ccmp.pcap",
            "2 frames — 2 encrypted (802.11 protected, not decoded); link type Ethernet",
        ),
        (
            "wlan_arp.pcap",
            "2 frames — 2 not IP; link type IEEE 802.11",
        ),
        (
            "ipnet_icmp.pcap",
            "20 frames — 20 ICMP; link type Solaris IPNET",
        ),
    ];
    for (name, seen) in cases {
        let file = format!("testdata/wire/links/{name}");
        let out = common::tcpdoctor(&["analyze", &file]);
        assert_eq!(out.status.code(), Some(2), "{name}");
        assert_eq!(
            stderr(&out),
            format!(
                "tcpdoctor: error: {file}: no TCP packets in this capture: {seen}; capture with \
                 a filter such as 'tcp port 8080'\n"
            )
        );
    }
}

/// An 802.11 A-MSDU is split as Wireshark splits it (tshark: two TLS segments, 229 and 23
/// bytes, in one frame): both segments analysed, the split said in text and JSON; a capture
/// without A-MSDUs says nothing of them; a subframe whose length runs past the frame leaves
/// the whole one before it analysed and the rest counted as not analysed, with why.
#[test]
fn an_amsdu_is_split_and_said() {
    let file = "testdata/wire/links/aruba_gre_amsdu.pcap";
    let out = common::tcpdoctor(&["analyze", file]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "\n  802.11 A-MSDU: 1 frame split into 2 subframes, each analysed as a packet of its \
             frame\n"
        ),
        "{text}"
    );
    assert!(!text.contains("not analysed"), "{text}");
    let (v, _) = common::analyze_json(&dir().join("aruba_gre_amsdu.pcap"));
    let c = &v["captures"][0];
    assert_eq!(
        c["amsdu"],
        serde_json::json!({"frames": 1, "subframes": 2}),
        "{c}"
    );
    assert_eq!(c["tcp_segments"], 2, "{c}");
    assert_eq!(c["tunnels"][0]["tcp_segments"], 2, "{c}");

    let (v, _) = common::analyze_json(&dir().join("aruba_gre_zero_window.pcap"));
    assert!(v["captures"][0].get("amsdu").is_none(), "{v}");
    let out = common::tcpdoctor(&["analyze", "testdata/wire/links/aruba_gre_zero_window.pcap"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("A-MSDU"));

    // The second subframe's length (83, at byte 424 of the file) made 256: past the frame.
    let mut pcap = std::fs::read(dir().join("aruba_gre_amsdu.pcap")).expect("capture");
    assert_eq!(pcap[424..426], [0x00, 0x53]);
    pcap[424..426].copy_from_slice(&256u16.to_be_bytes());
    let bad = common::scratch_file("analyze-links-amsdu", "bad_amsdu.pcap", &pcap);
    let out = common::tcpdoctor(&["analyze", bad.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "\n  not analysed: 1 frame (1 802.11 A-MSDU with a subframe length past the frame's \
             end (the rest not decoded))\n"
        ),
        "{text}"
    );
    let (v, _) = common::analyze_json(&bad);
    let c = &v["captures"][0];
    assert_eq!(
        c["amsdu"],
        serde_json::json!({"frames": 1, "subframes": 1}),
        "{c}"
    );
    assert_eq!(c["tcp_segments"], 1, "{c}");
    assert_eq!(c["skipped"]["wlan_bad_subframes"], 1, "{c}");
    assert_eq!(c["skipped"]["not_tcp"], 0, "{c}");
}

/// A link type still not decoded is named in the error, with its code.
#[test]
fn an_unknown_link_type_is_named() {
    let mut pcap = std::fs::read(dir().join("wlan_arp.pcap")).expect("capture");
    pcap[20..24].copy_from_slice(&201u32.to_le_bytes());
    let file = common::scratch_file("analyze-links-unknown", "bt.pcap", &pcap);
    let out = common::tcpdoctor(&["analyze", file.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unsupported link type 201 (Bluetooth HCI H4) at byte 20"),
        "{}",
        stderr(&out)
    );
}
