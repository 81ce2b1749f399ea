//! A request/response workload over real kernel TCP, shared by the capture tests and the
//! `exchange` example (the workload run inside `tcpdoctor sandbox`).
//!
//! The client sends `GET <i>\n` and reads until the terminator line `.\n`. The per-line
//! server writes each of [`LINES`] response lines with its own write() and Nagle on: from the
//! second exchange on, the rest of each response waits for the client's delayed ACK (~40 ms
//! on Linux). Its coalesced twin writes the same bytes once. Both ends close with a FIN
//! handshake and report what their socket sent (`TCP_INFO`).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;

pub const LINES: usize = 4;

/// What one end sent, from its own counters and the kernel's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sent {
    pub bytes: u64,
    /// Segments the kernel sent for this socket (`tcpi_segs_out`).
    pub segments: u64,
    /// Of which carried data (`tcpi_data_segs_out`).
    pub data_segments: u64,
}

fn tcp_info(s: &TcpStream) -> io::Result<libc::tcp_info> {
    // SAFETY: tcp_info is plain data; getsockopt fills at most `len` bytes of it.
    unsafe {
        let mut info: libc::tcp_info = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
        let r = libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        );
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(info)
    }
}

fn sent(s: &TcpStream, bytes: u64) -> io::Result<Sent> {
    let i = tcp_info(s)?;
    Ok(Sent {
        bytes,
        segments: u64::from(i.tcpi_segs_out),
        data_segments: u64::from(i.tcpi_data_segs_out),
    })
}

fn response(i: &str) -> Vec<Vec<u8>> {
    let mut lines: Vec<Vec<u8>> = (1..=LINES)
        .map(|k| format!("attr-{k}: value-{i}-{k}\n").into_bytes())
        .collect();
    lines.push(b".\n".to_vec());
    lines
}

/// Serves one connection: per-line writes, or one write per response when `coalesce`.
/// Returns after the client closed and the server's FIN went out.
pub fn serve(conn: TcpStream, coalesce: bool) -> io::Result<Sent> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut out = conn.try_clone()?;
    let mut bytes = 0u64;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        let i = line.trim().strip_prefix("GET ").unwrap_or("?").to_string();
        let lines = response(&i);
        if coalesce {
            let all = lines.concat();
            out.write_all(&all)?;
            bytes += all.len() as u64;
        } else {
            for l in &lines {
                out.write_all(l)?;
                bytes += l.len() as u64;
            }
        }
    }
    conn.shutdown(Shutdown::Write)?;
    sent(&conn, bytes)
}

/// Accepts connections for ever, one at a time (for the example).
pub fn serve_forever(listener: TcpListener, coalesce: bool) -> io::Result<()> {
    for conn in listener.incoming() {
        serve(conn?, coalesce)?;
    }
    Ok(())
}

/// Runs `n` exchanges, closes, and waits for the server's FIN. Returns what the client sent
/// and the number of response bytes it received.
pub fn client(mut conn: TcpStream, n: usize) -> io::Result<(Sent, u64)> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let (mut bytes, mut received) = (0u64, 0u64);
    let mut line = String::new();
    for i in 0..n {
        let req = format!("GET {i}\n");
        conn.write_all(req.as_bytes())?;
        bytes += req.len() as u64;
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "server closed mid-response",
                ));
            }
            received += line.len() as u64;
            if line == ".\n" {
                break;
            }
        }
    }
    conn.shutdown(Shutdown::Write)?;
    let mut rest = Vec::new();
    reader.read_to_end(&mut rest)?;
    Ok((sent(&conn, bytes)?, received + rest.len() as u64))
}

/// Connects, retrying while the server is not listening yet (bounded: 5 s).
pub fn connect(addr: &str) -> io::Result<TcpStream> {
    let mut last = None;
    for _ in 0..500 {
        match TcpStream::connect(addr) {
            Ok(s) => return Ok(s),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                last = Some(e);
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("connect")))
}
