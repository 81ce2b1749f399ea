//! A traced program's calls joined to a capture's frames and cited by the findings that
//! quote that capture (`tcpdoctor_core::syscalls::{join, cite}`): one more read of the file.

use std::fs::File;
use std::net::SocketAddr;
use std::path::Path;

use anyhow::Context;
use tcpdoctor_core::report::Finding;
use tcpdoctor_core::syscalls::{cite, join, Trace};
use tcpdoctor_core::wire::CaptureReader;

use crate::capture_file::Input;

/// Joins `trace` to the frames of `file` and adds what it shows to `findings` (which quote
/// `file`'s frame numbers). Returns how many findings were cited.
pub fn cite_from(findings: &mut [Finding], trace: &Trace, file: &Path) -> anyhow::Result<usize> {
    if trace.calls.is_empty() || findings.is_empty() {
        return Ok(0);
    }
    let name = file.display().to_string();
    let f = File::open(file).with_context(|| format!("joining the trace to {name}"))?;
    let input = Input::new(f).with_context(|| format!("joining the trace to {name}"))?;
    let mut reader = CaptureReader::with_buffer_size(input, 4 << 20)
        .with_context(|| format!("joining the trace to {name}"))?;
    let joins = join::join_capture(trace, &mut reader)
        .with_context(|| format!("joining the trace to {name}"))?;
    Ok(cite::cite(findings, trace, &joins))
}

/// The server's trace as the client's end of a `wan:` path sees it: the line's far end maps
/// `FAR_ADDR:port` to the server's own address, so every server socket on `port` is
/// readdressed to `FAR_ADDR:port` (addresses only: the bytes and sequence numbers are the
/// same at both ends).
pub fn server_seen_from_near(trace: &Trace, port: u16) -> Trace {
    let far = SocketAddr::from((crate::wan::FAR_ADDR, port));
    trace.readdressed(&server_addresses(trace, port, far))
}

/// The client's trace as the server's end of a `wan:` path sees it: the client connected to
/// `FAR_ADDR:port`, which the far end delivers to the server's own address (`server`'s
/// sockets on `port` say which).
pub fn client_seen_from_far(client: &Trace, server: &Trace, port: u16) -> Trace {
    let far = SocketAddr::from((crate::wan::FAR_ADDR, port));
    let map: Vec<(SocketAddr, SocketAddr)> = server_addresses(server, port, far)
        .into_iter()
        .map(|(own, far)| (far, own))
        .take(1)
        .collect();
    client.readdressed(&map)
}

/// (the server's own address on `port`, `far`) for each distinct own address other than `far`.
fn server_addresses(trace: &Trace, port: u16, far: SocketAddr) -> Vec<(SocketAddr, SocketAddr)> {
    let mut map: Vec<(SocketAddr, SocketAddr)> = Vec::new();
    for s in &trace.sockets {
        if let Some(own) = s.local.filter(|a| a.port() == port && *a != far) {
            if s.remote.is_some() && !map.iter().any(|(o, _)| *o == own) {
                map.push((own, far));
            }
        }
    }
    map
}
