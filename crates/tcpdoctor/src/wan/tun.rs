//! One end of the delay line: a TUN device in the current network namespace, configured as a
//! point-to-point link (its address, the peer's address with a host route to it, an MTU) and
//! brought up, with ioctls only (no `ip` binary needed).
//!
//! Offloads: the device is opened with `IFF_VNET_HDR` and asked for checksum and TCP
//! segmentation offload (`TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6`), so every `read` gives one
//! packet behind a 10-byte `virtio_net_hdr` (little-endian, `TUNSETVNETLE`) and may be a GSO
//! super-packet of up to 64 KB with a partial transport checksum; every `write` takes one the
//! same way ([`tcpdoctor_core::wire::gso`]).
//!
//! Each device also gets a packet tap ([`super::departures`]) that says when each packet it
//! hands the line left the sending stack.

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use anyhow::Context;
use tcpdoctor_core::wire::gso::VNET_HDR_LEN;

use super::departures::Departures;

// linux/sockios.h (not exported by libc for glibc targets).
const SIOCSIFADDR: libc::c_ulong = 0x8916;
const SIOCSIFDSTADDR: libc::c_ulong = 0x8918;
const SIOCSIFNETMASK: libc::c_ulong = 0x891c;
const SIOCSIFMTU: libc::c_ulong = 0x8922;

pub struct Tun {
    fd: OwnedFd,
    pub name: String,
    /// When each packet the device's stack sent left it (best effort: why not, where the tap
    /// cannot be made).
    departures: Result<Departures, String>,
}

/// Whether /dev/net/tun can be opened (the same error as [`Tun::create`] when not).
pub fn probe() -> anyhow::Result<()> {
    open_device().map(drop)
}

fn open_device() -> anyhow::Result<OwnedFd> {
    // SAFETY: open(2) of a fixed path.
    let raw = unsafe {
        libc::open(
            c"/dev/net/tun".as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if raw < 0 {
        let e = io::Error::last_os_error();
        let hint = match e.raw_os_error() {
            Some(libc::ENOENT) => "no TUN device on this machine: load the tun module \
                                   (modprobe tun) or create the node (mknod /dev/net/tun c \
                                   10 200)"
                .to_string(),
            Some(libc::EACCES) | Some(libc::EPERM) => {
                use std::os::unix::fs::PermissionsExt;
                let mode = std::fs::metadata("/dev/net/tun")
                    .map(|m| format!("{:04o}", m.permissions().mode() & 0o7777))
                    .unwrap_or_else(|_| "?".into());
                format!(
                    "/dev/net/tun is mode {mode}, not open to this user: most distributions \
                     ship it 0666 (chmod 0666 /dev/net/tun, or a udev rule)"
                )
            }
            _ => "the delay line needs the TUN device".to_string(),
        };
        return Err(e).context(format!("opening /dev/net/tun: {hint}"));
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

impl Tun {
    /// Creates `name` in the current network namespace: `local` peer-to-peer with `peer`, up.
    pub fn create(name: &str, local: Ipv4Addr, peer: Ipv4Addr, mtu: u32) -> anyhow::Result<Tun> {
        let fd = open_device()?;
        let mut ifr = ifreq(name);
        ifr.ifr_ifru.ifru_flags =
            (libc::IFF_TUN | libc::IFF_NO_PI | libc::IFF_VNET_HDR) as libc::c_short;
        // SAFETY: TUNSETIFF reads the name and flags of `ifr`.
        if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &ifr) } != 0 {
            return Err(io::Error::last_os_error()).with_context(|| format!("creating {name}"));
        }
        offloads(fd.as_raw_fd()).with_context(|| format!("asking {name} for offloads"))?;
        let mut tun = Tun {
            fd,
            name: name.to_string(),
            departures: Err("not opened".into()),
        };
        // An IPv4 path: no IPv6 router solicitations in the captures (best effort).
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{name}/disable_ipv6"), "1");
        tun.configure(local, peer, mtu)
            .with_context(|| format!("configuring {name} ({local} ↔ {peer}, MTU {mtu})"))?;
        tun.departures = Departures::open(name).map_err(|e| format!("{e:#}"));
        Ok(tun)
    }

    fn configure(&self, local: Ipv4Addr, peer: Ipv4Addr, mtu: u32) -> io::Result<()> {
        // SAFETY: plain socket(2), closed when `sock` drops.
        let sock = unsafe {
            let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
            if s < 0 {
                return Err(io::Error::last_os_error());
            }
            OwnedFd::from_raw_fd(s)
        };
        let set = |req: libc::c_ulong, ifr: &libc::ifreq| {
            // SAFETY: a SIOCSIF* request reading `ifr`.
            if unsafe { libc::ioctl(sock.as_raw_fd(), req as _, ifr) } != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        };
        let addr = |a: Ipv4Addr| {
            let mut ifr = ifreq(&self.name);
            // SAFETY: sockaddr_in fits in the union's sockaddr; both are plain data.
            unsafe {
                let sin =
                    &mut ifr.ifr_ifru.ifru_addr as *mut libc::sockaddr as *mut libc::sockaddr_in;
                (*sin).sin_family = libc::AF_INET as libc::sa_family_t;
                (*sin).sin_addr.s_addr = u32::from_ne_bytes(a.octets());
            }
            ifr
        };
        set(SIOCSIFADDR, &addr(local))?;
        set(SIOCSIFDSTADDR, &addr(peer))?;
        set(SIOCSIFNETMASK, &addr(Ipv4Addr::new(255, 255, 255, 255)))?;
        let mut ifr = ifreq(&self.name);
        ifr.ifr_ifru.ifru_mtu = mtu as libc::c_int;
        set(SIOCSIFMTU, &ifr)?;
        let mut ifr = ifreq(&self.name);
        // SAFETY: SIOCGIFFLAGS writes the flags member of `ifr`.
        if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS as _, &mut ifr) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the flags member was just written by the kernel.
        unsafe {
            ifr.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        }
        set(libc::SIOCSIFFLAGS, &ifr)
    }

    /// Lets this device carry packets to and from 127.0.0.0/8 (a server listening on
    /// 127.0.0.1 reached through the line): `net.ipv4.conf.NAME.route_localnet = 1` in the
    /// current network namespace.
    pub fn route_localnet(&self) -> anyhow::Result<()> {
        let path = format!("/proc/sys/net/ipv4/conf/{}/route_localnet", self.name);
        std::fs::write(&path, "1").with_context(|| format!("writing {path}"))
    }

    /// When `ip`, just read from this device, left the sending stack: the kernel's stamp in
    /// real-time nanoseconds ([`Departures::departed`]); `None` without a tap or a match.
    pub fn departed(&mut self, ip: &[u8], wall_now: u64) -> Option<u64> {
        self.departures.as_mut().ok()?.departed(ip, wall_now)
    }

    /// Why the device has no departure tap, if it has none.
    pub fn tap_error(&self) -> Option<&str> {
        self.departures.as_ref().err().map(String::as_str)
    }

    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// The header size, its byte order and the offloads (module doc).
fn offloads(fd: RawFd) -> io::Result<()> {
    let call = |req, arg: libc::c_ulong| {
        // SAFETY: a TUNSET* request taking an integer argument (by value for TUNSETOFFLOAD,
        // by pointer for the others).
        let r = unsafe {
            if req == libc::TUNSETOFFLOAD {
                libc::ioctl(fd, req, arg)
            } else {
                let v = arg as libc::c_int;
                libc::ioctl(fd, req, &v)
            }
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    };
    call(libc::TUNSETVNETHDRSZ, VNET_HDR_LEN as libc::c_ulong)?;
    if let Err(e) = call(libc::TUNSETVNETLE, 1) {
        // Little-endian is what the device uses anyway on a little-endian machine.
        if cfg!(target_endian = "big") {
            return Err(e);
        }
    }
    // Best effort: a kernel that refuses the offloads hands the line plain packets behind the
    // same header, which the line carries as they are (only slower in bulk).
    let _ = call(
        libc::TUNSETOFFLOAD,
        (libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6) as libc::c_ulong,
    );
    Ok(())
}

fn ifreq(name: &str) -> libc::ifreq {
    // SAFETY: ifreq is plain data.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr
        .ifr_name
        .iter_mut()
        .zip(name.bytes().take(libc::IFNAMSIZ - 1))
    {
        *d = s as libc::c_char;
    }
    ifr
}
