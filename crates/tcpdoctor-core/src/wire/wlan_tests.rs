//! 802.11, its radio headers, PPP/HDLC, NFLOG and IPNET: header lengths, what is skipped,
//! and every cut of every frame decoding without a panic.

use super::super::testutil::eth;
use super::super::testutil::{ipv4_pkt, tcp_hdr, Tcp};
use super::super::{decode_frame, decode_tcp, Decoded, LinkType, NotTcp, Tunnel, WlanSkip};

fn v4_tcp() -> Vec<u8> {
    let mut seg = tcp_hdr(&Tcp::default());
    seg.resize(seg.len() + 100, 0x5a);
    ipv4_pkt(6, 0, None, &[], &seg)
}

const SNAP_IPV4: [u8; 8] = [0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00];

/// An 802.11 data frame: frame control, flags, the address fields for `ds`, QoS control
/// (`qos: Some(first byte)`), HT control when `order`, then `payload`.
fn wlan(subtype: u8, flags: u8, qos: Option<u8>, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![(subtype << 4) | (2 << 2), flags, 0, 0];
    f.extend([0x11; 20]); // addresses 1-3, sequence control
    if flags & 3 == 3 {
        f.extend([0x22; 6]);
    }
    if let Some(q) = qos {
        f.extend([q, 0]);
        if flags & 0x80 != 0 {
            f.extend([0x33; 4]);
        }
    }
    f.extend(payload);
    f
}

fn radiotap(flags: Option<u8>, frame: &[u8]) -> Vec<u8> {
    // present: TSFT, Flags (if any), Rate; fields: 8-byte TSFT, flags, rate.
    let present: u32 = 1 | 4 | if flags.is_some() { 2 } else { 0 };
    let mut h = vec![0, 0, 0, 0];
    h.extend(present.to_le_bytes());
    h.extend([0xee; 8]);
    if let Some(fl) = flags {
        h.push(fl);
    }
    h.push(0x0c);
    let len = h.len() as u16;
    h[2..4].copy_from_slice(&len.to_le_bytes());
    [h, frame.to_vec()].concat()
}

fn payload_len(link: LinkType, data: &[u8]) -> Result<u32, Decoded> {
    match decode_tcp(link, data, data.len() as u32) {
        Decoded::Tcp(seg, _) => Ok(seg.payload_len),
        other => Err(other),
    }
}

#[test]
fn data_header_lengths_by_ds_qos_and_order() {
    let ip = [&SNAP_IPV4[..], &v4_tcp()].concat();
    // (what, subtype, flags, QoS byte): every one must land exactly on the LLC header.
    let cases = [
        ("data to DS", 0, 0x01, None),
        ("data from DS", 0, 0x02, None),
        ("data, no DS (ad hoc)", 0, 0x00, None),
        ("data, four addresses", 0, 0x03, None),
        ("QoS data", 8, 0x01, Some(0)),
        ("QoS data, four addresses", 8, 0x03, Some(0)),
        ("QoS data, HT control", 8, 0x81, Some(0)),
        ("QoS data, four addresses, HT control", 8, 0x83, Some(0)),
        ("non-QoS data with Order: no HT control", 0, 0x81, None),
    ];
    for (what, subtype, flags, qos) in cases {
        let f = wlan(subtype, flags, qos, &ip);
        assert_eq!(payload_len(LinkType::Ieee80211, &f), Ok(100), "{what}");
        // One byte off in either direction must not be read as TCP.
        for shift in [
            &f[..f.len() - ip.len() - 1],
            &[&f[..f.len() - ip.len()], &[0][..]].concat(),
        ] {
            let moved = [shift, &ip[..]].concat();
            assert!(
                payload_len(LinkType::Ieee80211, &moved).is_err(),
                "{what} shifted"
            );
        }
    }
}

#[test]
fn what_is_not_a_readable_data_frame_is_said() {
    let ip = [&SNAP_IPV4[..], &v4_tcp()].concat();
    let beacon = [&[0x80, 0, 0, 0][..], &[0; 32]].concat();
    let ack = [0xd4, 0, 0, 0, 1, 2, 3, 4, 5, 6];
    let null = wlan(4, 0x01, None, &[]);
    let qos_null = wlan(12, 0x01, Some(0), &[]);
    let protected = wlan(8, 0x41, Some(0), &[0x77; 120]);
    let amsdu = wlan(8, 0x01, Some(0x80), &ip);
    let eapol = wlan(0, 0x01, None, &[0xaa, 0xaa, 3, 0, 0, 0, 0x88, 0x8e, 1, 3]);
    let stp = wlan(0, 0x01, None, &[0x42, 0x42, 3, 0, 0, 0, 0, 0]);
    let cases: [(&str, &[u8], Decoded); 8] = [
        ("beacon", &beacon, Decoded::Wlan(WlanSkip::NoData)),
        ("ack", &ack, Decoded::Wlan(WlanSkip::NoData)),
        ("null function", &null, Decoded::Wlan(WlanSkip::NoData)),
        ("QoS null", &qos_null, Decoded::Wlan(WlanSkip::NoData)),
        ("CCMP", &protected, Decoded::Wlan(WlanSkip::Encrypted)),
        // One answer per frame from decode_tcp: an A-MSDU's is that it holds several.
        ("A-MSDU", &amsdu, Decoded::Wlan(WlanSkip::Aggregated)),
        ("EAPOL", &eapol, Decoded::NotTcp(NotTcp::NotIp)),
        ("spanning tree LLC", &stp, Decoded::NotTcp(NotTcp::NotIp)),
    ];
    for (what, f, want) in cases {
        assert_eq!(payload_len(LinkType::Ieee80211, f), Err(want), "{what}");
    }
}

#[test]
fn radio_headers_are_skipped_by_their_length() {
    let frame = wlan(8, 0x02, Some(0), &[&SNAP_IPV4[..], &v4_tcp()].concat());
    // Radiotap with the data-pad flag: the 26-byte QoS header is padded to 28.
    let padded = {
        let mut f = frame.clone();
        f.splice(26..26, [0, 0]);
        f
    };
    let mut prism = vec![0, 0, 0, 0x44, 144, 0, 0, 0];
    prism.resize(144, 0);
    let mut avs = vec![0x80, 0x21, 0x10, 0x01, 0, 0, 0, 64];
    avs.resize(64, 0);
    let mut ppi = vec![0, 0, 8, 0, 105, 0, 0, 0];
    ppi.extend([0x99; 12]);
    ppi[2] = 20;
    let cases: [(&str, LinkType, Vec<u8>); 7] = [
        ("radiotap", LinkType::Radiotap, radiotap(Some(0x10), &frame)),
        (
            "radiotap without Flags",
            LinkType::Radiotap,
            radiotap(None, &frame),
        ),
        (
            "radiotap, padded",
            LinkType::Radiotap,
            radiotap(Some(0x20), &padded),
        ),
        ("Prism", LinkType::Prism, [prism, frame.clone()].concat()),
        (
            "AVS as Prism",
            LinkType::Prism,
            [avs.clone(), frame.clone()].concat(),
        ),
        ("AVS", LinkType::Avs, [avs, frame.clone()].concat()),
        ("PPI", LinkType::Ppi, [ppi, frame.clone()].concat()),
    ];
    for (what, link, f) in cases {
        assert_eq!(payload_len(link, &f), Ok(100), "{what}");
    }
}

#[test]
fn serial_and_host_links() {
    let ip = v4_tcp();
    let mut nflog = vec![2, 0, 0, 0];
    nflog.extend([8, 0, 1, 0, 0x08, 0x00, 3, 0]); // NFULA_PACKET_HDR
    nflog.extend([7, 0, 10, 0, b'e', b't', b'h', 0]); // a 7-byte TLV, padded to 8
    nflog.extend(((ip.len() + 4) as u16).to_le_bytes());
    nflog.extend([9, 0]);
    nflog.extend(&ip);
    let mut nflog_be = vec![2, 0, 0, 0];
    nflog_be.extend(((ip.len() + 4) as u16).to_be_bytes());
    nflog_be.extend([0, 9]);
    nflog_be.extend(&ip);
    let ipnet = [&[1, 2, 0, 0][..], &[0; 20], &ip].concat();
    let cases: [(&str, LinkType, Vec<u8>); 8] = [
        (
            "PPP",
            LinkType::Ppp,
            [&[0xff, 0x03, 0, 0x21][..], &ip].concat(),
        ),
        (
            "PPP, no address",
            LinkType::Ppp,
            [&[0, 0x21][..], &ip].concat(),
        ),
        (
            "PPP, compressed",
            LinkType::Ppp,
            [&[0x21][..], &ip].concat(),
        ),
        (
            "Cisco HDLC on PPP",
            LinkType::Ppp,
            [&[0x0f, 0, 8, 0][..], &ip].concat(),
        ),
        (
            "PPP in HDLC",
            LinkType::PppHdlc,
            [&[0xff, 0x03, 0, 0x21][..], &ip].concat(),
        ),
        (
            "Cisco HDLC",
            LinkType::CiscoHdlc,
            [&[0x8f, 0, 8, 0][..], &ip].concat(),
        ),
        ("NFLOG", LinkType::Nflog, nflog),
        ("NFLOG, big-endian TLVs", LinkType::Nflog, nflog_be),
    ];
    for (what, link, f) in cases {
        assert_eq!(payload_len(link, &f), Ok(100), "{what}");
    }
    assert_eq!(payload_len(LinkType::Ipnet, &ipnet), Ok(100));
    let ext = [&b"MGC"[..], &[0x80, 0, 3, 1, 1, 6]].concat();
    let juniper = [&ext[..], &[0; 12], &[8, 0], &ip].concat();
    assert_eq!(payload_len(LinkType::JuniperEther, &juniper), Ok(100));
    let no_l2 = [&b"MGC"[..], &[0x02, 0, 0, 0, 2], &ip].concat();
    assert_eq!(payload_len(LinkType::JuniperEther, &no_l2), Ok(100));
    let mut not_juniper = juniper.clone();
    not_juniper[0] = b'X';
    assert_eq!(
        payload_len(LinkType::JuniperEther, &not_juniper),
        Err(Decoded::NotTcp(NotTcp::NotIp))
    );
    let mut arp = ipnet.clone();
    arp[1] = 0x99;
    assert_eq!(
        payload_len(LinkType::Ipnet, &arp),
        Err(Decoded::NotTcp(NotTcp::NotIp))
    );
    let lcp = [0xff, 0x03, 0xc0, 0x21, 1, 1, 0, 4];
    assert_eq!(
        payload_len(LinkType::Ppp, &lcp),
        Err(Decoded::NotTcp(NotTcp::NotIp))
    );
}

/// Every prefix of every frame, and hostile lengths: an answer, never a panic; a cut inside
/// the headers is truncated (or an 802.11 frame already known to hold nothing).
#[test]
fn cut_and_hostile_headers_never_panic() {
    let frame = wlan(8, 0x83, Some(0), &[&SNAP_IPV4[..], &v4_tcp()].concat());
    let mut frames: Vec<(LinkType, Vec<u8>)> = vec![
        (LinkType::Ieee80211, frame.clone()),
        (LinkType::Radiotap, radiotap(Some(0x20), &frame)),
        (
            LinkType::Ppp,
            [&[0xff, 0x03, 0, 0x21][..], &v4_tcp()].concat(),
        ),
        (
            LinkType::CiscoHdlc,
            [&[0x0f, 0, 8, 0][..], &v4_tcp()].concat(),
        ),
        (
            LinkType::Ipnet,
            [&[1, 2, 0, 0][..], &[0; 20], &v4_tcp()].concat(),
        ),
    ];
    for link in [
        LinkType::Prism,
        LinkType::Avs,
        LinkType::Ppi,
        LinkType::Nflog,
    ] {
        frames.push((link, vec![0xff; 300]));
    }
    // Radiotap claiming 65,535 bytes; endless extended present words; PPI and AVS lengths
    // beyond the frame; an NFLOG TLV claiming more than is there.
    let mut huge = radiotap(None, &frame);
    huge[2..4].copy_from_slice(&[0xff, 0xff]);
    frames.push((LinkType::Radiotap, huge));
    let mut ext = vec![0, 0, 200, 0];
    ext.extend([0xff; 196]);
    frames.push((LinkType::Radiotap, ext));
    frames.push((LinkType::Ppi, vec![0, 0, 0xff, 0xff, 105, 0, 0, 0]));
    frames.push((
        LinkType::Avs,
        vec![0x80, 0x21, 0x10, 0x02, 0xff, 0xff, 0xff, 0xff],
    ));
    frames.push((LinkType::Nflog, vec![2, 0, 0, 0, 0xff, 0xff, 9, 0, 0x45]));
    frames.push((
        LinkType::JuniperEther,
        vec![b'M', b'G', b'C', 0x82, 0xff, 0xff, 0x45],
    ));
    for (link, f) in &frames {
        for cut in 0..=f.len() {
            let d = decode_tcp(*link, &f[..cut], f.len() as u32);
            if let Decoded::Tcp(seg, _) = d {
                assert!(seg.payload_len <= f.len() as u32, "{link:?} cut {cut}");
            }
        }
    }
    for cut in 0..frame.len() - 100 {
        assert_eq!(
            decode_tcp(LinkType::Ieee80211, &frame[..cut], frame.len() as u32),
            Decoded::Truncated,
            "802.11 cut at {cut}"
        );
    }
}

/// An IPv4 TCP packet with sequence number `seq` and `payload` bytes.
fn v4_tcp_seq(seq: u32, payload: usize) -> Vec<u8> {
    let mut seg = tcp_hdr(&Tcp {
        seq,
        ..Tcp::default()
    });
    seg.resize(seg.len() + payload, 0x5a);
    ipv4_pkt(6, 0, None, &[], &seg)
}

/// A-MSDU subframes: destination, source, big-endian length, LLC/SNAP and the packet; each
/// but the last padded to a multiple of 4 bytes.
fn subframes(packets: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, p) in packets.iter().enumerate() {
        let body = [&SNAP_IPV4[..], p].concat();
        out.extend([0xd1; 6]);
        out.extend([0x51; 6]);
        out.extend((body.len() as u16).to_be_bytes());
        out.extend(&body);
        if i + 1 < packets.len() {
            out.resize(out.len().next_multiple_of(4), 0);
        }
    }
    out
}

/// Each packet of a frame: the TCP sequence number and payload length, or what it is.
fn split(link: LinkType, data: &[u8]) -> Vec<Result<(u32, u32), Decoded>> {
    decode_frame(link, data, data.len() as u32)
        .map(|d| match d {
            Decoded::Tcp(seg, _) => Ok((seg.seq, seg.payload_len)),
            other => Err(other),
        })
        .collect()
}

#[test]
fn an_amsdu_is_split_into_its_subframes() {
    // Payloads of 100, 3 and 41 bytes: the first two subframes need padding (154 and 57
    // bytes long), the third does not.
    let packets = [v4_tcp_seq(1, 100), v4_tcp_seq(101, 3), v4_tcp_seq(104, 41)];
    let want = vec![Ok((1, 100)), Ok((101, 3)), Ok((104, 41))];
    let body = subframes(&packets);
    let frame = wlan(8, 0x01, Some(0x80), &body);
    assert_eq!(split(LinkType::Ieee80211, &frame), want);
    assert!(decode_frame(LinkType::Ieee80211, &frame, frame.len() as u32).is_amsdu());
    // Four addresses, HT control and a radiotap header that pads the 802.11 header (36 bytes
    // with HT control: no pad) or not: the subframes start where the header ends.
    let bridged = wlan(8, 0x83, Some(0x80), &body);
    assert_eq!(split(LinkType::Ieee80211, &bridged), want);
    let padded = [&wlan(8, 0x01, Some(0x80), &[])[..], &[0, 0], &body].concat();
    assert_eq!(
        split(LinkType::Radiotap, &radiotap(Some(0x20), &padded)),
        want
    );
    // A frame check sequence after the last subframe (4 bytes, fewer than a subframe header)
    // is not a subframe.
    let fcs = [&frame[..], &[0xfc; 4]].concat();
    assert_eq!(split(LinkType::Ieee80211, &fcs), want);
    // In an Aruba access point's GRE, every segment is the tunnel's.
    let gre = [&[0u8, 0, 0x82, 0x00][..], &frame].concat();
    let outer = eth(0x0800, &[], &ipv4_pkt(47, 0, None, &[], &gre));
    let vias: Vec<Option<Tunnel>> = decode_frame(LinkType::Ethernet, &outer, outer.len() as u32)
        .map(|d| match d {
            Decoded::Tcp(_, via) => via,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(vias, [Some(Tunnel::Gre); 3]);
    // One subframe holding ARP (not IP) between two TCP ones.
    let mut arp_body = subframes(&[packets[0].clone(), vec![0; 28], packets[2].clone()]);
    let second = (14 + SNAP_IPV4.len() + packets[0].len()).next_multiple_of(4);
    assert_eq!(arp_body[second + 14 + 6..second + 14 + 8], [0x08, 0x00]);
    arp_body[second + 14 + 6..second + 14 + 8].copy_from_slice(&[0x08, 0x06]);
    let arp = wlan(8, 0x01, Some(0x80), &arp_body);
    assert_eq!(
        split(LinkType::Ieee80211, &arp),
        [
            Ok((1, 100)),
            Err(Decoded::NotTcp(NotTcp::NotIp)),
            Ok((104, 41))
        ]
    );
}

#[test]
fn without_the_amsdu_bit_a_frame_is_one_packet() {
    // The same QoS data frame with the A-MSDU bit clear: one packet, its LLC right after the
    // header. Subframe bytes there are no LLC: not IP, and nothing split.
    let one = wlan(
        8,
        0x01,
        Some(0x00),
        &[&SNAP_IPV4[..], &v4_tcp_seq(7, 64)].concat(),
    );
    assert_eq!(split(LinkType::Ieee80211, &one), [Ok((7, 64))]);
    assert!(!decode_frame(LinkType::Ieee80211, &one, one.len() as u32).is_amsdu());
    let body = subframes(&[v4_tcp_seq(1, 10), v4_tcp_seq(11, 10)]);
    let not_amsdu = wlan(8, 0x01, Some(0x00), &body);
    assert_eq!(
        split(LinkType::Ieee80211, &not_amsdu),
        [Err(Decoded::NotTcp(NotTcp::NotIp))]
    );
    // Plain (non-QoS) data has no A-MSDU bit at all.
    let plain = wlan(0, 0x02, None, &[&SNAP_IPV4[..], &v4_tcp_seq(9, 5)].concat());
    assert_eq!(split(LinkType::Ieee80211, &plain), [Ok((9, 5))]);
}

#[test]
fn a_subframe_longer_than_the_frame_ends_the_split() {
    let packets = [v4_tcp_seq(1, 100), v4_tcp_seq(101, 20), v4_tcp_seq(121, 30)];
    let body = subframes(&packets);
    let second = (14 + SNAP_IPV4.len() + packets[0].len()).next_multiple_of(4);
    let bad = Err(Decoded::Wlan(WlanSkip::BadSubframe));
    // The second subframe claims 1,000 bytes: the first is decoded, the rest counted once.
    let mut long = body.clone();
    long[second + 12..second + 14].copy_from_slice(&1000u16.to_be_bytes());
    let frame = wlan(8, 0x01, Some(0x80), &long);
    assert_eq!(split(LinkType::Ieee80211, &frame), [Ok((1, 100)), bad]);
    // The first does: nothing is decoded.
    let mut first = body.clone();
    first[12..14].copy_from_slice(&0xffffu16.to_be_bytes());
    let frame = wlan(8, 0x01, Some(0x80), &first);
    assert_eq!(split(LinkType::Ieee80211, &frame), [bad]);
    // An A-MSDU without a single subframe is malformed too, and counted.
    let empty = wlan(8, 0x01, Some(0x80), &[0; 6]);
    assert_eq!(split(LinkType::Ieee80211, &empty), [bad]);
    // A length shorter than the packet bounds it: its IP header then claims more than the
    // subframe holds (malformed), and the next subframe is looked for where that length
    // says, inside the first packet (its TCP window, 512, is read as a length: too long).
    let mut short = body;
    short[12..14].copy_from_slice(&30u16.to_be_bytes());
    let frame = wlan(8, 0x01, Some(0x80), &short);
    assert_eq!(
        split(LinkType::Ieee80211, &frame),
        [Err(Decoded::NotTcp(NotTcp::Malformed)), bad]
    );
}

#[test]
fn an_amsdu_cut_by_the_snap_length_decodes_what_was_captured() {
    let packets = [v4_tcp_seq(1, 100), v4_tcp_seq(101, 20)];
    let frame = wlan(8, 0x01, Some(0x80), &subframes(&packets));
    // Captured up to the first segment's TCP header: its payload length comes from the IP
    // header as for any frame; the second subframe's header was not captured.
    let cut = 26 + 14 + 8 + 20 + 20;
    let got: Vec<Decoded> =
        decode_frame(LinkType::Ieee80211, &frame[..cut], frame.len() as u32).collect();
    assert!(
        matches!(got[0], Decoded::Tcp(s, _) if s.payload_len == 100),
        "{got:?}"
    );
    assert_eq!(got[1..], [Decoded::Truncated]);
    for cut in 0..=frame.len() {
        for d in decode_frame(LinkType::Ieee80211, &frame[..cut], frame.len() as u32) {
            if let Decoded::Tcp(seg, _) = d {
                assert!(seg.payload_len <= frame.len() as u32, "cut {cut}");
            }
        }
    }
}
