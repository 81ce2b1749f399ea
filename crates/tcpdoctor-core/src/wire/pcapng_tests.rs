//! Unit tests for the pcapng reader, on files built byte by byte.

use super::super::testutil::{eth_v4_tcp, ipv4_pkt, tcp_hdr, Ng, Tcp};
use super::super::{decode_tcp, CaptureFormat, CaptureReader, Decoded, LinkType};
use super::TsUnit;

/// (number, ns, link, interface, captured length, orig length, offset) of every frame, or the
/// error message.
type Row = (u64, u64, LinkType, u32, usize, u32, u64);

fn read_all(bytes: &[u8]) -> Result<Vec<Row>, String> {
    let mut r = CaptureReader::new(bytes).map_err(|e| e.to_string())?;
    assert_eq!(r.format(), CaptureFormat::Pcapng);
    let mut rows = Vec::new();
    while let Some(f) = r.next_frame().map_err(|e| e.to_string())? {
        rows.push((
            f.number,
            f.ts.0,
            f.link,
            f.interface,
            f.data.len(),
            f.orig_len,
            f.offset,
        ));
    }
    assert_eq!(r.bytes_read(), bytes.len() as u64);
    Ok(rows)
}

fn err_of(bytes: &[u8]) -> String {
    match read_all(bytes) {
        Ok(rows) => format!("no error; {} frames", rows.len()),
        Err(e) => e,
    }
}

#[test]
fn both_byte_orders() {
    let p = eth_v4_tcp(100);
    for big in [false, true] {
        let mut ng = Ng::new(big);
        let shb_len = ng.out.len() as u64;
        ng.idb(1, 65535, &[]);
        let epb1 = ng.out.len() as u64;
        ng.epb(0, 1_700_000_000_123_456, &p, None);
        ng.epb(0, 1_700_000_001_000_000, &p[..60], Some(p.len() as u32));
        assert_eq!(shb_len, 40);
        let rows = read_all(&ng.bytes()).expect("reads");
        assert_eq!(
            rows,
            vec![
                (
                    1,
                    1_700_000_000_123_456_000,
                    LinkType::Ethernet,
                    0,
                    154,
                    154,
                    epb1
                ),
                (
                    2,
                    1_700_000_001_000_000_000,
                    LinkType::Ethernet,
                    0,
                    60,
                    154,
                    epb1 + 208
                ),
            ],
            "big={big}"
        );
    }
}

#[test]
fn frames_borrow_the_right_bytes() {
    let p = eth_v4_tcp(33);
    let mut ng = Ng::new(false);
    ng.idb(1, 0, &[])
        .epb(0, 5, &p, None)
        .spb(&p, p.len() as u32);
    let bytes = ng.bytes();
    let mut r = CaptureReader::new(&bytes[..]).expect("shb");
    for _ in 0..2 {
        let f = r.next_frame().expect("ok").expect("frame");
        assert_eq!(f.data, &p[..]);
        assert!(
            matches!(decode_tcp(f.link, f.data, f.orig_len), Decoded::Tcp(t, _) if t.payload_len == 33)
        );
    }
}

#[test]
fn timestamp_resolutions_and_offsets() {
    // (if_tsresol, if_tsoffset seconds, ticks, expected ns)
    let cases: [(Option<u8>, i64, u64, u64); 9] = [
        (None, 0, 1_500_000, 1_500_000_000),
        (Some(6), 0, 1_500_000, 1_500_000_000),
        (Some(9), 0, 1_500_000_123, 1_500_000_123),
        (Some(3), 0, 1_500, 1_500_000_000),
        (Some(12), 0, 1_500_000_000_000, 1_500_000_000),
        (Some(0x80 | 10), 0, 1536, 1_500_000_000),
        (Some(0x80 | 30), 0, 3 << 29, 1_500_000_000),
        (Some(6), 100, 1_500_000, 101_500_000_000),
        (Some(6), -100, 1_500_000, 0),
    ];
    for (resol, offset, ticks, want) in cases {
        for big in [false, true] {
            let mut ng = Ng::new(big);
            let off = if big {
                offset.to_be_bytes()
            } else {
                offset.to_le_bytes()
            };
            let mut opts: Vec<(u16, &[u8])> = vec![(2, b"eth0")];
            let r = resol.map(|r| [r]);
            if let Some(r) = &r {
                opts.push((9, r));
            }
            if offset != 0 {
                opts.push((14, &off));
            }
            ng.idb(1, 0, &opts).epb(0, ticks, &eth_v4_tcp(0), None);
            let rows = read_all(&ng.bytes()).expect("reads");
            assert_eq!(rows[0].1, want, "resol {resol:?} offset {offset} big {big}");
        }
    }
}

#[test]
fn extreme_resolutions_do_not_overflow() {
    assert_eq!(TsUnit::from_tsresol(127).to_nanos(u64::MAX), 0);
    assert_eq!(TsUnit::from_tsresol(28).to_nanos(u64::MAX), 1);
    assert_eq!(TsUnit::from_tsresol(0).to_nanos(u64::MAX), u64::MAX);
    assert_eq!(TsUnit::from_tsresol(0xff).to_nanos(u64::MAX), 0);
    assert_eq!(TsUnit::from_tsresol(0x80).to_nanos(u64::MAX), u64::MAX);
}

#[test]
fn interfaces_with_different_links_and_skipped_blocks() {
    let eth = eth_v4_tcp(10);
    let raw = ipv4_pkt(6, 0, None, &[], &tcp_hdr(&Tcp::default()));
    let mut ng = Ng::new(false);
    ng.idb(1, 262_144, &[]);
    ng.block(4, &[1, 0, 8, 0, 127, 0, 0, 1, b'l', b'o', 0, 0, 0, 0, 0, 0]); // NRB
    ng.idb(101, 262_144, &[(9, &[9])]);
    ng.idb(201, 65535, &[]); // Bluetooth: not decoded, not fatal
    ng.block(0x0000_0bad, b"custom block, copyable"); // custom
    ng.epb(1, 7_000_000_000, &raw, None);
    ng.block(0x4000_0bad, &[0xee; 33]); // custom, do not copy
    ng.epb(0, 8_000_000, &eth, None);
    ng.block(5, &[0; 20]); // ISB
    ng.block(0x0a, &[0; 16]); // DSB
    ng.epb(2, 9, &eth, None);
    ng.block(0x1234_5678, &[]); // unknown, empty body
    let bytes = ng.bytes();
    let rows = read_all(&bytes).expect("reads");
    let summary: Vec<_> = rows.iter().map(|r| (r.0, r.1, r.2, r.3)).collect();
    // The custom blocks take frame numbers 1 and 3, as in Wireshark.
    assert_eq!(
        summary,
        vec![
            (2, 7_000_000_000, LinkType::RawIp, 1),
            (4, 8_000_000_000, LinkType::Ethernet, 0),
            (5, 9_000, LinkType::Other(201), 2),
        ]
    );
    let mut r = CaptureReader::new(&bytes[..]).expect("shb");
    let mut decoded = Vec::new();
    while let Some(f) = r.next_frame().expect("ok") {
        decoded.push(match decode_tcp(f.link, f.data, f.orig_len) {
            Decoded::Tcp(t, _) => Some(t.payload_len),
            Decoded::UnsupportedLink => None,
            other => panic!("{other:?}"),
        });
    }
    assert_eq!(decoded, vec![Some(0), Some(10), None]);
}

#[test]
fn several_sections_each_with_its_own_order_and_interfaces() {
    let eth = eth_v4_tcp(10);
    let raw = ipv4_pkt(6, 0, None, &[], &tcp_hdr(&Tcp::default()));
    let mut ng = Ng::new(false);
    ng.idb(1, 0, &[]).idb(1, 0, &[]).epb(1, 1, &eth, None);
    ng.shb(true);
    ng.idb(101, 0, &[(9, &[9])])
        .epb(0, 2, &raw, None)
        .pb(0, 3, &raw, None);
    ng.shb(false);
    ng.idb(228, 0, &[]).epb(0, 4, &raw, None);
    let rows = read_all(&ng.bytes()).expect("reads");
    let summary: Vec<_> = rows.iter().map(|r| (r.0, r.1, r.2, r.3)).collect();
    assert_eq!(
        summary,
        vec![
            (1, 1_000, LinkType::Ethernet, 1),
            (2, 2, LinkType::RawIp, 0),
            (3, 3, LinkType::RawIp, 0),
            (4, 4_000, LinkType::Ipv4, 0),
        ]
    );
    // Interfaces do not carry over into the next section.
    let mut ng = Ng::new(false);
    ng.idb(1, 0, &[]).idb(1, 0, &[]).shb(true);
    ng.idb(1, 0, &[]).epb(1, 1, &eth, None);
    let err = err_of(&ng.bytes());
    assert!(
        err.contains("interface 1 is not defined (the section has 1)"),
        "{err}"
    );
}

#[test]
fn simple_and_obsolete_packet_blocks() {
    let p = eth_v4_tcp(100); // 154 bytes
    for big in [false, true] {
        let mut ng = Ng::new(big);
        ng.idb(1, 96, &[]);
        ng.spb(&p[..96], 154); // truncated to the snap length
        ng.pb(0, 42, &p, None);
        ng.spb(&p[..96], 154);
        ng.spb(&p[..60], 60);
        let rows = read_all(&ng.bytes()).expect("reads");
        let summary: Vec<_> = rows.iter().map(|r| (r.0, r.1, r.4, r.5)).collect();
        assert_eq!(
            summary,
            vec![
                (1, 0, 96, 154),
                (2, 42_000, 154, 154),
                (3, 42_000, 96, 154),
                (4, 42_000, 60, 60)
            ]
        );
    }
    // With snap length 0 (unlimited) the original length decides, and padding is not data.
    let mut ng = Ng::new(false);
    ng.idb(1, 0, &[]).spb(&p[..61], 61);
    assert_eq!(read_all(&ng.bytes()).expect("reads")[0].4, 61);
    // A shorter block than the original length: the block's room decides (padding included;
    // the format cannot tell).
    let mut ng = Ng::new(false);
    ng.idb(1, 0, &[]).spb(&p[..61], 154);
    assert_eq!(read_all(&ng.bytes()).expect("reads")[0].4, 64);
}

#[test]
fn errors_name_offsets() {
    let p = eth_v4_tcp(10);
    let base = {
        let mut ng = Ng::new(false);
        ng.idb(1, 0, &[]);
        ng
    };
    let with = |f: &dyn Fn(&mut Ng)| {
        let mut ng = Ng {
            big: base.big,
            out: base.out.clone(),
        };
        f(&mut ng);
        ng.bytes()
    };
    let idb_end = base.out.len();
    let one_epb = with(&|ng| {
        ng.epb(0, 1, &p, None);
    });
    let mut not4 = one_epb.clone();
    not4[idb_end + 4] += 2;
    let mut trailing = one_epb.clone();
    let n = trailing.len();
    trailing[n - 4] ^= 4;
    let mut overrun = one_epb.clone();
    overrun[idb_end + 20] = 200;
    let mut bad_bom = one_epb.clone();
    bad_bom[8] = 0x4e;
    let mut v2 = one_epb.clone();
    v2[12] = 2;
    let mut huge = one_epb.clone();
    huge[idb_end + 4..idb_end + 8].copy_from_slice(&0x7000_0000u32.to_le_bytes());
    let custom = with(&|ng| {
        ng.block(0xbad, &[1; 64]);
    });
    let mut custom_trailing = custom.clone();
    let n = custom_trailing.len();
    custom_trailing[n - 4] = 0;
    let mut idb_opt = base.bytes();
    idb_opt.truncate(40);
    idb_opt = {
        let mut ng = Ng {
            big: false,
            out: idb_opt,
        };
        ng.block(1, &[1, 0, 0, 0, 0, 0, 0, 0, 9, 0, 9, 0, 6, 0, 0, 0]);
        ng.bytes()
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("undefined iface", with(&|ng| {
            ng.epb(3, 1, &p, None);
        }), "malformed pcapng enhanced packet block at byte 60: interface 3 is not defined (the section has 1)"),
        ("pb undefined", with(&|ng| {
            ng.pb(1, 1, &p, None);
        }), "pcapng packet block at byte 60: interface 1 is not defined"),
        ("spb before idb", Ng::new(true).spb(&p, 64).bytes(), "simple packet block at byte 40: interface 0 is not defined (the section has 0)"),
        ("length not x4", not4, "malformed pcapng enhanced packet block at byte 60: block length 118 is not a multiple of 4"),
        ("trailing", trailing, "malformed pcapng enhanced packet block at byte 172: trailing block length 112 does not match the leading 116"),
        ("caplen overrun", overrun, "at byte 80: captured length 200 overruns the block (room for 84)"),
        ("truncated block", one_epb[..one_epb.len() - 5].to_vec(), "truncated pcapng enhanced packet block at byte 60: needed 116 bytes, 111 left"),
        ("truncated header", one_epb[..idb_end + 6].to_vec(), "truncated pcapng block header at byte 60: needed 8 bytes, 6 left"),
        ("bad bom", bad_bom, "malformed pcapng section header block at byte 8: byte-order magic"),
        ("version", v2, "malformed pcapng section header block at byte 12: version 2.0 is not supported"),
        ("huge", huge, "block length 1879048192 is absurd"),
        ("short epb", with(&|ng| {
            ng.block(6, &[0; 16]);
        }), "block length 28 is shorter than the minimum 32"),
        ("custom truncated", custom[..custom.len() - 2].to_vec(), "truncated pcapng block at byte 60: needed 76 bytes, 74 left"),
        ("custom trailing", custom_trailing, "malformed pcapng block at byte 132: trailing block length 0 does not match the leading 76"),
        ("custom len 8", with(&|ng| {
            ng.out.extend([0xad, 0x0b, 0, 0, 8, 0, 0, 0]);
        }), "pcapng block at byte 60: block length 8 is shorter than the minimum 12"),
        ("idb option overrun", idb_opt, "interface description block at byte 56: option 9 of length 9 overruns the block"),
        ("shb truncated", Ng::new(false).bytes()[..30].to_vec(), "truncated pcapng section header block at byte 0: needed 40 bytes, 30 left"),
        ("shb tiny", Ng::new(false).bytes()[..10].to_vec(), "truncated pcapng section header block at byte 0: needed 12 bytes, 10 left"),
    ];
    for (name, bytes, want) in cases {
        let err = err_of(&bytes);
        assert!(
            err.contains(want),
            "{name}: {err:?} should contain {want:?}"
        );
    }
}
