//! Where a specimen listens and what it accepts: TCP or a Unix stream socket, behind one
//! blocking `Read + Write` so the protocols do not care which.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

use crate::proxy::Addr;

/// A bound listener, TCP or Unix.
pub enum SpecimenListener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

impl SpecimenListener {
    /// Binds `at`. A Unix socket file left by an earlier server that nobody accepts on any
    /// more is removed first (as daemons do); a live one is left alone (the bind fails).
    pub fn bind(at: &Addr) -> io::Result<SpecimenListener> {
        match at {
            Addr::Tcp(a) => TcpListener::bind(a).map(SpecimenListener::Tcp),
            Addr::Unix(p) => {
                remove_stale_socket(p);
                UnixListener::bind(p).map(SpecimenListener::Unix)
            }
        }
    }

    /// The address bound: the port a `:0` request was given, or the socket's path.
    pub fn local(&self, at: &Addr) -> io::Result<Addr> {
        match self {
            SpecimenListener::Tcp(l) => Ok(Addr::Tcp(l.local_addr()?)),
            SpecimenListener::Unix(_) => Ok(at.clone()),
        }
    }

    pub(super) fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        match self {
            SpecimenListener::Tcp(l) => l.set_nonblocking(on),
            SpecimenListener::Unix(l) => l.set_nonblocking(on),
        }
    }

    pub(super) fn accept(&self) -> io::Result<Stream> {
        match self {
            SpecimenListener::Tcp(l) => l.accept().map(|(s, _)| Stream::Tcp(s)),
            SpecimenListener::Unix(l) => l.accept().map(|(s, _)| Stream::Unix(s)),
        }
    }
}

impl AsRawFd for SpecimenListener {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            SpecimenListener::Tcp(l) => l.as_raw_fd(),
            SpecimenListener::Unix(l) => l.as_raw_fd(),
        }
    }
}

fn remove_stale_socket(p: &Path) {
    use std::os::unix::fs::FileTypeExt;
    let is_socket = std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_socket());
    if is_socket && UnixStream::connect(p).is_err() {
        let _ = std::fs::remove_file(p);
    }
}

/// An accepted connection, TCP or Unix.
pub(super) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    pub(super) fn try_clone(&self) -> io::Result<Stream> {
        match self {
            Stream::Tcp(s) => s.try_clone().map(Stream::Tcp),
            Stream::Unix(s) => s.try_clone().map(Stream::Unix),
        }
    }

    pub(super) fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_nonblocking(on),
            Stream::Unix(s) => s.set_nonblocking(on),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }
}
