//! The AF_PACKET socket and its TPACKET_V3 receive ring, as tcpdump uses it.
//!
//! Why a V3 ring: the kernel writes packets straight into memory shared with us, in blocks,
//! and wakes us once per block instead of once per packet; a full block is handed over whole.
//! That is what keeps CPU and drops at tcpdump's level under load. Rules:
//! 1. The socket is created with protocol 0 (it receives nothing), the filter and ring are set
//!    up, and only then is it bound to the interface with `ETH_P_ALL`: no packet arrives
//!    unfiltered.
//! 2. A block belongs to us when its status has `TP_STATUS_USER`; we walk its packets and hand
//!    it back by writing `TP_STATUS_KERNEL`. The kernel retires a partly filled block after
//!    [`BLOCK_TIMEOUT_MS`], so a quiet capture still sees its packets promptly.
//! 3. Timestamps come from the packet headers in nanoseconds.
//! 4. Drops (the ring was full) are read with `PACKET_STATISTICS`, which resets on each read:
//!    they are accumulated.
//! 5. `any` (every interface) is a `SOCK_DGRAM` socket bound to no interface: the kernel strips
//!    each link header, so packets start at the network header whatever the interface, and
//!    says in the frame's `sockaddr_ll` where each came from; [`Packet::cooked`] carries that
//!    into the file's Linux cooked (SLL2) header. The kernel filter returns the snap length
//!    less the 20 bytes of that header, so a record is never longer than `--snaplen`.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{bail, Context};
use tcpdoctor_core::wire::write::{LINKTYPE_ETHERNET, LINKTYPE_RAW};
use tcpdoctor_core::wire::write_cooked::{CookedHeader, LINKTYPE_LINUX_SLL2, SLL2_HEADER};
use tcpdoctor_core::Timestamp;

use super::filter::{self, Insn, SkipOutgoing};

pub const BLOCK_TIMEOUT_MS: u32 = 16;
pub const CAP_NET_RAW_MESSAGE: &str = "capturing needs CAP_NET_RAW (run as root, or `setcap \
     cap_net_raw+ep`, or use `tcpdoctor sandbox -- ...` which needs neither)";

const SOL_PACKET: libc::c_int = 263;
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_STATISTICS: libc::c_int = 6;
const PACKET_VERSION: libc::c_int = 10;
const TPACKET_V3: libc::c_int = 2;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
const ETH_P_ALL: u16 = 0x0003;
const ARPHRD_ETHER: u16 = 1;
const ARPHRD_LOOPBACK: u16 = 772;
const ARPHRD_NONE: u16 = 0xfffe;
const ARPHRD_RAWIP: u16 = 519;
/// Blocks are between these sizes, and at least [`MIN_BLOCKS`] of them: small blocks hand
/// packets over sooner and let a small ring ride out a burst while we hold one block.
const MAX_BLOCK: usize = 1 << 20;
const MIN_BLOCK: usize = 1 << 16;
const MIN_BLOCKS: usize = 32;

#[repr(C)]
struct TpacketReq3 {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
    retire_blk_tov: u32,
    sizeof_priv: u32,
    feature_req_word: u32,
}

#[repr(C)]
#[derive(Default)]
#[allow(dead_code)] // freeze_q_cnt is written by the kernel, never read
struct TpacketStatsV3 {
    packets: u32,
    drops: u32,
    freeze_q_cnt: u32,
}

/// The interface name that captures on every interface.
pub const ANY: &str = "any";
/// Where the `sockaddr_ll` sits in a ring frame: after the `tpacket3_hdr` (48 bytes, aligned).
const FRAME_SOCKADDR: usize = 48;
const SOCKADDR_LL: usize = std::mem::size_of::<libc::sockaddr_ll>();

/// What the capture sees on an interface.
#[derive(Clone, Copy, Debug)]
pub struct Link {
    /// `LINKTYPE_*` written in the file.
    pub link_type: u32,
    /// Where the IP header starts in a frame.
    pub l3_offset: u32,
    /// Which outgoing packets are loopback's duplicates.
    pub skip_outgoing: SkipOutgoing,
    /// Packets arrive without a link header (`any`); each gets a cooked header.
    pub cooked: bool,
}

/// An open, bound capture socket with its ring mapped.
pub struct Ring {
    fd: OwnedFd,
    map: *mut u8,
    blocks: usize,
    block_size: usize,
    next: usize,
    pub link: Link,
    received: u64,
    dropped: u64,
}

/// A packet in the ring, valid until the block is released.
pub struct Packet<'a> {
    pub ts: Timestamp,
    pub data: &'a [u8],
    pub orig_len: u32,
    /// On a cooked socket, where the packet came from (`data` starts at the network header).
    pub cooked: Option<CookedHeader>,
}

fn last_error(what: &str) -> anyhow::Error {
    anyhow::Error::new(io::Error::last_os_error()).context(what.to_string())
}

/// `setsockopt(2)` of one value.
pub(crate) fn setsockopt<T>(
    fd: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    v: &T,
) -> io::Result<()> {
    // SAFETY: `v` points to a live value of the size passed.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Attaches the classic BPF program `prog` to a socket.
pub(crate) fn attach_filter(fd: &OwnedFd, prog: &[Insn]) -> io::Result<()> {
    let insns: Vec<libc::sock_filter> = prog
        .iter()
        .map(|i| libc::sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect();
    let fprog = libc::sock_fprog {
        len: insns.len() as u16,
        filter: insns.as_ptr().cast_mut(),
    };
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &fprog)
}

/// Maps the `len` bytes of the receive ring the kernel allocated for a packet socket.
pub(crate) fn map_ring(fd: &OwnedFd, len: usize) -> io::Result<*mut u8> {
    // SAFETY: maps the socket's ring, shared with the kernel; unmapped by its owner.
    let map = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if map == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(map.cast())
}

/// Binds a packet socket to every protocol on interface `ifindex` (0: every interface).
pub(crate) fn bind_all(fd: &OwnedFd, ifindex: u32) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain data.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = ETH_P_ALL.to_be();
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: binds to a valid sockaddr_ll of the size given.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The index of interface `name`, if there is one.
pub(crate) fn ifindex_of(name: &str) -> anyhow::Result<Option<u32>> {
    let cname = CString::new(name).context("--interface: NUL in the name")?;
    // SAFETY: a NUL-terminated name.
    let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    Ok((ifindex != 0).then_some(ifindex))
}

/// The link type of interface `name`, from its hardware type.
fn link_of(fd: &OwnedFd, name: &str) -> anyhow::Result<Link> {
    // SAFETY: ifreq is plain data; zeroed is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: SIOCGIFHWADDR fills `ifr` for the named interface.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFHWADDR as _, &mut ifr) } != 0 {
        return Err(last_error(&format!("--interface {name}")));
    }
    // SAFETY: SIOCGIFHWADDR sets the hwaddr member of the union.
    let hw = unsafe { ifr.ifr_ifru.ifru_hwaddr.sa_family };
    Ok(match hw {
        ARPHRD_ETHER | ARPHRD_LOOPBACK => Link {
            link_type: LINKTYPE_ETHERNET,
            l3_offset: 14,
            skip_outgoing: if hw == ARPHRD_LOOPBACK {
                SkipOutgoing::Always
            } else {
                SkipOutgoing::Never
            },
            cooked: false,
        },
        ARPHRD_NONE | ARPHRD_RAWIP => Link {
            link_type: LINKTYPE_RAW,
            l3_offset: 0,
            skip_outgoing: SkipOutgoing::Never,
            cooked: false,
        },
        other => bail!(
            "--interface {name}: hardware type {other} is not supported (Ethernet, loopback \
             and raw-IP tunnels are)"
        ),
    })
}

impl Ring {
    /// Opens a capture on interface `name` ([`ANY`] for all) keeping packets to or from
    /// `ports` (all when empty), cut to `snaplen` bytes, with a ring of `buffer` bytes.
    pub fn open(name: &str, ports: &[u16], snaplen: u32, buffer: usize) -> anyhow::Result<Ring> {
        let kind = if name == ANY {
            libc::SOCK_DGRAM
        } else {
            libc::SOCK_RAW
        };
        // SAFETY: plain socket(2).
        let raw = unsafe { libc::socket(libc::AF_PACKET, kind | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            let e = io::Error::last_os_error();
            if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) {
                bail!("{CAP_NET_RAW_MESSAGE}");
            }
            return Err(anyhow::Error::new(e).context("opening an AF_PACKET socket"));
        }
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let (ifindex, link) = if name == ANY {
            let lo = ifindex_of("lo")?;
            let link = Link {
                link_type: LINKTYPE_LINUX_SLL2,
                l3_offset: 0,
                skip_outgoing: lo.map_or(SkipOutgoing::Never, SkipOutgoing::OnInterface),
                cooked: true,
            };
            (0, link)
        } else {
            let Some(ifindex) = ifindex_of(name)? else {
                bail!("--interface {name}: no such interface");
            };
            (ifindex, link_of(&fd, name)?)
        };
        // The cooked header is added in user space: the kernel keeps that much less.
        let kept = if link.cooked {
            snaplen.saturating_sub(SLL2_HEADER as u32).max(1)
        } else {
            snaplen
        };

        setsockopt(&fd, SOL_PACKET, PACKET_VERSION, &TPACKET_V3).context("TPACKET_V3")?;
        let prog: Vec<Insn> = filter::program(link.l3_offset, link.skip_outgoing, ports, kept)?;
        attach_filter(&fd, &prog).context("attaching the port filter")?;

        let block_size = (buffer / MIN_BLOCKS)
            .next_power_of_two()
            .clamp(MIN_BLOCK, MAX_BLOCK)
            .max((snaplen as usize + 4096).next_power_of_two());
        let blocks = (buffer / block_size).max(2);
        let frame_size = 2048u32;
        let req = TpacketReq3 {
            block_size: block_size as u32,
            block_nr: blocks as u32,
            frame_size,
            frame_nr: (block_size as u32 / frame_size) * blocks as u32,
            retire_blk_tov: BLOCK_TIMEOUT_MS,
            sizeof_priv: 0,
            feature_req_word: 0,
        };
        setsockopt(&fd, SOL_PACKET, PACKET_RX_RING, &req).context("setting up the ring")?;
        let map = map_ring(&fd, blocks * block_size).context("mapping the ring")?;
        let ring = Ring {
            fd,
            map,
            blocks,
            block_size,
            next: 0,
            link,
            received: 0,
            dropped: 0,
        };
        // 0: every interface.
        bind_all(&ring.fd, ifindex).with_context(|| format!("binding to {name}"))?;
        Ok(ring)
    }

    /// Number of blocks in the ring.
    pub fn blocks(&self) -> usize {
        self.blocks
    }

    fn block(&self, i: usize) -> *mut u8 {
        // SAFETY: i < blocks, inside the mapping.
        unsafe { self.map.add(i * self.block_size) }
    }

    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: block_status is an aligned u32 at offset 8 of the block descriptor, shared
        // with the kernel; it is only accessed atomically.
        unsafe { &*self.block(i).add(8).cast::<AtomicU32>() }
    }

    /// Waits up to `timeout_ms` for a block to be ours. Returns false on timeout or a signal.
    pub fn wait(&self, timeout_ms: i32) -> io::Result<bool> {
        if self.status(self.next).load(Ordering::Acquire) & TP_STATUS_USER != 0 {
            return Ok(true);
        }
        let mut p = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN | libc::POLLERR,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut p, 1, timeout_ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            };
        }
        Ok(self.status(self.next).load(Ordering::Acquire) & TP_STATUS_USER != 0)
    }

    /// Hands each packet of the next block (if it is ours) to `f`, then returns the block to
    /// the kernel. `f` returns false to skip the rest of the block. Returns packets seen.
    pub fn drain_block(&mut self, mut f: impl FnMut(Packet) -> bool) -> u64 {
        let i = self.next;
        if self.status(i).load(Ordering::Acquire) & TP_STATUS_USER == 0 {
            return 0;
        }
        let b = self.block(i);
        let size = self.block_size;
        let word = |at: usize| -> u32 {
            // SAFETY: reads inside the block we own (offsets written by the kernel).
            unsafe { b.add(at).cast::<u32>().read_unaligned() }
        };
        let count = word(12);
        let mut off = word(16) as usize;
        let mut seen = 0;
        for _ in 0..count {
            if off + FRAME_SOCKADDR + SOCKADDR_LL > size {
                break;
            }
            let (next, sec, nsec, snap, len) = (
                word(off),
                word(off + 4),
                word(off + 8),
                word(off + 12),
                word(off + 16),
            );
            // SAFETY: tp_mac is a u16 at offset 24 of the packet header.
            let mac = unsafe { b.add(off + 24).cast::<u16>().read_unaligned() } as usize;
            let start = (off + mac).min(size);
            let end = (start + snap as usize).min(size);
            // SAFETY: the packet's bytes lie inside the block we own.
            let data = unsafe { std::slice::from_raw_parts(b.add(start), end - start) };
            seen += 1;
            let ts = Timestamp(u64::from(sec) * 1_000_000_000 + u64::from(nsec));
            let cooked = if self.link.cooked {
                // SAFETY: the kernel writes a sockaddr_ll after each frame header, before the
                // packet; it lies inside the block (checked above).
                Some(unsafe { cooked_header(b.add(off + FRAME_SOCKADDR)) })
            } else {
                None
            };
            if !f(Packet {
                ts,
                data,
                orig_len: len,
                cooked,
            }) || next == 0
            {
                break;
            }
            off += next as usize;
        }
        self.status(i).store(TP_STATUS_KERNEL, Ordering::Release);
        self.next = (i + 1) % self.blocks;
        seen
    }

    /// Reads the kernel's counters: (packets that passed the filter, dropped for want of ring
    /// space), totals since the socket was opened.
    pub fn statistics(&mut self) -> (u64, u64) {
        let mut st = TpacketStatsV3::default();
        let mut len = std::mem::size_of::<TpacketStatsV3>() as libc::socklen_t;
        // SAFETY: `st` has room for `len` bytes.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                SOL_PACKET,
                PACKET_STATISTICS,
                (&mut st as *mut TpacketStatsV3).cast(),
                &mut len,
            )
        };
        if r == 0 {
            self.received += u64::from(st.packets);
            self.dropped += u64::from(st.drops);
        }
        (self.received, self.dropped)
    }
}

/// Reads the `sockaddr_ll` at `at` into the cooked header it stands for.
///
/// # Safety
/// `at` points to a `sockaddr_ll` (20 bytes) the kernel wrote in a block we own.
unsafe fn cooked_header(at: *const u8) -> CookedHeader {
    // SAFETY: per the caller; read_unaligned needs no alignment.
    let sll: libc::sockaddr_ll = unsafe { at.cast::<libc::sockaddr_ll>().read_unaligned() };
    CookedHeader {
        protocol: u16::from_be(sll.sll_protocol),
        ifindex: sll.sll_ifindex as u32,
        hatype: sll.sll_hatype,
        pkttype: sll.sll_pkttype,
        addr_len: sll.sll_halen,
        addr: sll.sll_addr,
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping made in `open`.
        unsafe { libc::munmap(self.map.cast(), self.blocks * self.block_size) };
    }
}
