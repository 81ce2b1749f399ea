use super::*;

/// RFC 1071 the slow way, one big-endian word at a time: the reference every checksum here is
/// verified against (independent of [`ones_sum`]).
fn naive_sum(parts: &[&[u8]]) -> u16 {
    let mut bytes = Vec::new();
    for p in parts {
        bytes.extend_from_slice(p);
    }
    let mut s = 0u32;
    for c in bytes.chunks(2) {
        s += u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0));
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// Whether the IPv4 header and the TCP checksum of `pkt` verify (sum to 0xffff).
fn verifies_v4(pkt: &[u8]) -> bool {
    let ihl = usize::from(pkt[0] & 0x0f) * 4;
    let len = usize::from(u16::from_be_bytes([pkt[2], pkt[3]]));
    let tcp_len = ((len - ihl) as u16).to_be_bytes();
    naive_sum(&[&pkt[..ihl]]) == 0xffff
        && naive_sum(&[&pkt[12..20], &[0, pkt[9]], &tcp_len, &pkt[ihl..len]]) == 0xffff
}

fn verifies_v6(pkt: &[u8]) -> bool {
    let l4 = &pkt[40..];
    let len = (l4.len() as u32).to_be_bytes();
    naive_sum(&[&pkt[8..40], &len, &[0, 0, 0, 6], l4]) == 0xffff
}

const MSS: usize = 1448;
const FIN: u8 = 0x01;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;
const CWR: u8 = 0x80;

/// A TCP header with timestamps (32 bytes): 40000 → 7070, `seq`, ack 0x0a0b0c0d, `flags`,
/// window 512, checksum 0.
fn tcp_header(seq: u32, flags: u8) -> Vec<u8> {
    let mut t = vec![0x9c, 0x40, 0x1b, 0x9e];
    t.extend_from_slice(&seq.to_be_bytes());
    t.extend_from_slice(&0x0a0b_0c0du32.to_be_bytes());
    t.extend_from_slice(&[0x80, flags, 0x02, 0x00, 0, 0, 0, 0]);
    t.extend_from_slice(&[1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9]);
    t
}

/// An IPv4 packet of `tcp` + `payload`, id `id`, DF, both checksums correct: what the wire
/// carries, built field by field.
fn v4_packet(id: u16, tcp: &[u8], payload: &[u8]) -> Vec<u8> {
    let len = (20 + tcp.len() + payload.len()) as u16;
    let mut p = vec![0x45, 0];
    p.extend_from_slice(&len.to_be_bytes());
    p.extend_from_slice(&id.to_be_bytes());
    p.extend_from_slice(&[0x40, 0, 64, 6, 0, 0, 198, 18, 0, 2, 198, 18, 0, 1]);
    let s = !naive_sum(&[&p]);
    p[10..12].copy_from_slice(&s.to_be_bytes());
    p.extend_from_slice(tcp);
    p.extend_from_slice(payload);
    let tcp_len = ((tcp.len() + payload.len()) as u16).to_be_bytes();
    let s = !naive_sum(&[&p[12..20], &[0, 6], &tcp_len, &p[20..]]);
    p[36..38].copy_from_slice(&s.to_be_bytes());
    p
}

/// What the kernel hands a TUN device with TSO: the super-packet with its IP checksum whole and
/// its TCP checksum partial (the pseudo-header sum over the super-packet's length).
fn v4_super(id: u16, seq: u32, flags: u8, payload: &[u8]) -> (VnetHdr, Vec<u8>) {
    let mut p = v4_packet(id, &tcp_header(seq, flags), payload);
    let tcp_len = ((p.len() - 20) as u16).to_be_bytes();
    let partial = naive_sum(&[&p[12..20], &[0, 6], &tcp_len]);
    p[36..38].copy_from_slice(&partial.to_be_bytes());
    let hdr = VnetHdr {
        flags: F_NEEDS_CSUM,
        gso_type: GSO_TCPV4,
        hdr_len: 52,
        gso_size: MSS as u16,
        csum_start: 20,
        csum_offset: 16,
    };
    (hdr, p)
}

fn payload(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

fn segments(s: &Segmenter) -> Vec<Vec<u8>> {
    (0..s.count())
        .map(|i| {
            let mut out = vec![0xee; 3]; // appended after what is there
            s.write(i, &mut out);
            assert_eq!(&out[..3], &[0xee; 3]);
            out.split_off(3)
        })
        .collect()
}

#[test]
fn a_tso_super_packet_becomes_what_the_wire_carries() {
    let data = payload(3 * MSS + 700);
    let seq = 0xffff_f000; // wraps inside the super-packet
    let (hdr, sup) = v4_super(0xfffe, seq, ACK | PSH | FIN | CWR, &data);
    let s = Segmenter::new(hdr, &sup).unwrap();
    assert_eq!(s.count(), 4);
    let got = segments(&s);
    for (i, seg) in got.iter().enumerate() {
        let chunk = &data[i * MSS..((i + 1) * MSS).min(data.len())];
        let mut flags = ACK;
        if i == 0 {
            flags |= CWR;
        }
        if i == 3 {
            flags |= PSH | FIN;
        }
        let want = v4_packet(
            0xfffeu16.wrapping_add(i as u16),
            &tcp_header(seq.wrapping_add((i * MSS) as u32), flags),
            chunk,
        );
        assert_eq!(seg, &want, "segment {i}");
        assert!(verifies_v4(seg), "segment {i}");
    }
    assert_eq!(got[3].len(), 20 + 32 + 700);
    assert_eq!(
        got.iter()
            .map(|g| g[52..].to_vec())
            .collect::<Vec<_>>()
            .concat(),
        data
    );
}

#[test]
fn an_exact_multiple_of_the_mss_has_no_empty_tail() {
    let data = payload(2 * MSS);
    let (hdr, sup) = v4_super(1, 1000, ACK | PSH, &data);
    let s = Segmenter::new(hdr, &sup).unwrap();
    assert_eq!(s.count(), 2);
    let got = segments(&s);
    assert!(got.iter().all(|g| g.len() == 52 + MSS && verifies_v4(g)));
    assert_eq!(got[0][33] & PSH, 0);
    assert_eq!(got[1][33] & PSH, PSH);
}

#[test]
fn ipv6_super_packets_segment_with_their_own_pseudo_header() {
    let data = payload(2 * MSS + 1);
    let tcp = tcp_header(77, ACK | PSH);
    let mut p = vec![0x60, 0, 0, 0];
    p.extend_from_slice(&((tcp.len() + data.len()) as u16).to_be_bytes());
    p.extend_from_slice(&[6, 64]);
    p.extend_from_slice(&[0xfd; 15]);
    p.push(2);
    p.extend_from_slice(&[0xfd; 15]);
    p.push(1);
    p.extend_from_slice(&tcp);
    p.extend_from_slice(&data);
    let hdr = VnetHdr {
        gso_type: GSO_TCPV6,
        gso_size: MSS as u16,
        ..VnetHdr::PLAIN
    };
    let s = Segmenter::new(hdr, &p).unwrap();
    let got = segments(&s);
    assert_eq!(got.len(), 3);
    for (i, g) in got.iter().enumerate() {
        assert!(verifies_v6(g), "segment {i}");
        let plen = usize::from(u16::from_be_bytes([g[4], g[5]]));
        assert_eq!(plen, g.len() - 40);
        let seq = u32::from_be_bytes([g[44], g[45], g[46], g[47]]);
        assert_eq!(seq, 77 + (i * MSS) as u32);
    }
    assert_eq!(got[2].len(), 40 + 32 + 1);
}

#[test]
fn a_plain_packet_is_itself_with_its_partial_checksum_completed() {
    let (mut hdr, p) = v4_super(9, 5, ACK | PSH, b"hello");
    assert!(!verifies_v4(&p), "partial on purpose");
    hdr.gso_type = GSO_NONE;
    hdr.gso_size = 0;
    let s = Segmenter::new(hdr, &p).unwrap();
    let got = segments(&s);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0], v4_packet(9, &tcp_header(5, ACK | PSH), b"hello"));
    // In place, the same.
    let mut q = p.clone();
    complete_checksum(&hdr, &mut q).unwrap();
    assert_eq!(q, got[0]);
    // Without NEEDS_CSUM nothing changes.
    let mut r = p.clone();
    complete_checksum(&VnetHdr::PLAIN, &mut r).unwrap();
    assert_eq!(r, p);
}

#[test]
fn a_partial_udp_checksum_of_zero_is_sent_as_all_ones() {
    // Find a payload whose UDP checksum comes out 0, then check it is written 0xffff.
    let mut p = vec![
        0x45, 0, 0, 30, 0, 0, 0x40, 0, 64, 17, 0, 0, 198, 18, 0, 2, 198, 18, 0, 1, 0x13, 0x88,
        0x13, 0x89, 0, 10, 0, 0, 0, 0,
    ];
    let pseudo = naive_sum(&[&p[12..20], &[0, 17], &[0, 10]]);
    for x in 0..=u16::MAX {
        p[28..30].copy_from_slice(&x.to_be_bytes());
        p[26..28].copy_from_slice(&[0, 0]);
        if naive_sum(&[
            &[pseudo.to_be_bytes()[0], pseudo.to_be_bytes()[1]],
            &p[20..30],
        ]) == 0xffff
        {
            break;
        }
    }
    p[26..28].copy_from_slice(&pseudo.to_be_bytes());
    let hdr = VnetHdr {
        flags: F_NEEDS_CSUM,
        csum_start: 20,
        csum_offset: 6,
        ..VnetHdr::PLAIN
    };
    complete_checksum(&hdr, &mut p).unwrap();
    assert_eq!(&p[26..28], &[0xff, 0xff]);
}

#[test]
fn ones_sum_matches_the_slow_sum_at_every_length() {
    let data = payload(3000);
    for start in 0..9 {
        for len in [0, 1, 2, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1499, 1500, 2991] {
            let b = &data[start..start + len];
            assert_eq!(ones_sum(b), naive_sum(&[b]), "start {start} len {len}");
        }
    }
    assert_eq!(ones_sum(&[0xff; 65_536]), 0xffff);
}

#[test]
fn bad_input_is_an_error_never_a_panic() {
    let (hdr, sup) = v4_super(1, 1, ACK, &payload(4000));
    for cut in [0, 1, 19, 20, 40, 51, 52, 100, sup.len() - 1] {
        assert!(Segmenter::new(hdr, &sup[..cut]).is_err(), "cut at {cut}");
        let mut p = sup[..cut].to_vec();
        assert!(complete_checksum(&hdr, &mut p).is_err(), "cut at {cut}");
    }
    let zero = VnetHdr { gso_size: 0, ..hdr };
    assert_eq!(Segmenter::new(zero, &sup).err(), Some(GsoError::BadHeader));
    let ufo = VnetHdr {
        gso_type: GSO_UDP,
        ..hdr
    };
    assert!(matches!(
        Segmenter::new(ufo, &sup),
        Err(GsoError::Unsupported(_))
    ));
    let v6 = VnetHdr {
        gso_type: GSO_TCPV6,
        ..hdr
    };
    assert_eq!(Segmenter::new(v6, &sup).err(), Some(GsoError::BadHeader));
    let far = VnetHdr {
        csum_start: 4090,
        ..hdr
    };
    let mut p = sup.clone();
    assert_eq!(complete_checksum(&far, &mut p), Err(GsoError::BadHeader));
    let mut bad_doff = sup.clone();
    bad_doff[32] = 0x10; // 4-byte TCP header
    assert_eq!(Segmenter::new(hdr, &bad_doff).err(), Some(GsoError::BadIp));
}

#[test]
fn the_header_round_trips_little_endian() {
    let h = VnetHdr {
        flags: F_NEEDS_CSUM,
        gso_type: GSO_TCPV4 | GSO_ECN,
        hdr_len: 66,
        gso_size: 1448,
        csum_start: 20,
        csum_offset: 16,
    };
    let b = h.to_bytes();
    assert_eq!(b, [1, 0x81, 66, 0, 0xa8, 0x05, 20, 0, 16, 0]);
    assert_eq!(VnetHdr::parse(&b), Some(h));
    assert!(h.is_gso() && h.needs_csum());
    assert_eq!(VnetHdr::parse(&b[..9]), None);
    assert!(!VnetHdr::PLAIN.is_gso());
}

/// Merges `segs` in order; each merge finished when the next segment does not continue it.
fn merge_all(segs: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut m: Option<Merge> = None;
    for s in segs {
        if let Some(cur) = m.as_mut() {
            if cur.push(s) {
                continue;
            }
            out.push(m.take().unwrap().finish());
        }
        m = Some(Merge::start(Vec::new(), s).expect("a TCP segment"));
    }
    out.extend(m.map(Merge::finish));
    out
}

#[test]
fn segments_merged_back_are_the_super_packet() {
    let data = payload(3 * MSS + 700);
    let (hdr, sup) = v4_super(0x1234, 0xffff_f000, ACK | PSH | FIN | CWR, &data);
    let segs = segments(&Segmenter::new(hdr, &sup).unwrap());
    let merged = merge_all(&segs);
    assert_eq!(merged.len(), 1);
    let back = &merged[0];
    assert_eq!(VnetHdr::parse(back), Some(hdr), "the kernel's own header");
    assert_eq!(
        &back[VNET_HDR_LEN..],
        &sup[..],
        "byte for byte, partial checksum included"
    );
    // Completed, it verifies.
    let mut whole = back[VNET_HDR_LEN..].to_vec();
    complete_checksum(&hdr, &mut whole).unwrap();
    assert!(verifies_v4(&whole));
}

#[test]
fn a_merge_stops_where_the_segments_stop_continuing() {
    let data = payload(4 * MSS);
    let (hdr, sup) = v4_super(7, 1000, ACK, &data);
    let segs = segments(&Segmenter::new(hdr, &sup).unwrap());
    // A lost segment: the ones on each side of the gap are not merged across it.
    let gap = [segs[0].clone(), segs[1].clone(), segs[3].clone()];
    let merged = merge_all(&gap);
    assert_eq!(merged.len(), 2);
    assert_eq!(VnetHdr::parse(&merged[1]), Some(VnetHdr::PLAIN));
    assert_eq!(
        &merged[1][VNET_HDR_LEN..],
        &segs[3][..],
        "a lone segment as it came"
    );
    let two = &merged[0][VNET_HDR_LEN..];
    assert_eq!(two.len(), 52 + 2 * MSS);
    assert_eq!(VnetHdr::parse(&merged[0]).unwrap().gso_size, MSS as u16);
    // Nothing after a PSH, nor after a short segment, nor another connection's segment.
    let pushed = v4_packet(1, &tcp_header(1000, ACK | PSH), &payload(MSS));
    let next = v4_packet(2, &tcp_header(1000 + MSS as u32, ACK), &payload(MSS));
    assert_eq!(merge_all(&[pushed, next.clone()]).len(), 2);
    let short = v4_packet(1, &tcp_header(1000 + MSS as u32 - 10, ACK), &payload(10));
    let after = v4_packet(2, &tcp_header(1000 + MSS as u32, ACK), &payload(MSS));
    let full = v4_packet(
        0,
        &tcp_header(1000 + MSS as u32 - 10 - MSS as u32, ACK),
        &payload(MSS),
    );
    assert_eq!(merge_all(&[full, short, after]).len(), 2);
    let mut other = next.clone();
    other[20] ^= 1; // another source port
    let first = v4_packet(1, &tcp_header(1000, ACK), &payload(MSS));
    assert_eq!(merge_all(&[first.clone(), other]).len(), 2);
    // A bare ACK (no payload) and a SYN never start one.
    let ack = v4_packet(1, &tcp_header(1000, ACK), &[]);
    assert!(Merge::start(Vec::new(), &ack).is_err());
    let syn = v4_packet(1, &tcp_header(1000, 0x02), b"x");
    let mut m = Merge::start(Vec::new(), &first).unwrap();
    assert!(!m.push(&syn));
    assert_eq!(m.segments(), 1);
}
