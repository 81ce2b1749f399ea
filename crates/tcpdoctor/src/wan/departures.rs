//! When each packet left its sender: a packet tap on one TUN device that keeps, for every
//! packet the device's network stack sends, the kernel's timestamp and its first bytes.
//!
//! Why: the line reads a packet some microseconds after the sending kernel handed it to the
//! device — after the sender's system call has finished on that CPU and the line has had its
//! turn — and a delay counted from the read would add that wait to the path. A real wire
//! starts counting when the packet leaves the sender; the kernel stamps the copy it gives every
//! packet tap at that point (`tcpdump` on the device shows the same instant, or one a fraction
//! of a microsecond apart when no socket has asked for timestamps and each tap reads the clock
//! itself), so the line counts from there.
//!
//! Rules:
//! 1. An `AF_PACKET` datagram socket (the device has no link header, so frames start at the IP
//!    header) with a `TPACKET_V2` receive ring: each frame is handed to us as soon as the
//!    kernel has written it (a V3 ring hands over whole blocks, after a timeout), and reading
//!    one costs no system call. A classic BPF filter keeps only outgoing packets, cut to
//!    [`KEPT`] bytes.
//! 2. The tap and the device see the same packets in the same order: the tap's copy is made as
//!    the device's transmit starts, before the packet enters the queue the line reads (one CPU
//!    transmits on the device at a time, as its queueing discipline serialises them). A packet
//!    read from the device is matched to the oldest frame with the same length and the same
//!    first bytes, among the frames stamped before the read: the frames skipped on the way
//!    belong to packets the device's queue dropped, and are handed back. No match (the ring
//!    was full when the packet left): no stamp, and nothing is handed back except frames older
//!    than [`STALE_NS`]. Two packets alike in length and first bytes (the IP identification
//!    and TCP sequence numbers make TCP's differ) could swap stamps; the line's clamp (no
//!    packet enters before the one read before it) bounds what that costs.
//! 3. Stamps are the host's real-time clock in nanoseconds, as the kernel wrote them.
//! 4. Best effort: where the socket cannot be made, the line has no tap and counts from its
//!    reads, as it did before.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::Context;

use libc::{
    tpacket2_hdr, tpacket_req, PACKET_RX_RING, PACKET_VERSION, SOL_PACKET, TP_STATUS_KERNEL,
    TP_STATUS_USER,
};

use crate::capture::filter::outgoing_only;
use crate::capture::ring::{attach_filter, bind_all, ifindex_of, map_ring, setsockopt};

/// How many bytes of each packet the tap keeps to match it: the IP and TCP headers (with the
/// IP identification, the sequence and acknowledgement numbers and the checksum) and a few
/// bytes more.
pub const KEPT: u32 = 64;
/// An unmatched frame older than this belongs to no packet the line will read.
const STALE_NS: u64 = 1_000_000_000;

/// `TPACKET_V2` in `enum tpacket_versions`.
const TPACKET_V2: libc::c_int = 1;
/// A frame: the 32-byte `tpacket2_hdr`, the `sockaddr_ll`, alignment (the IP header starts 80
/// bytes in on a datagram socket), and [`KEPT`] bytes.
const FRAME: usize = 256;
const BLOCK: usize = 1 << 16;
const BLOCKS: usize = 16;
const FRAMES: usize = BLOCKS * BLOCK / FRAME;

/// The tap on one device, with its ring mapped.
pub struct Departures {
    _fd: OwnedFd,
    map: *mut u8,
    next: usize,
}

// SAFETY: the mapping is owned by this value and only touched through `&mut self`.
unsafe impl Send for Departures {}

impl Departures {
    /// Opens the tap on device `name` in the current network namespace (rule 1).
    pub fn open(name: &str) -> anyhow::Result<Departures> {
        let Some(ifindex) = ifindex_of(name)? else {
            anyhow::bail!("no device {name}");
        };
        // Protocol 0: nothing arrives before the filter and ring are in place and it is bound.
        // SAFETY: plain socket(2).
        let raw =
            unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(io::Error::last_os_error()).context("opening a packet tap");
        }
        // SAFETY: a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        setsockopt(&fd, SOL_PACKET, PACKET_VERSION, &TPACKET_V2).context("TPACKET_V2")?;
        attach_filter(&fd, &outgoing_only(KEPT)).context("attaching the tap's filter")?;
        let req = tpacket_req {
            tp_block_size: BLOCK as u32,
            tp_block_nr: BLOCKS as u32,
            tp_frame_size: FRAME as u32,
            tp_frame_nr: FRAMES as u32,
        };
        setsockopt(&fd, SOL_PACKET, PACKET_RX_RING, &req).context("setting up the tap's ring")?;
        let map = map_ring(&fd, BLOCKS * BLOCK).context("mapping the tap's ring")?;
        let tap = Departures {
            _fd: fd,
            map,
            next: 0,
        };
        bind_all(&tap._fd, ifindex).with_context(|| format!("binding the tap to {name}"))?;
        Ok(tap)
    }

    fn frame(&self, k: usize) -> *mut u8 {
        // SAFETY: k < FRAMES: the frame lies within the mapping (blocks hold whole frames).
        unsafe { self.map.add((k % FRAMES) * FRAME) }
    }

    fn status(&self, k: usize) -> &AtomicU32 {
        // SAFETY: the status word is the frame's first, aligned u32, shared with the kernel.
        unsafe { &*(self.frame(k) as *const AtomicU32) }
    }

    fn release(&mut self, upto: usize) {
        while self.next != upto {
            self.status(self.next)
                .store(TP_STATUS_KERNEL, Ordering::Release);
            self.next = (self.next + 1) % FRAMES;
        }
    }

    /// The frame `k` frames past the oldest, if the kernel has handed it to us.
    fn frame_at(&self, step: usize) -> Option<Frame<'_>> {
        let k = (self.next + step) % FRAMES;
        if self.status(k).load(Ordering::Acquire) & TP_STATUS_USER == 0 {
            return None;
        }
        // SAFETY: the frame belongs to us (TP_STATUS_USER) until handed back; the header and
        // the kept bytes lie within it (`net` + the length read ≤ FRAME).
        unsafe {
            let h = &*(self.frame(k) as *const tpacket2_hdr);
            let net = usize::from(h.tp_net).min(FRAME);
            let n = (h.tp_snaplen as usize).min(FRAME - net);
            Some(Frame {
                len: h.tp_len as usize,
                at: u64::from(h.tp_sec) * 1_000_000_000 + u64::from(h.tp_nsec),
                kept: std::slice::from_raw_parts(self.frame(k).add(net), n),
            })
        }
    }

    /// When the packet `ip` (as read from the device, after the line's header) left its sender,
    /// in nanoseconds of the real-time clock, if the tap has it (rule 2). `wall_now` is the
    /// real-time clock now.
    pub fn departed(&mut self, ip: &[u8], wall_now: u64) -> Option<u64> {
        let frames = (0..FRAMES).map_while(|step| self.frame_at(step));
        let Found { at, done } = find(frames, ip, wall_now);
        let upto = (self.next + done) % FRAMES;
        self.release(upto);
        at
    }
}

/// One frame of the ring: the packet's length, its stamp, the bytes kept.
struct Frame<'a> {
    len: usize,
    at: u64,
    kept: &'a [u8],
}

/// What [`find`] decided: the stamp, and how many frames from the oldest are done with.
#[derive(Debug, PartialEq, Eq)]
struct Found {
    at: Option<u64>,
    done: usize,
}

/// Rule 2 over the frames from the oldest, up to the first one stamped after `wall_now` (the
/// read): the first with the packet's length and first bytes is its stamp, and it and every
/// frame before it are done with; without one, only the stale frames at the head are.
fn find<'a>(frames: impl Iterator<Item = Frame<'a>>, ip: &[u8], wall_now: u64) -> Found {
    let mut stale = 0;
    for (step, f) in frames.enumerate() {
        if f.at > wall_now {
            // Left after the packet was read: neither it nor any later frame is the packet's.
            break;
        }
        let n = f.kept.len().min(ip.len());
        if f.len == ip.len() && f.kept[..n] == ip[..n] {
            return Found {
                at: Some(f.at),
                done: step + 1,
            };
        }
        if stale == step && wall_now.saturating_sub(f.at) > STALE_NS {
            stale = step + 1;
        }
    }
    Found {
        at: None,
        done: stale,
    }
}

impl Drop for Departures {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping made in `open`.
        unsafe { libc::munmap(self.map.cast(), BLOCKS * BLOCK) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames<'a>(v: &'a [(usize, u64, &'a [u8])]) -> impl Iterator<Item = Frame<'a>> + 'a {
        v.iter().map(|&(len, at, kept)| Frame { len, at, kept })
    }

    const NOW: u64 = 10 * STALE_NS;

    #[test]
    fn the_oldest_frame_with_the_packets_length_and_bytes_is_its_stamp() {
        let v: [(usize, u64, &[u8]); 2] = [(4, NOW - 20, b"abcd"), (4, NOW - 10, b"abce")];
        let f = find(frames(&v), b"abcd", NOW);
        assert_eq!(
            f,
            Found {
                at: Some(NOW - 20),
                done: 1
            }
        );
        let f = find(frames(&v), b"abce", NOW);
        // The first frame was a packet the device's queue dropped: done with too.
        assert_eq!(
            f,
            Found {
                at: Some(NOW - 10),
                done: 2
            }
        );
    }

    #[test]
    fn only_the_kept_bytes_are_compared_and_the_length_must_agree() {
        let v: [(usize, u64, &[u8]); 1] = [(6, NOW - 5, b"abcd")];
        assert_eq!(find(frames(&v), b"abcdef", NOW).at, Some(NOW - 5));
        assert_eq!(find(frames(&v), b"abcdefg", NOW).at, None);
        assert_eq!(find(frames(&v), b"abcxef", NOW).at, None);
    }

    #[test]
    fn no_match_keeps_fresh_frames_and_hands_back_stale_ones_at_the_head() {
        // The packet's frame was lost (the ring was full): the newer frames stay for the
        // packets still to be read.
        let v: [(usize, u64, &[u8]); 2] = [(4, NOW - 20, b"wxyz"), (4, NOW - 10, b"wxyy")];
        assert_eq!(find(frames(&v), b"abcd", NOW), Found { at: None, done: 0 });
        // Frames older than STALE_NS belong to no packet the line will read.
        let v: [(usize, u64, &[u8]); 3] = [
            (4, NOW - 3 * STALE_NS, b"wxyz"),
            (4, NOW - 2 * STALE_NS, b"wxyy"),
            (4, NOW - 10, b"wxyx"),
        ];
        assert_eq!(find(frames(&v), b"abcd", NOW), Found { at: None, done: 2 });
        assert_eq!(find(frames(&[]), b"abcd", NOW), Found { at: None, done: 0 });
    }

    #[test]
    fn a_frame_stamped_after_the_read_ends_the_search() {
        // A twin that left after the read is a later packet's, never this one's.
        let v: [(usize, u64, &[u8]); 2] = [(4, NOW - 20, b"wxyz"), (4, NOW + 5, b"abcd")];
        assert_eq!(find(frames(&v), b"abcd", NOW), Found { at: None, done: 0 });
        // Past any number of frames of packets the device dropped.
        let dropped: Vec<(usize, u64, &[u8])> = (0..500)
            .map(|k| (4, NOW - 1000 + k, &b"drop"[..]))
            .collect();
        let mut v = dropped.clone();
        v.push((4, NOW - 1, b"abcd"));
        assert_eq!(
            find(frames(&v), b"abcd", NOW),
            Found {
                at: Some(NOW - 1),
                done: 501
            }
        );
    }
}
