//! The kernel's socket diagnostics (NETLINK_SOCK_DIAG, `inet_diag_req_v2`): every TCP socket
//! of one network namespace with its `tcp_info`, congestion control and memory, in one dump
//! per address family — what `ss -tinm` reads.
//!
//! Hand-written over `libc` rather than with `netlink-packet-sock-diag`: the request is 72
//! bytes and the answer a flat list of attributes, while the crate brings four more
//! dependencies and parses `tcp_info` into its own fixed struct, where this reader needs every
//! field by offset with the length checks of [`super::tcp_info`] (kernels differ in length).
//! Every read is bounds-checked: a malformed answer ends the dump with an error, never a panic.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use tcpdoctor_core::inspect::TcpSample;

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const INET_DIAG_INFO: u16 = 2;
const INET_DIAG_CONG: u16 = 4;
const INET_DIAG_SKMEMINFO: u16 = 7;
const INET_DIAG_REQ_BYTECODE: u16 = 1;
const INET_DIAG_BC_JMP: u8 = 1;
const INET_DIAG_BC_S_EQ: u8 = 11;
/// `SK_MEMINFO_RCVBUF` and `SK_MEMINFO_SNDBUF`: indexes of the u32 array.
const SKMEM_RCVBUF: usize = 1;
const SKMEM_SNDBUF: usize = 3;
/// Every state but TIME_WAIT (6): a socket in it has no inode, so no process.
const STATES: u32 = 0xfff & !(1 << 6);
pub const TCP_LISTEN: u8 = 10;

/// One TCP socket as the dump describes it.
#[derive(Clone, Debug)]
pub struct DiagSocket {
    pub inode: u64,
    /// The kernel's socket cookie (`idiag_cookie`, `SO_COOKIE`): unique to this socket since
    /// boot, never reused as an inode number is.
    pub cookie: u64,
    pub uid: u32,
    pub state: u8,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub sample: Option<TcpSample>,
    pub congestion: Option<String>,
    /// `sk_sndbuf` and `sk_rcvbuf`: what `SO_SNDBUF`/`SO_RCVBUF` return, readable without
    /// touching the process.
    pub sndbuf: Option<u32>,
    pub rcvbuf: Option<u32>,
    /// `idiag_rqueue`: bytes received and not yet read by the program (an established
    /// socket's), when the dump gave it.
    pub unread: Option<u32>,
}

/// Which address families a dump covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Families {
    Both,
    V4,
    V6,
}

impl Families {
    /// The families of these local addresses (`Both` for none or a mix).
    pub fn of(addrs: impl Iterator<Item = SocketAddr>) -> Families {
        let (mut v4, mut v6) = (false, false);
        for a in addrs {
            if a.is_ipv4() {
                v4 = true;
            } else {
                v6 = true;
            }
        }
        match (v4, v6) {
            (true, false) => Families::V4,
            (false, true) => Families::V6,
            _ => Families::Both,
        }
    }
}

/// A NETLINK_SOCK_DIAG socket; it answers for the network namespace it was opened in.
pub struct Diag {
    fd: OwnedFd,
    seq: u32,
    buf: Vec<u8>,
}

impl Diag {
    /// Opens one in the calling thread's network namespace.
    pub fn open() -> io::Result<Diag> {
        // SAFETY: plain socket(2); the descriptor is owned at once.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
                libc::NETLINK_SOCK_DIAG,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor we just created and own alone.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Diag {
            fd,
            seq: 0,
            buf: vec![0; 64 << 10],
        })
    }

    /// Every TCP socket of the namespace (IPv4, then IPv6), sampled at `at_ns`.
    pub fn dump(&mut self, at_ns: u64) -> io::Result<Vec<DiagSocket>> {
        self.dump_ports(at_ns, &[], Families::Both)
    }

    /// The TCP sockets of `families` whose local port is one of `ports` (all of them when
    /// `ports` is empty). The kernel filters; what it cannot spare is the walk over its whole
    /// connection table, once per family dumped — most of a sample's cost, so a process with
    /// sockets of one family only costs one walk.
    pub fn dump_ports(
        &mut self,
        at_ns: u64,
        ports: &[u16],
        families: Families,
    ) -> io::Result<Vec<DiagSocket>> {
        let mut out = Vec::new();
        let filter = local_ports_filter(ports);
        let list: &[u8] = match families {
            Families::Both => &[libc::AF_INET as u8, libc::AF_INET6 as u8],
            Families::V4 => &[libc::AF_INET as u8],
            Families::V6 => &[libc::AF_INET6 as u8],
        };
        for &family in list {
            self.dump_family(family, at_ns, &filter, &mut out)?;
        }
        Ok(out)
    }

    fn dump_family(
        &mut self,
        family: u8,
        at_ns: u64,
        filter: &[u8],
        out: &mut Vec<DiagSocket>,
    ) -> io::Result<()> {
        self.seq = self.seq.wrapping_add(1);
        let req = request(family, self.seq, filter);
        // SAFETY: sends our buffer to the kernel (a zeroed sockaddr_nl is the kernel).
        let sent = unsafe {
            let mut to: libc::sockaddr_nl = std::mem::zeroed();
            to.nl_family = libc::AF_NETLINK as libc::sa_family_t;
            libc::sendto(
                self.fd.as_raw_fd(),
                req.as_ptr().cast(),
                req.len(),
                0,
                (&to as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        loop {
            // SAFETY: the kernel writes at most buf.len() bytes into our buffer.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr().cast(),
                    self.buf.len(),
                    0,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if parse_messages(&self.buf[..n as usize], self.seq, family, at_ns, out)? {
                return Ok(());
            }
        }
    }
}

fn request(family: u8, seq: u32, filter: &[u8]) -> Vec<u8> {
    let ext: u8 = (1 << (INET_DIAG_INFO - 1))
        | (1 << (INET_DIAG_CONG - 1))
        | (1 << (INET_DIAG_SKMEMINFO - 1));
    let attr = if filter.is_empty() {
        0
    } else {
        4 + filter.len()
    };
    let len = 16 + 56 + attr;
    let mut r = Vec::with_capacity(len);
    r.extend_from_slice(&(len as u32).to_ne_bytes());
    r.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    r.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    r.extend_from_slice(&seq.to_ne_bytes());
    r.extend_from_slice(&0u32.to_ne_bytes());
    // inet_diag_req_v2: family, protocol, ext, pad, states, then a zeroed inet_diag_sockid.
    r.extend_from_slice(&[family, libc::IPPROTO_TCP as u8, ext, 0]);
    r.extend_from_slice(&STATES.to_ne_bytes());
    r.resize(16 + 56, 0);
    if attr > 0 {
        r.extend_from_slice(&(attr as u16).to_ne_bytes());
        r.extend_from_slice(&INET_DIAG_REQ_BYTECODE.to_ne_bytes());
        r.extend_from_slice(filter);
    }
    r
}

/// Ports past this many are not filtered in the kernel (the program runs for every socket of
/// the namespace, one test per port): the dump is then whole.
pub const MAX_FILTER_PORTS: usize = 64;

/// An `inet_diag` bytecode program accepting the sockets whose local port is one of `ports`
/// (empty, or too many: no program, every socket), laid out as `ss` lays out `a or b`:
/// `[S_EQ a][JMP][S_EQ b][JMP]…[S_EQ z]`. A test that matches goes on to its JMP, which
/// jumps to the end (accept); a miss skips the JMP to the next test; the last test's miss
/// jumps 4 bytes past the end (reject). The kernel audits the program along its `yes` path,
/// which this layout keeps on every op.
pub fn local_ports_filter(ports: &[u16]) -> Vec<u8> {
    if ports.is_empty() || ports.len() > MAX_FILTER_PORTS {
        return Vec::new();
    }
    let total = 12 * ports.len() - 4;
    let mut bc = Vec::with_capacity(total);
    for (i, &port) in ports.iter().enumerate() {
        // inet_diag_bc_op { code: u8, yes: u8, no: u16 }, then the port in a second op's `no`.
        bc.extend_from_slice(&[INET_DIAG_BC_S_EQ, 8]);
        bc.extend_from_slice(&12u16.to_ne_bytes());
        bc.extend_from_slice(&[0, 0]);
        bc.extend_from_slice(&port.to_ne_bytes());
        if i + 1 < ports.len() {
            let to_end = (total - bc.len() - 4) as u16 + 4;
            bc.extend_from_slice(&[INET_DIAG_BC_JMP, 4]);
            bc.extend_from_slice(&to_end.to_ne_bytes());
        }
    }
    bc
}

fn u16_ne(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_ne(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn bad(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("sock_diag answer: {what}"),
    )
}

/// Parses one datagram of the dump into `out`; true when it held the end of the dump.
fn parse_messages(
    mut b: &[u8],
    seq: u32,
    family: u8,
    at_ns: u64,
    out: &mut Vec<DiagSocket>,
) -> io::Result<bool> {
    while b.len() >= 16 {
        let len = u32_ne(b, 0).ok_or_else(|| bad("header"))? as usize;
        let kind = u16_ne(b, 4).ok_or_else(|| bad("header"))?;
        let their_seq = u32_ne(b, 8).ok_or_else(|| bad("header"))?;
        if len < 16 || len > b.len() {
            return Err(bad("message length"));
        }
        let payload = &b[16..len];
        b = &b[((len + 3) & !3).min(b.len())..];
        if their_seq != seq {
            continue;
        }
        match kind {
            // The dump's end carries an int: negative when the kernel stopped the walk on an
            // error (ENOMEM, EINTR...) — what came before is then not every socket, and the
            // ones missing must not be taken for closed.
            NLMSG_DONE => {
                return match u32_ne(payload, 0).map(|v| v as i32) {
                    Some(e) if e < 0 => Err(io::Error::from_raw_os_error(-e)),
                    _ => Ok(true),
                };
            }
            NLMSG_ERROR => {
                let errno = u32_ne(payload, 0).ok_or_else(|| bad("error"))? as i32;
                if errno == 0 {
                    continue;
                }
                return Err(io::Error::from_raw_os_error(-errno));
            }
            SOCK_DIAG_BY_FAMILY => {
                if let Some(s) = parse_socket(payload, family, at_ns) {
                    out.push(s);
                }
            }
            _ => {}
        }
    }
    Ok(false)
}

/// An `inet_diag_msg` (72 bytes) and its attributes.
fn parse_socket(p: &[u8], family: u8, at_ns: u64) -> Option<DiagSocket> {
    let state = *p.get(1)?;
    let sport = u16::from_be_bytes(p.get(4..6)?.try_into().ok()?);
    let dport = u16::from_be_bytes(p.get(6..8)?.try_into().ok()?);
    let src = p.get(8..24)?;
    let dst = p.get(24..40)?;
    let unread = u32_ne(p, 56);
    let uid = u32_ne(p, 64)?;
    let inode = u64::from(u32_ne(p, 68)?);
    // `idiag_cookie[2]`: the low half first (sock_diag_save_cookie).
    let cookie = u64::from(u32_ne(p, 44)?) | u64::from(u32_ne(p, 48)?) << 32;
    let addr = |a: &[u8]| -> Option<IpAddr> {
        if family == libc::AF_INET as u8 {
            Some(IpAddr::V4(Ipv4Addr::from(
                <[u8; 4]>::try_from(a.get(..4)?).ok()?,
            )))
        } else {
            Some(IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(a).ok()?)))
        }
    };
    let mut s = DiagSocket {
        inode,
        cookie,
        uid,
        state,
        local: SocketAddr::new(addr(src)?, sport),
        remote: SocketAddr::new(addr(dst)?, dport),
        sample: None,
        congestion: None,
        sndbuf: None,
        rcvbuf: None,
        unread,
    };
    let mut attrs = p.get(72..)?;
    while attrs.len() >= 4 {
        let len = usize::from(u16_ne(attrs, 0)?);
        let kind = u16_ne(attrs, 2)?;
        if len < 4 || len > attrs.len() {
            break;
        }
        let data = &attrs[4..len];
        match kind {
            INET_DIAG_INFO => s.sample = Some(super::tcp_info::parse(data, at_ns)),
            INET_DIAG_CONG => {
                let name = data.split(|&c| c == 0).next().unwrap_or_default();
                s.congestion = Some(String::from_utf8_lossy(name).into_owned());
            }
            INET_DIAG_SKMEMINFO => {
                s.rcvbuf = u32_ne(data, SKMEM_RCVBUF * 4);
                s.sndbuf = u32_ne(data, SKMEM_SNDBUF * 4);
            }
            _ => {}
        }
        attrs = &attrs[((len + 3) & !3).min(attrs.len())..];
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use std::net::{TcpListener, TcpStream};
    use std::os::unix::fs::MetadataExt;

    use super::{parse_messages, Diag, Families, TCP_LISTEN};

    fn inode_of(fd: &impl std::os::fd::AsRawFd) -> u64 {
        let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("fd");
        let text = link.to_string_lossy().into_owned();
        text.trim_start_matches("socket:[")
            .trim_end_matches(']')
            .parse()
            .expect("socket inode")
    }

    #[test]
    fn the_dump_finds_our_own_sockets_with_tcp_info_and_buffers() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (s, _) = l.accept().expect("accept");
        let l6 = TcpListener::bind("[::1]:0").ok();
        let mut diag = Diag::open().expect("NETLINK_SOCK_DIAG");
        let all = diag.dump(42).expect("dump");
        let find = |ino: u64| all.iter().find(|d| d.inode == ino);
        let listener = find(inode_of(&l)).expect("listener in the dump");
        assert_eq!(listener.state, TCP_LISTEN);
        assert_eq!(listener.local, l.local_addr().expect("addr"));
        let accepted = find(inode_of(&s)).expect("accepted socket in the dump");
        assert_eq!(accepted.remote, c.local_addr().expect("addr"));
        let sample = accepted.sample.expect("tcp_info");
        assert_eq!((sample.state, sample.at_ns), (1, 42));
        assert!(accepted.sndbuf.is_some_and(|b| b > 0) && accepted.congestion.is_some());
        // The cookie is the socket's own (SO_COOKIE), and the listener's differs.
        let cookie = socket2::SockRef::from(&s).cookie().expect("SO_COOKIE");
        assert_eq!(accepted.cookie, cookie);
        assert_ne!(listener.cookie, cookie);
        let me = std::fs::metadata("/proc/self").expect("proc").uid();
        assert_eq!(accepted.uid, me);
        if let Some(l6) = l6 {
            let v6 = find(inode_of(&l6)).expect("IPv6 listener in the dump");
            assert!(v6.local.is_ipv6());
        }
    }

    #[test]
    fn the_kernel_filters_by_local_port() {
        let a = TcpListener::bind("127.0.0.1:0").expect("bind");
        let b = TcpListener::bind("127.0.0.1:0").expect("bind");
        let c = TcpListener::bind("127.0.0.1:0").expect("bind");
        let _in_a = TcpStream::connect(a.local_addr().expect("addr")).expect("connect");
        let (accepted, _) = a.accept().expect("accept");
        let port = |l: &TcpListener| l.local_addr().expect("addr").port();
        let mut diag = Diag::open().expect("NETLINK_SOCK_DIAG");
        let got = diag
            .dump_ports(0, &[port(&a), port(&c)], Families::V4)
            .expect("filtered dump");
        let inodes: Vec<u64> = got.iter().map(|s| s.inode).collect();
        for wanted in [inode_of(&a), inode_of(&accepted), inode_of(&c)] {
            assert!(inodes.contains(&wanted), "{got:?}");
        }
        assert!(!inodes.contains(&inode_of(&b)));
        assert!(got
            .iter()
            .all(|s| s.local.port() == port(&a) || s.local.port() == port(&c)));
        // Past the limit, the whole namespace.
        let many: Vec<u16> = (1..=super::MAX_FILTER_PORTS as u16 + 1).collect();
        let all = diag
            .dump_ports(0, &many, Families::Both)
            .expect("whole dump");
        assert!(all.iter().any(|s| s.inode == inode_of(&b)));
        let most: Vec<u16> = (1..super::MAX_FILTER_PORTS as u16)
            .chain([port(&b)])
            .collect();
        let just_b = diag
            .dump_ports(0, &most, Families::V4)
            .expect("longest filter");
        assert!(just_b.iter().any(|s| s.inode == inode_of(&b)));
        assert!(!just_b.iter().any(|s| s.inode == inode_of(&a)));
    }

    #[test]
    fn malformed_answers_are_errors_not_panics() {
        let mut out = Vec::new();
        // A header claiming more bytes than there are.
        let mut b = vec![0u8; 20];
        b[..4].copy_from_slice(&400u32.to_ne_bytes());
        assert!(parse_messages(&b, 0, 2, 0, &mut out).is_err());
        // A diag message too short to hold an inet_diag_msg is skipped.
        let mut m = vec![0u8; 16 + 10];
        m[..4].copy_from_slice(&26u32.to_ne_bytes());
        m[4..6].copy_from_slice(&20u16.to_ne_bytes());
        assert_eq!(parse_messages(&m, 0, 2, 0, &mut out).ok(), Some(false));
        assert!(out.is_empty());
        // An end of dump carrying an error: the dump is incomplete, an error.
        let done = |errno: i32| {
            let mut d = vec![0u8; 20];
            d[..4].copy_from_slice(&20u32.to_ne_bytes());
            d[4..6].copy_from_slice(&super::NLMSG_DONE.to_ne_bytes());
            d[16..20].copy_from_slice(&errno.to_ne_bytes());
            d
        };
        let e = parse_messages(&done(-libc::EINTR), 0, 2, 0, &mut out).expect_err("incomplete");
        assert_eq!(e.raw_os_error(), Some(libc::EINTR));
        assert_eq!(parse_messages(&done(0), 0, 2, 0, &mut out).ok(), Some(true));
        // An end without its int (older kernels' answers may be bare) is still an end.
        let mut bare = vec![0u8; 16];
        bare[..4].copy_from_slice(&16u32.to_ne_bytes());
        bare[4..6].copy_from_slice(&super::NLMSG_DONE.to_ne_bytes());
        assert_eq!(parse_messages(&bare, 0, 2, 0, &mut out).ok(), Some(true));
        for n in 0..64 {
            let junk: Vec<u8> = (0..n).map(|i| (i * 37 + n) as u8).collect();
            let _ = parse_messages(&junk, 0, 10, 0, &mut out);
        }
    }
}
