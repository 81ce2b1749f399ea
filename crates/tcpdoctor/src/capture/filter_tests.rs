//! The port filter run on an emulator of classic BPF, against packets built byte by byte.

use super::*;
use tcpdoctor_core::wire::write::ipv4_tcp_packet;

/// Runs `prog` on a packet that came in on interface 1.
fn run(prog: &[Insn], pkt: &[u8], protocol: u32, pkttype: u32) -> u32 {
    run_on(prog, pkt, protocol, pkttype, 1)
}

/// Runs `prog` the way the kernel does for the instructions [`program`] emits.
fn run_on(prog: &[Insn], pkt: &[u8], protocol: u32, pkttype: u32, ifindex: u32) -> u32 {
    let (mut a, mut x, mut pc, mut mem) = (0u32, 0u32, 0usize, [0u32; 16]);
    let ld = |at: usize, n: usize| -> Option<u32> {
        let b = pkt.get(at..at + n)?;
        Some(b.iter().fold(0u32, |v, &c| (v << 8) | u32::from(c)))
    };
    for _ in 0..1000 {
        let i = prog[pc];
        pc += 1;
        let k = i.k as usize;
        let loaded = match i.code {
            LD_W_ABS if i.k == AD_PROTOCOL => Some(protocol),
            LD_W_ABS if i.k == AD_PKTTYPE => Some(pkttype),
            LD_W_ABS if i.k == AD_IFINDEX => Some(ifindex),
            LD_H_ABS => ld(k, 2),
            LD_B_ABS => ld(k, 1),
            LD_H_IND => ld(x as usize + k, 2),
            LD_B_IND => ld(x as usize + k, 1),
            LD_MEM => Some(mem[k]),
            LDX_IMM | ST | TAX | TXA | ADD_K | ADD_X | LSH_K => {
                match i.code {
                    LDX_IMM => x = i.k,
                    ST => mem[k] = a,
                    TAX => x = a,
                    TXA => a = x,
                    ADD_K => a = a.wrapping_add(i.k),
                    ADD_X => a = a.wrapping_add(x),
                    _ => a <<= i.k,
                }
                continue;
            }
            LDX_B_MSH => {
                let Some(b) = ld(k, 1) else { return 0 };
                x = (b & 0xf) * 4;
                continue;
            }
            JA => {
                pc += k;
                continue;
            }
            JEQ_K | JSET_K => {
                let hit = if i.code == JEQ_K {
                    a == i.k
                } else {
                    a & i.k != 0
                };
                pc += usize::from(if hit { i.jt } else { i.jf });
                continue;
            }
            RET_K => return i.k,
            other => panic!("unexpected opcode {other:#x}"),
        };
        match loaded {
            Some(v) => a = v,
            None => return 0, // out of bounds: the kernel rejects the packet
        }
    }
    panic!("filter did not return");
}

fn eth(ip: Vec<u8>, ethertype: u16) -> Vec<u8> {
    let mut f = vec![0u8; 12];
    f.extend(ethertype.to_be_bytes());
    f.extend(ip);
    f
}

fn v4(sport: u16, dport: u16) -> Vec<u8> {
    let s = format!("127.0.0.1:{sport}").parse().unwrap();
    let d = format!("127.0.0.1:{dport}").parse().unwrap();
    eth(
        ipv4_tcp_packet(s, d, 1, 2, 0x18, 100, None, b"hi", 2),
        0x0800,
    )
}

fn v6(sport: u16, dport: u16, next: u8) -> Vec<u8> {
    eth(v6_chain(sport, dport, &[], next), 0x86dd)
}

/// An IPv6 packet (no link header) whose extension headers `chain` (type, bytes after
/// the first two) come before `last` (6 for TCP) and its ports.
fn v6_chain(sport: u16, dport: u16, chain: &[(u8, Vec<u8>)], last: u8) -> Vec<u8> {
    let first = chain.first().map_or(last, |(t, _)| *t);
    let mut ip = vec![0x60, 0, 0, 0, 0, 0, first, 64];
    ip.extend([0u8; 32]);
    for (i, (_, rest)) in chain.iter().enumerate() {
        let next = chain.get(i + 1).map_or(last, |(t, _)| *t);
        assert_eq!(
            (rest.len() + 2) % 8,
            0,
            "extension headers are 8-byte units"
        );
        ip.push(next);
        ip.push(((rest.len() + 2) / 8 - 1) as u8);
        ip.extend(rest);
    }
    ip.extend(sport.to_be_bytes());
    ip.extend(dport.to_be_bytes());
    ip.extend([0u8; 16]);
    let payload = (ip.len() - 40) as u16;
    ip[4..6].copy_from_slice(&payload.to_be_bytes());
    ip
}

/// A fragment header's bytes after the first two: fragment offset `offset` (8-byte units).
fn fragment(offset: u16, more: bool) -> Vec<u8> {
    let mut f = (offset << 3 | u16::from(more)).to_be_bytes().to_vec();
    f.extend([0, 0, 0, 7]); // identification
    f
}

#[test]
fn ports_match_either_direction_on_ipv4_and_ipv6() {
    let p = program(14, SkipOutgoing::Never, &[6379, 8080], 256).unwrap();
    let cases = [
        (v4(40000, 6379), 0x0800, 256),
        (v4(8080, 40000), 0x0800, 256),
        (v4(40000, 6380), 0x0800, 0),
        (v6(40000, 8080, 6), 0x86dd, 256),
        (v6(6379, 1, 6), 0x86dd, 256),
        (v6(6379, 1, 17), 0x86dd, 0),
        (v6(5, 6, 6), 0x86dd, 0),
    ];
    for (i, (pkt, proto, want)) in cases.iter().enumerate() {
        assert_eq!(run(&p, pkt, *proto, 0), *want, "case {i}");
    }
}

#[test]
fn rejects_udp_fragments_and_other_protocols() {
    let p = program(14, SkipOutgoing::Never, &[53], 128).unwrap();
    let mut udp = v4(53, 53);
    udp[14 + 9] = 17;
    assert_eq!(run(&p, &udp, 0x0800, 0), 0);
    let mut frag = v4(53, 53);
    frag[14 + 7] = 0x10; // fragment offset 16 (×8 bytes)
    assert_eq!(run(&p, &frag, 0x0800, 0), 0);
    assert_eq!(run(&p, &v4(53, 1), 0x0806, 0), 0);
    assert_eq!(run(&p, &v4(53, 1)[..30], 0x0800, 0), 0, "cut short");
}

#[test]
fn loopback_keeps_only_the_received_copy() {
    for ports in [&[][..], &[80][..]] {
        let p = program(14, SkipOutgoing::Always, ports, 96).unwrap();
        assert_eq!(run(&p, &v4(80, 9), 0x0800, 0), 96);
        assert_eq!(run(&p, &v4(80, 9), 0x0800, PACKET_OUTGOING), 0);
    }
}

#[test]
fn raw_ip_links_and_the_port_limit() {
    let p = program(0, SkipOutgoing::Never, &[80], 200).unwrap();
    assert_eq!(run(&p, &v4(80, 9)[14..], 0x0800, 0), 200);
    let all: Vec<u16> = (1..=MAX_PORTS as u16).collect();
    let p = program(14, SkipOutgoing::Always, &all, 64).unwrap();
    assert_eq!(run(&p, &v4(9, MAX_PORTS as u16), 0x0800, 0), 64);
    assert_eq!(run(&p, &v6(MAX_PORTS as u16 + 1, 40000, 6), 0x86dd, 0), 0);
    assert!(program(14, SkipOutgoing::Never, &[1; MAX_PORTS + 1], 64).is_err());
}

#[test]
fn ipv6_extension_headers_before_tcp_are_stepped_over() {
    let p = program(0, SkipOutgoing::Never, &[443], 128).unwrap();
    let hbh = (0u8, vec![0u8; 6]);
    let routing = (43u8, vec![0u8; 22]); // 24 bytes: length 2
    let dst = (60u8, vec![1u8; 14]);
    let first = (44u8, fragment(0, true));
    let later = (44u8, fragment(185, false));
    let cases = [
        ("hop-by-hop, port", vec![hbh.clone()], 443, 6, 128),
        ("hop-by-hop, other port", vec![hbh.clone()], 8443, 6, 0),
        ("hop-by-hop, then UDP", vec![hbh.clone()], 443, 17, 0),
        (
            "all four kinds",
            vec![hbh.clone(), routing.clone(), first.clone(), dst.clone()],
            443,
            6,
            128,
        ),
        (
            "all four kinds, other port",
            vec![hbh.clone(), routing.clone(), first.clone(), dst.clone()],
            80,
            6,
            0,
        ),
        ("a later fragment", vec![later], 443, 6, 0),
        (
            "one header too many",
            vec![hbh.clone(), routing.clone(), dst.clone(), dst.clone(), dst],
            443,
            6,
            0,
        ),
        ("AH is not followed", vec![(51, vec![0u8; 14])], 443, 6, 0),
    ];
    for (what, chain, port, last, want) in cases {
        let pkt = v6_chain(40000, port, &chain, last);
        assert_eq!(run(&p, &pkt, 0x86dd, 0), want, "{what}");
        let back = v6_chain(port, 40000, &chain, last);
        assert_eq!(run(&p, &back, 0x86dd, 0), want, "{what}, reply");
    }
    let cut = v6_chain(40000, 443, &[(0, vec![0u8; 6])], 6);
    assert_eq!(
        run(&p, &cut[..50], 0x86dd, 0),
        0,
        "cut inside the TCP header"
    );
}

#[test]
fn all_interfaces_drop_only_loopbacks_outgoing_copy() {
    for ports in [&[][..], &[80][..]] {
        let p = program(0, SkipOutgoing::OnInterface(1), ports, 300).unwrap();
        let ip = &v4(80, 9)[14..];
        assert_eq!(run_on(&p, ip, 0x0800, 0, 1), 300, "lo, received");
        assert_eq!(run_on(&p, ip, 0x0800, PACKET_OUTGOING, 1), 0, "lo, sent");
        assert_eq!(
            run_on(&p, ip, 0x0800, PACKET_OUTGOING, 2),
            300,
            "eth0, sent"
        );
        assert_eq!(run_on(&p, ip, 0x0800, 0, 2), 300, "eth0, received");
    }
    let p = program(0, SkipOutgoing::OnInterface(1), &[80], 300).unwrap();
    assert_eq!(run_on(&p, &v4(81, 9)[14..], 0x0800, 0, 2), 0, "other port");
}
