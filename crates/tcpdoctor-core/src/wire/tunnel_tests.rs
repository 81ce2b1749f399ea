//! Each tunnel built byte by byte around the same TCP segment: the segment must come out
//! whole, with its payload length from the inner IP header, and broken or non-TCP tunnels
//! must say which tunnel they were.

use super::super::testutil::{eth, ipv4_pkt, ipv6_pkt, tcp_hdr, Tcp};
use super::super::{decode_tcp, Decoded, LinkType, NotTcp};
use super::*;

/// What a frame decoded to: (payload length, outermost tunnel), or the other outcome.
type Got = Result<(u32, Option<Tunnel>), Decoded>;

fn decode(frame: &[u8]) -> Got {
    decode_with(frame, frame.len())
}

fn decode_with(frame: &[u8], orig: usize) -> Got {
    match decode_tcp(LinkType::Ethernet, frame, orig as u32) {
        Decoded::Tcp(seg, via) => {
            // The inner segment's ends, never the tunnel's (192.0.2.x).
            let ends = [seg.src.to_string(), seg.dst.to_string()];
            assert!(
                ends == ["10.0.0.1:1234", "10.0.0.2:80"]
                    || ends == ["[2001:db8::1]:1234", "[2001:db8::2]:80"],
                "{ends:?}"
            );
            Ok((seg.payload_len, via))
        }
        other => Err(other),
    }
}

fn in_tunnel(t: Tunnel) -> Got {
    Err(Decoded::NotTcp(NotTcp::InTunnel(t)))
}

/// The inner packet: IPv4 10.0.0.1:1234 → 10.0.0.2:80 with `n` payload bytes.
fn inner_v4(n: usize) -> Vec<u8> {
    let mut seg = tcp_hdr(&Tcp::default());
    seg.resize(seg.len() + n, 0x42);
    ipv4_pkt(6, 0, None, &[], &seg)
}

/// The same segment over IPv6.
fn inner_v6(n: usize) -> Vec<u8> {
    let mut seg = tcp_hdr(&Tcp::default());
    seg.resize(seg.len() + n, 0x42);
    ipv6_pkt(6, &[], &seg, None)
}

/// An outer IPv4 packet 192.0.2.1 → 192.0.2.2 carrying `proto`.
fn outer_v4(proto: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = ipv4_pkt(proto, 0, None, &[], payload);
    p[12..20].copy_from_slice(&[192, 0, 2, 1, 192, 0, 2, 2]);
    p
}

fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = sport.to_be_bytes().to_vec();
    v.extend(dport.to_be_bytes());
    v.extend(((8 + payload.len()) as u16).to_be_bytes());
    v.extend([0, 0]);
    v.extend_from_slice(payload);
    v
}

/// A GRE header with the given flag bits (each optional field filled with `0xee`).
fn gre(flags: u16, proto: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = flags.to_be_bytes().to_vec();
    v.extend(proto.to_be_bytes());
    for bit in [0x8000u16, 0x2000, 0x1000] {
        if flags & bit != 0 {
            v.extend([0xee; 4]);
        }
    }
    v.extend_from_slice(payload);
    v
}

fn vxlan(flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![flags, 0, 0, 0, 0, 0x12, 0x34, 0];
    v.extend_from_slice(payload);
    v
}

/// MPLS label stack entries (label, bottom of stack).
fn mpls_stack(labels: &[u32], payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    for (i, label) in labels.iter().enumerate() {
        let bos = u32::from(i + 1 == labels.len());
        v.extend((label << 12 | bos << 8 | 64).to_be_bytes());
    }
    v.extend_from_slice(payload);
    v
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

#[test]
fn every_tunnel_yields_the_inner_segment() {
    let v4 = inner_v4(100);
    let v6 = inner_v6(100);
    let eth_v4 = eth(0x0800, &[], &v4);
    let eth_vlan_v6 = eth(0x86dd, &[0x8100], &v6);
    let geneve_opts = {
        // Version 0, 2 words of options, protocol 0x6558, VNI, then the options.
        let mut h = vec![0x02, 0, 0x65, 0x58, 0, 0, 7, 0];
        h.extend([0xaa; 8]);
        h
    };
    let erspan2 = [0x10, 0x01, 0x00, 0x05, 0, 0, 0, 0];
    let erspan3 = [0x20, 0x01, 0, 0x05, 0, 0, 0, 0, 0, 0, 0, 0];
    let mut erspan3_o = erspan3.to_vec();
    erspan3_o[11] = 1;
    erspan3_o.extend([0xbb; 8]);
    let pptp = {
        // Version 1, K and S set, PPP: payload length and call id, sequence number.
        let mut v = vec![0x30, 0x01, 0x88, 0x0b, 0, 104, 0, 7, 0, 0, 0, 1];
        v.extend([0xff, 0x03, 0x00, 0x21]);
        v.extend_from_slice(&v4);
        v
    };
    // Version/type, code, session, length (PPP protocol and IP packet), PPP protocol.
    let pppoe = cat(&[&[0x11, 0x00, 0x00, 0x01, 0, 2 + 140, 0x00, 0x21], &v4]);
    let pppoe_v6 = cat(&[&[0x11, 0x00, 0x00, 0x01, 0, 2 + 160, 0x00, 0x57], &v6]);
    let gpe_v4 = cat(&[&[0x0c, 0, 0, 0x01, 0, 0, 1, 0], &v4]);
    let cases: Vec<(&str, Vec<u8>, Got)> = vec![
        (
            "IPv4 in IPv4",
            eth(0x0800, &[], &outer_v4(4, &v4)),
            Ok((100, Some(Tunnel::IpInIp))),
        ),
        (
            "IPv6 in IPv4 (6in4)",
            eth(0x0800, &[], &outer_v4(41, &v6)),
            Ok((100, Some(Tunnel::IpInIp))),
        ),
        (
            "IPv4 in IPv6",
            eth(0x86dd, &[], &ipv6_pkt(4, &[], &v4, None)),
            Ok((100, Some(Tunnel::IpInIp))),
        ),
        (
            "GRE, IPv4",
            eth(0x0800, &[], &outer_v4(47, &gre(0, 0x0800, &v4))),
            Ok((100, Some(Tunnel::Gre))),
        ),
        (
            "GRE with checksum, key and sequence",
            eth(0x0800, &[], &outer_v4(47, &gre(0xb000, 0x0800, &v4))),
            Ok((100, Some(Tunnel::Gre))),
        ),
        (
            "GRE key only, transparent Ethernet bridging (NVGRE)",
            eth(0x0800, &[], &outer_v4(47, &gre(0x2000, 0x6558, &eth_v4))),
            Ok((100, Some(Tunnel::Gre))),
        ),
        (
            "GRE over IPv6, bridged Ethernet with a VLAN tag",
            eth(
                0x86dd,
                &[],
                &ipv6_pkt(47, &[], &gre(0, 0x6558, &eth_vlan_v6), None),
            ),
            Ok((100, Some(Tunnel::Gre))),
        ),
        (
            "ERSPAN type I",
            eth(0x0800, &[], &outer_v4(47, &gre(0, 0x88be, &eth_v4))),
            Ok((100, Some(Tunnel::Erspan))),
        ),
        (
            "ERSPAN type II",
            eth(
                0x0800,
                &[],
                &outer_v4(47, &gre(0x1000, 0x88be, &cat(&[&erspan2, &eth_v4]))),
            ),
            Ok((100, Some(Tunnel::Erspan))),
        ),
        (
            "ERSPAN type III",
            eth(
                0x0800,
                &[],
                &outer_v4(47, &gre(0x1000, 0x22eb, &cat(&[&erspan3, &eth_v4]))),
            ),
            Ok((100, Some(Tunnel::Erspan))),
        ),
        (
            "ERSPAN type III with the platform subheader",
            eth(
                0x0800,
                &[],
                &outer_v4(47, &gre(0x1000, 0x22eb, &cat(&[&erspan3_o, &eth_v4]))),
            ),
            Ok((100, Some(Tunnel::Erspan))),
        ),
        (
            "WCCP redirect, with its 4-byte header",
            eth(
                0x0800,
                &[],
                &outer_v4(47, &gre(0, 0x883e, &cat(&[&[0, 0, 0, 0], &v4]))),
            ),
            Ok((100, Some(Tunnel::Gre))),
        ),
        (
            "WCCP redirect, IPv4 right away",
            eth(0x0800, &[], &outer_v4(47, &gre(0, 0x883e, &v4))),
            Ok((100, Some(Tunnel::Gre))),
        ),
        (
            "PPTP: GRE version 1, PPP",
            eth(0x0800, &[], &outer_v4(47, &pptp)),
            Ok((100, Some(Tunnel::Gre))),
        ),
        (
            "GRE, MPLS, IPv4",
            eth(
                0x0800,
                &[],
                &outer_v4(47, &gre(0, 0x8847, &mpls_stack(&[16, 17], &v4))),
            ),
            Ok((100, Some(Tunnel::Gre))),
        ),
        (
            "VXLAN",
            eth(
                0x0800,
                &[],
                &outer_v4(17, &udp(50000, 4789, &vxlan(0x08, &eth_v4))),
            ),
            Ok((100, Some(Tunnel::Vxlan))),
        ),
        (
            "VXLAN on Linux's old port, as the source port",
            eth(
                0x0800,
                &[],
                &outer_v4(17, &udp(8472, 50000, &vxlan(0x08, &eth_v4))),
            ),
            Ok((100, Some(Tunnel::Vxlan))),
        ),
        (
            "VXLAN, inner VLAN and IPv6",
            eth(
                0x0800,
                &[],
                &outer_v4(17, &udp(1, 4789, &vxlan(0x08, &eth_vlan_v6))),
            ),
            Ok((100, Some(Tunnel::Vxlan))),
        ),
        (
            "VXLAN-GPE carrying IPv4",
            eth(0x0800, &[], &outer_v4(17, &udp(1, 4790, &gpe_v4))),
            Ok((100, Some(Tunnel::Vxlan))),
        ),
        (
            "Geneve with options",
            eth(
                0x0800,
                &[],
                &outer_v4(17, &udp(1, 6081, &cat(&[&geneve_opts, &eth_v4]))),
            ),
            Ok((100, Some(Tunnel::Geneve))),
        ),
        (
            "GRE in UDP",
            eth(
                0x0800,
                &[],
                &outer_v4(17, &udp(1, 4754, &gre(0, 0x0800, &v4))),
            ),
            Ok((100, Some(Tunnel::Gre))),
        ),
        (
            "MPLS in UDP",
            eth(
                0x0800,
                &[],
                &outer_v4(17, &udp(1, 6635, &mpls_stack(&[99], &v4))),
            ),
            Ok((100, Some(Tunnel::Mpls))),
        ),
        (
            "MPLS in IP",
            eth(0x0800, &[], &outer_v4(137, &mpls_stack(&[99], &v4))),
            Ok((100, Some(Tunnel::Mpls))),
        ),
        (
            "MPLS on Ethernet, three labels",
            eth(0x8847, &[], &mpls_stack(&[16, 17, 18], &v4)),
            Ok((100, Some(Tunnel::Mpls))),
        ),
        (
            "MPLS multicast, IPv6",
            eth(0x8848, &[], &mpls_stack(&[16], &v6)),
            Ok((100, Some(Tunnel::Mpls))),
        ),
        (
            "MPLS pseudowire: control word, Ethernet",
            eth(
                0x8847,
                &[0x8100],
                &mpls_stack(&[16, 17], &cat(&[&[0, 0, 0, 0], &eth_v4])),
            ),
            Ok((100, Some(Tunnel::Mpls))),
        ),
        (
            "PPPoE session, IPv4",
            eth(0x8864, &[], &pppoe),
            Ok((100, Some(Tunnel::Pppoe))),
        ),
        (
            "PPPoE session in QinQ, IPv6",
            eth(0x8864, &[0x88a8, 0x8100], &pppoe_v6),
            Ok((100, Some(Tunnel::Pppoe))),
        ),
        (
            "VXLAN in GRE: the outermost is named",
            eth(
                0x0800,
                &[],
                &outer_v4(
                    47,
                    &gre(
                        0,
                        0x0800,
                        &outer_v4(17, &udp(1, 4789, &vxlan(0x08, &eth_v4))),
                    ),
                ),
            ),
            Ok((100, Some(Tunnel::Gre))),
        ),
    ];
    for (name, frame, want) in cases {
        assert_eq!(decode(&frame), want, "{name}");
    }
}

#[test]
fn the_inner_length_comes_from_the_inner_ip_header_within_the_outer_packet() {
    let v4 = inner_v4(1000);
    let frame = eth(
        0x0800,
        &[],
        &outer_v4(17, &udp(1, 4789, &vxlan(8, &eth(0x0800, &[], &v4)))),
    );
    // Snap length: only the headers captured, the length still from the inner IP header.
    let headers = 14 + 20 + 8 + 8 + 14 + 20 + 20;
    assert_eq!(
        decode_with(&frame[..headers], frame.len()),
        Ok((1000, Some(Tunnel::Vxlan)))
    );
    assert_eq!(
        decode_with(&frame[..headers - 1], frame.len()),
        Err(Decoded::Truncated)
    );
    // An inner length of zero (a GSO super-packet) takes what the outer packet leaves.
    let mut gso = v4.clone();
    gso[2..4].copy_from_slice(&[0, 0]);
    let frame = eth(0x0800, &[], &outer_v4(4, &gso));
    assert_eq!(decode(&frame), Ok((1000, Some(Tunnel::IpInIp))));
    // An inner length beyond the outer packet is clamped to it, Ethernet padding ignored.
    let mut long = inner_v4(10);
    long[2..4].copy_from_slice(&5000u16.to_be_bytes());
    let mut frame = eth(0x0800, &[], &outer_v4(4, &long));
    frame.extend([0; 20]);
    assert_eq!(decode(&frame), Ok((10, Some(Tunnel::IpInIp))));
}

#[test]
fn pppoe_and_udp_lengths_bound_the_inner_packet_as_in_wireshark() {
    // The inner IPv4 header claims 6 payload bytes more than PPPoE's length leaves it (as in
    // frame 19 of testdata/wire/tunnels/pppoe_over_qinq.pcap): Wireshark reads 0.
    let v4 = inner_v4(6);
    let pppoe = |len: u16| cat(&[&[0x11, 0, 0, 1], &len.to_be_bytes(), &[0, 0x21], &v4]);
    assert_eq!(
        decode(&eth(0x8864, &[], &pppoe(2 + 46))),
        Ok((6, Some(Tunnel::Pppoe)))
    );
    assert_eq!(
        decode(&eth(0x8864, &[], &pppoe(2 + 40))),
        Ok((0, Some(Tunnel::Pppoe)))
    );
    // A UDP length that stops short of the inner packet's end bounds it; zero does not.
    let eth_v4 = eth(0x0800, &[], &v4);
    let frame = |udp_len: u16| {
        let mut u = udp(1, 4789, &vxlan(8, &eth_v4));
        u[4..6].copy_from_slice(&udp_len.to_be_bytes());
        eth(0x0800, &[], &outer_v4(17, &u))
    };
    let full = (8 + 8 + 14 + 46) as u16;
    assert_eq!(decode(&frame(full)), Ok((6, Some(Tunnel::Vxlan))));
    assert_eq!(decode(&frame(full - 6)), Ok((0, Some(Tunnel::Vxlan))));
    assert_eq!(decode(&frame(0)), Ok((6, Some(Tunnel::Vxlan))));
}

#[test]
fn tunnels_without_tcp_inside_are_counted_as_the_tunnels() {
    let arp = eth(0x0806, &[], &[0; 28]);
    let inner_udp = ipv4_pkt(17, 0, None, &[], &udp(53, 53, &[0; 20]));
    let inner_frag = ipv4_pkt(6, 100, None, &[], &[0; 40]);
    let nested = |depth: usize| {
        let mut p = inner_v4(10);
        for _ in 0..depth {
            p = outer_v4(4, &p);
        }
        eth(0x0800, &[], &p)
    };
    let cases: Vec<(&str, Vec<u8>, Got)> = vec![
        (
            "ARP in VXLAN",
            eth(0x0800, &[], &outer_v4(17, &udp(1, 4789, &vxlan(8, &arp)))),
            in_tunnel(Tunnel::Vxlan),
        ),
        (
            "UDP in GRE",
            eth(0x0800, &[], &outer_v4(47, &gre(0, 0x0800, &inner_udp))),
            in_tunnel(Tunnel::Gre),
        ),
        (
            "a fragment in IP-in-IP",
            eth(0x0800, &[], &outer_v4(4, &inner_frag)),
            in_tunnel(Tunnel::IpInIp),
        ),
        (
            "UDP in MPLS",
            eth(0x8847, &[], &mpls_stack(&[3], &inner_udp)),
            in_tunnel(Tunnel::Mpls),
        ),
        (
            "MPLS with neither IP nor a control word",
            eth(0x8847, &[], &mpls_stack(&[3], &[0x90; 40])),
            in_tunnel(Tunnel::Mpls),
        ),
        (
            "PPPoE with LCP",
            eth(0x8864, &[], &[0x11, 0, 0, 1, 0, 10, 0xc0, 0x21, 1, 1, 0, 4]),
            in_tunnel(Tunnel::Pppoe),
        ),
        (
            "GRE with a source route (RFC 1701) is not followed",
            eth(
                0x0800,
                &[],
                &outer_v4(47, &gre(0x4000, 0x0800, &inner_v4(10))),
            ),
            in_tunnel(Tunnel::Gre),
        ),
        (
            "GRE version 2",
            eth(0x0800, &[], &outer_v4(47, &gre(2, 0x0800, &inner_v4(10)))),
            in_tunnel(Tunnel::Gre),
        ),
        (
            "4 tunnels deep is followed",
            nested(4),
            Ok((10, Some(Tunnel::IpInIp))),
        ),
        (
            "5 tunnels deep is not",
            nested(5),
            in_tunnel(Tunnel::IpInIp),
        ),
        (
            "VXLAN port without the I flag is just UDP",
            eth(0x0800, &[], &outer_v4(17, &udp(1, 4789, &vxlan(0, &arp)))),
            Err(Decoded::NotTcp(NotTcp::Udp)),
        ),
        (
            "Geneve port, version 1: just UDP",
            eth(0x0800, &[], &outer_v4(17, &udp(1, 6081, &[0x40; 30]))),
            Err(Decoded::NotTcp(NotTcp::Udp)),
        ),
        (
            "plain UDP",
            eth(0x0800, &[], &outer_v4(17, &udp(1, 53, &[0; 30]))),
            Err(Decoded::NotTcp(NotTcp::Udp)),
        ),
        (
            "ICMP",
            eth(0x0800, &[], &outer_v4(1, &[8, 0, 0, 0, 0, 0, 0, 0])),
            Err(Decoded::NotTcp(NotTcp::Icmp)),
        ),
        (
            "ICMPv6",
            eth(0x86dd, &[], &ipv6_pkt(58, &[], &[128, 0, 0, 0], None)),
            Err(Decoded::NotTcp(NotTcp::Icmp)),
        ),
        (
            "OSPF",
            eth(0x0800, &[], &outer_v4(89, &[0; 24])),
            Err(Decoded::NotTcp(NotTcp::OtherIp)),
        ),
    ];
    for (name, frame, want) in cases {
        assert_eq!(decode(&frame), want, "{name}");
    }
}

#[test]
fn every_cut_of_a_tunnelled_frame_is_truncated_never_a_panic() {
    let eth_v4 = eth(0x0800, &[], &inner_v4(0));
    let frames = [
        eth(
            0x0800,
            &[],
            &outer_v4(17, &udp(1, 4789, &vxlan(8, &eth_v4))),
        ),
        eth(0x0800, &[], &outer_v4(47, &gre(0xb000, 0x6558, &eth_v4))),
        eth(
            0x0800,
            &[],
            &outer_v4(47, &gre(0x1000, 0x22eb, &cat(&[&[0; 12], &eth_v4]))),
        ),
        eth(0x8847, &[], &mpls_stack(&[1, 2, 3], &inner_v4(0))),
        eth(
            0x8864,
            &[],
            &cat(&[&[0x11, 0, 0, 1, 0, 42, 0, 0x21], &inner_v4(0)]),
        ),
    ];
    for frame in frames {
        let (want, via) = match decode(&frame) {
            Ok(got) => got,
            other => panic!("{other:?}"),
        };
        assert_eq!(want, 0);
        for cut in 0..frame.len() {
            // The wire length stays the whole frame: a snap length cut.
            let got = decode_with(&frame[..cut], frame.len());
            // Before both UDP ports are captured, nothing says it is VXLAN.
            let udp_unknown = via == Some(Tunnel::Vxlan) && cut < 14 + 20 + 4;
            if udp_unknown && got == Err(Decoded::NotTcp(NotTcp::Udp)) {
                continue;
            }
            assert_eq!(got, Err(Decoded::Truncated), "cut at {cut} of {via:?}");
        }
    }
}
