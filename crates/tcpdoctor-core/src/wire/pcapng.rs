//! pcapng: SHB, IDB, EPB, SPB (and the obsolete PB); several interfaces and link types per file.
//!
//! A pcapng file is a sequence of blocks (type, total length, body, total length again, all
//! multiples of 4 bytes). A Section Header Block starts each section and fixes the byte order
//! of everything up to the next one; Wireshark's `mergecap` and some capture appliances write
//! files with several sections, possibly in different byte orders. Interface Description
//! Blocks declare, per section, each interface's link type, snap length and timestamp
//! resolution (`if_tsresol`: 10^-n or, with the top bit set, 2^-n seconds; default µs) and
//! offset (`if_tsoffset`, seconds). Packets come in Enhanced Packet Blocks (interface id,
//! 64-bit timestamp), Simple Packet Blocks (interface 0, no timestamp: the previous packet's
//! is reused so durations stay sane) and the obsolete Packet Block. Every other block (name
//! resolution, statistics, decryption secrets, custom) is skipped by its length without being
//! buffered.
//!
//! Frame numbers follow Wireshark's `frame.number`: besides packets, Wireshark lists custom
//! blocks, systemd journal entries and Sysdig events as frames, so those are counted (but not
//! returned).
//!
//! Link types are per interface, so an interface tcpdoctor cannot decode is not an error:
//! its frames come out as [`LinkType::Other`]. The two copies of a block's length must agree;
//! that is the format's only integrity check and it catches most corruption early.

use std::io::Read;

use super::pcap::{u16_at, u32_at};
use super::reader::{Buf, Record, MAX_RECORD};
use super::{CaptureError, LinkType};
use crate::time::Timestamp;

const SHB: u32 = 0x0a0d_0d0a;
const IDB: u32 = 1;
const PB: u32 = 2;
const SPB: u32 = 3;
const EPB: u32 = 6;

/// Blocks that are not packets but that Wireshark (4.x) lists as frames: systemd journal
/// entries, Sysdig events and custom blocks. They are skipped, but counted, so that frame
/// numbers stay Wireshark's `frame.number`.
fn numbered_by_wireshark(btype: u32) -> bool {
    matches!(
        btype,
        0x0000_0009 | 0x204 | 0x208 | 0x216 | 0x217 | 0x221 | 0x222 | 0x0000_0bad | 0x4000_0bad
    )
}

/// More interfaces than this in one section is taken as corruption (and bounds memory).
const MAX_INTERFACES: usize = 1 << 16;

const OPT_END: u16 = 0;
const OPT_IF_TSRESOL: u16 = 9;
const OPT_IF_TSOFFSET: u16 = 14;

fn block_name(btype: u32) -> &'static str {
    match btype {
        SHB => "pcapng section header block",
        IDB => "pcapng interface description block",
        PB => "pcapng packet block",
        SPB => "pcapng simple packet block",
        EPB => "pcapng enhanced packet block",
        _ => "pcapng block",
    }
}

/// How to turn an interface's timestamp ticks into nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TsUnit {
    Mul(u64),
    Div(u64),
    /// Units finer than 10^-28 s: every 64-bit tick count is under a nanosecond.
    Zero,
    /// 2^-n seconds.
    Pow2(u32),
}

impl TsUnit {
    fn from_tsresol(v: u8) -> TsUnit {
        let n = u32::from(v & 0x7f);
        if v & 0x80 != 0 {
            TsUnit::Pow2(n)
        } else if n <= 9 {
            TsUnit::Mul(10u64.pow(9 - n))
        } else {
            // 10^19 is the largest power of ten in a u64.
            10u64.checked_pow(n - 9).map_or(TsUnit::Zero, TsUnit::Div)
        }
    }

    fn to_nanos(self, ticks: u64) -> u64 {
        match self {
            TsUnit::Mul(m) => ticks.saturating_mul(m),
            TsUnit::Div(d) => ticks / d,
            TsUnit::Zero => 0,
            TsUnit::Pow2(n) => {
                let ns = (u128::from(ticks) * 1_000_000_000) >> n;
                u64::try_from(ns).unwrap_or(u64::MAX)
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Interface {
    link: LinkType,
    snaplen: u32,
    unit: TsUnit,
    /// `if_tsoffset`, in seconds.
    ts_offset: i64,
}

impl Interface {
    fn timestamp(&self, ticks: u64) -> Timestamp {
        let ns = self.unit.to_nanos(ticks);
        if self.ts_offset == 0 {
            return Timestamp(ns);
        }
        let ns = i128::from(ns) + i128::from(self.ts_offset) * 1_000_000_000;
        Timestamp(u64::try_from(ns.max(0)).unwrap_or(u64::MAX))
    }
}

/// The current section: its byte order and interfaces.
#[derive(Default)]
pub(super) struct NgState {
    big: bool,
    interfaces: Vec<Interface>,
    /// Timestamp of the last packet, given to Simple Packet Blocks (which have none).
    last_ts: Timestamp,
    /// Frame numbers taken by skipped blocks since the last packet.
    skipped: u64,
}

#[cold]
fn malformed(what: &'static str, offset: u64, detail: String) -> CaptureError {
    CaptureError::Malformed {
        what,
        offset,
        detail,
    }
}

/// Checks a block's total length: at least `min`, a multiple of 4, at most [`MAX_RECORD`].
fn check_len(btype: u32, len: u32, min: u32, offset: u64) -> Result<usize, CaptureError> {
    let what = block_name(btype);
    if len & 3 != 0 {
        return Err(malformed(
            what,
            offset,
            format!("block length {len} is not a multiple of 4"),
        ));
    }
    if len < min {
        return Err(malformed(
            what,
            offset,
            format!("block length {len} is shorter than the minimum {min}"),
        ));
    }
    if len as usize > MAX_RECORD {
        return Err(malformed(
            what,
            offset,
            format!("block length {len} is absurd (limit {MAX_RECORD})"),
        ));
    }
    Ok(len as usize)
}

impl NgState {
    pub(super) fn is_magic(magic: [u8; 4]) -> bool {
        magic == SHB.to_be_bytes()
    }

    /// Reads the section header block the file starts with.
    pub(super) fn read_first_section<R: Read>(
        &mut self,
        buf: &mut Buf<R>,
    ) -> Result<(), CaptureError> {
        self.read_section(buf)
    }

    /// Reads a section header block: byte order, version; forgets the previous interfaces.
    #[inline(never)]
    fn read_section<R: Read>(&mut self, buf: &mut Buf<R>) -> Result<(), CaptureError> {
        let what = block_name(SHB);
        let offset = buf.offset();
        let avail = buf.fill(12)?;
        if avail < 12 {
            return Err(CaptureError::Truncated {
                what,
                offset,
                needed: 12,
                available: avail as u64,
            });
        }
        let big = match buf.bytes()[8..12] {
            [0x1a, 0x2b, 0x3c, 0x4d] => true,
            [0x4d, 0x3c, 0x2b, 0x1a] => false,
            ref other => {
                return Err(malformed(
                    what,
                    offset + 8,
                    format!("byte-order magic {other:02x?} is not 1a2b3c4d in either order"),
                ))
            }
        };
        let len = check_len(SHB, u32_at(buf.bytes(), 4, big), 28, offset)?;
        let block = self.fill_block(buf, SHB, len, offset, big)?;
        let (major, minor) = (u16_at(block, 12, big), u16_at(block, 14, big));
        if major != 1 {
            return Err(malformed(
                what,
                offset + 12,
                format!("version {major}.{minor} is not supported (expected 1.x)"),
            ));
        }
        buf.consume(len);
        self.big = big;
        self.interfaces.clear();
        Ok(())
    }

    /// Buffers a whole block of `len` bytes and checks its trailing length.
    fn fill_block<'b, R: Read>(
        &self,
        buf: &'b mut Buf<R>,
        btype: u32,
        len: usize,
        offset: u64,
        big: bool,
    ) -> Result<&'b [u8], CaptureError> {
        let avail = buf.fill(len)?;
        if avail < len {
            return Err(CaptureError::Truncated {
                what: block_name(btype),
                offset,
                needed: len as u64,
                available: avail as u64,
            });
        }
        let block = &buf.bytes()[..len];
        let trailing = u32_at(block, len - 4, big);
        if trailing as usize != len {
            return Err(malformed(
                block_name(btype),
                offset + len as u64 - 4,
                format!("trailing block length {trailing} does not match the leading {len}"),
            ));
        }
        Ok(block)
    }

    /// The next packet block, or `None` at a clean end of file.
    #[inline(always)]
    pub(super) fn next_record<R: Read>(
        &mut self,
        buf: &mut Buf<R>,
    ) -> Result<Option<Record>, CaptureError> {
        loop {
            let offset = buf.offset();
            let avail = buf.fill(8)?;
            if avail == 0 {
                return Ok(None);
            }
            if avail < 8 {
                return Err(CaptureError::Truncated {
                    what: "pcapng block header",
                    offset,
                    needed: 8,
                    available: avail as u64,
                });
            }
            let head = buf.bytes();
            if u32_at(head, 0, true) == SHB {
                self.read_section(buf)?;
                continue;
            }
            let big = self.big;
            let btype = u32_at(head, 0, big);
            let raw_len = u32_at(head, 4, big);
            let min = match btype {
                IDB => 20,
                EPB | PB => 32,
                SPB => 16,
                _ => 12,
            };
            if !matches!(btype, IDB | EPB | PB | SPB) {
                self.skip_block(buf, btype, raw_len, offset)?;
                if numbered_by_wireshark(btype) {
                    self.skipped += 1;
                }
                continue;
            }
            let len = check_len(btype, raw_len, min, offset)?;
            let block = self.fill_block(buf, btype, len, offset, big)?;
            let rec = match btype {
                IDB => {
                    self.add_interface(block, offset)?;
                    None
                }
                SPB => Some(self.simple_packet(block, offset)?),
                _ => Some(self.packet(btype, block, offset)?),
            };
            match rec {
                Some(mut rec) => {
                    rec.skipped = std::mem::take(&mut self.skipped);
                    return Ok(Some(rec));
                }
                None => buf.consume(len),
            }
        }
    }

    /// Skips a block tcpdoctor does not read, checking only its two lengths.
    #[inline(never)]
    fn skip_block<R: Read>(
        &self,
        buf: &mut Buf<R>,
        btype: u32,
        raw_len: u32,
        offset: u64,
    ) -> Result<(), CaptureError> {
        let what = block_name(btype);
        if raw_len & 3 != 0 || raw_len < 12 {
            check_len(btype, raw_len, 12, offset)?;
        }
        let body = u64::from(raw_len) - 4;
        let skipped = buf.skip(body)?;
        let tail = buf.fill(4)?.min(4);
        if skipped < body || tail < 4 {
            return Err(CaptureError::Truncated {
                what,
                offset,
                needed: u64::from(raw_len),
                available: skipped + tail as u64,
            });
        }
        let trailing = u32_at(buf.bytes(), 0, self.big);
        if trailing != raw_len {
            return Err(malformed(
                what,
                offset + body,
                format!("trailing block length {trailing} does not match the leading {raw_len}"),
            ));
        }
        buf.consume(4);
        Ok(())
    }

    #[inline(never)]
    fn add_interface(&mut self, block: &[u8], offset: u64) -> Result<(), CaptureError> {
        let what = block_name(IDB);
        let big = self.big;
        if self.interfaces.len() >= MAX_INTERFACES {
            return Err(malformed(
                what,
                offset,
                format!("more than {MAX_INTERFACES} interfaces in one section"),
            ));
        }
        let mut ifc = Interface {
            link: LinkType::from_code(u32::from(u16_at(block, 8, big))),
            snaplen: u32_at(block, 12, big),
            unit: TsUnit::Mul(1000),
            ts_offset: 0,
        };
        let end = block.len() - 4;
        let mut p = 16;
        while p + 4 <= end {
            let code = u16_at(block, p, big);
            let olen = usize::from(u16_at(block, p + 2, big));
            if code == OPT_END {
                break;
            }
            let value = block
                .get(p + 4..p + 4 + olen)
                .filter(|_| p + 4 + olen <= end);
            let Some(value) = value else {
                return Err(malformed(
                    what,
                    offset + p as u64,
                    format!("option {code} of length {olen} overruns the block"),
                ));
            };
            match (code, value) {
                (OPT_IF_TSRESOL, &[v]) => ifc.unit = TsUnit::from_tsresol(v),
                (OPT_IF_TSOFFSET, v) => {
                    if let Ok(v) = <[u8; 8]>::try_from(v) {
                        ifc.ts_offset = if big {
                            i64::from_be_bytes(v)
                        } else {
                            i64::from_le_bytes(v)
                        };
                    }
                }
                _ => {}
            }
            p += 4 + olen.div_ceil(4) * 4;
        }
        self.interfaces.push(ifc);
        Ok(())
    }

    fn interface(&self, id: u32, btype: u32, offset: u64) -> Result<Interface, CaptureError> {
        match self.interfaces.get(id as usize) {
            Some(ifc) => Ok(*ifc),
            None => Err(malformed(
                block_name(btype),
                offset,
                format!(
                    "interface {id} is not defined (the section has {})",
                    self.interfaces.len()
                ),
            )),
        }
    }

    /// An enhanced packet block, or the obsolete packet block (16-bit interface id).
    #[inline(always)]
    fn packet(&mut self, btype: u32, block: &[u8], offset: u64) -> Result<Record, CaptureError> {
        let big = self.big;
        let id = if btype == EPB {
            u32_at(block, 8, big)
        } else {
            u32::from(u16_at(block, 8, big))
        };
        let ifc = self.interface(id, btype, offset)?;
        let ticks = u64::from(u32_at(block, 12, big)) << 32 | u64::from(u32_at(block, 16, big));
        let caplen = u32_at(block, 20, big) as usize;
        let orig_len = u32_at(block, 24, big);
        let room = block.len() - 32;
        if caplen > room {
            return Err(malformed(
                block_name(btype),
                offset + 20,
                format!("captured length {caplen} overruns the block (room for {room})"),
            ));
        }
        let ts = ifc.timestamp(ticks);
        self.last_ts = ts;
        Ok(Record {
            offset,
            data_start: 28,
            data_len: caplen,
            record_len: block.len(),
            ts,
            link: ifc.link,
            orig_len,
            interface: id,
            skipped: 0,
        })
    }

    /// A simple packet block: interface 0, captured length from the snap length.
    fn simple_packet(&mut self, block: &[u8], offset: u64) -> Result<Record, CaptureError> {
        let ifc = self.interface(0, SPB, offset)?;
        let orig_len = u32_at(block, 8, self.big);
        let mut caplen = (orig_len as usize).min(block.len() - 16);
        if ifc.snaplen != 0 {
            caplen = caplen.min(ifc.snaplen as usize);
        }
        Ok(Record {
            offset,
            data_start: 12,
            data_len: caplen,
            record_len: block.len(),
            ts: self.last_ts,
            link: ifc.link,
            orig_len,
            interface: 0,
            skipped: 0,
        })
    }
}

#[cfg(test)]
#[path = "pcapng_tests.rs"]
mod tests;
