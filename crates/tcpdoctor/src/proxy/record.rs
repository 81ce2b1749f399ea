//! Recordings: JSON Lines of every chunk read, and a synthetic pcap of the forwarded traffic.
//!
//! Connection tasks send small events over a bounded channel to one writer thread, so a slow
//! disk slows the proxy down (back-pressure) instead of growing memory, and file I/O never
//! blocks the runtime. Files are flushed when the proxy stops.
//!
//! What each file shows:
//! - `--record`: the chunks the proxy *read* from each side, i.e. how each endpoint wrote:
//!   `{"conn":1,"dir":"s2c","bytes":7,"t_ns":…,"unix_ns":…,"gap_ns":…}` where `t_ns` counts
//!   from the proxy's start and `gap_ns` is the time since the previous chunk of that
//!   connection and direction (`null` for the first).
//! - `--pcap`: what the proxy *sent* on, after impairments, as one synthetic TCP connection per
//!   proxied one (client 10.x.y.z, server the upstream address or 10.0.0.1). Where a leg has
//!   Nagle on, the proxy watches its own send queue: bytes the kernel held appear when they
//!   left, preceded by the peer's pure ACK that released them — observed, not invented.
//! - `--pcap` with `--pcap-at client|server` (`ProxyConfig::pcap_at`): the same connections as a
//!   capture at that end of the emulated path would show them
//!   (`tcpdoctor_core::wire::capture_point` states the model). The connection tasks feed the
//!   near end's data at the time the proxy *read* it from that end and the far end's data at
//!   the time the proxy *wrote* it to that end (both observed); the handshake spanning the
//!   round trip (c2s + s2c delay) and the far end's ACKs are modelled there.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::Path;
use std::thread::JoinHandle;

use anyhow::Context;
use tcpdoctor_core::wire::capture_point::{self, PathCapture};
use tcpdoctor_core::wire::write::{PcapWriter, Side};
use tcpdoctor_core::Timestamp;
use tokio::sync::mpsc;

use super::summary::DIR_NAMES;
use super::{Addr, Clock, ProxyConfig};

/// Payload bytes kept per packet in the pcap.
pub const PCAP_PAYLOAD: usize = 128;
const CHANNEL: usize = 8192;

#[derive(Debug)]
pub enum Event {
    Open {
        conn: u64,
        ts: Timestamp,
        peer: Option<SocketAddr>,
    },
    /// A chunk read (for the JSON Lines).
    Read {
        conn: u64,
        dir: usize,
        ts: Timestamp,
        len: usize,
        gap: Option<u64>,
    },
    /// Bytes that passed the capture point (for the pcap): for the proxy, bytes that left it;
    /// at an end, also bytes read from that end. `head` is the first bytes, `len` all of them.
    Sent {
        conn: u64,
        dir: usize,
        ts: Timestamp,
        head: Vec<u8>,
        len: usize,
    },
    /// The receiver of `dir` acknowledged everything sent so far (a pure ACK).
    Acked {
        conn: u64,
        dir: usize,
        ts: Timestamp,
    },
    /// The sender of `dir` closed it.
    Fin {
        conn: u64,
        dir: usize,
        ts: Timestamp,
    },
    /// The sender of `dir` reset the connection.
    Rst {
        conn: u64,
        dir: usize,
        ts: Timestamp,
    },
    Close {
        conn: u64,
    },
}

/// The writer thread and the channel to it.
pub struct Recorder {
    tx: Option<mpsc::Sender<Event>>,
    thread: Option<JoinHandle<anyhow::Result<()>>>,
    jsonl: bool,
    pcap: bool,
}

/// What a connection task holds: cheap to clone, a no-op when nothing is recorded.
#[derive(Clone)]
pub struct RecordHandle {
    tx: Option<mpsc::Sender<Event>>,
    pub jsonl: bool,
    pub pcap: bool,
}

impl RecordHandle {
    pub async fn send(&self, ev: Event) {
        if let Some(tx) = &self.tx {
            // The writer only goes away after every connection has finished.
            let _ = tx.send(ev).await;
        }
    }
}

impl Recorder {
    pub fn start(config: &ProxyConfig, clock: Clock) -> anyhow::Result<Recorder> {
        let jsonl = match &config.record {
            Some(p) => Some(BufWriter::with_capacity(
                1 << 16,
                File::create(p).with_context(|| format!("--record {}", p.display()))?,
            )),
            None => None,
        };
        let pcap = match &config.pcap {
            Some(p) => Some(open_pcap(p)?),
            None => None,
        };
        if jsonl.is_none() && pcap.is_none() {
            return Ok(Recorder {
                tx: None,
                thread: None,
                jsonl: false,
                pcap: false,
            });
        }
        let (has_j, has_p) = (jsonl.is_some(), pcap.is_some());
        let (tx, rx) = mpsc::channel(CHANNEL);
        let server = match &config.upstream {
            Addr::Tcp(SocketAddr::V4(a)) => *a,
            Addr::Tcp(a) => SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), a.port()),
            Addr::Unix(_) => SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 9000),
        };
        let mut w = WriterState {
            jsonl,
            pcap,
            flows: HashMap::new(),
            server,
            clock,
            at: config.pcap_at,
            path: capture_point::EmulatedPath {
                rtt: config.c2s.delay + config.s2c.delay,
                jitter: config.c2s.jitter + config.s2c.jitter,
            },
        };
        let thread = std::thread::Builder::new()
            .name("tcpdoctor-record".into())
            .spawn(move || {
                let _helper = crate::bench::cpu::helper_thread();
                w.run(rx)
            })
            .context("starting the recording thread")?;
        Ok(Recorder {
            tx: Some(tx),
            thread: Some(thread),
            jsonl: has_j,
            pcap: has_p,
        })
    }

    pub fn handle(&self) -> RecordHandle {
        RecordHandle {
            tx: self.tx.clone(),
            jsonl: self.jsonl,
            pcap: self.pcap,
        }
    }

    /// Closes the channel, lets the thread write what is queued, flushes the files.
    pub async fn finish(mut self) -> anyhow::Result<()> {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            return tokio::task::spawn_blocking(move || {
                t.join()
                    .map_err(|_| anyhow::anyhow!("recording thread panicked"))?
            })
            .await?;
        }
        Ok(())
    }
}

fn open_pcap(p: &Path) -> anyhow::Result<PcapWriter<BufWriter<File>>> {
    let f = File::create(p).with_context(|| format!("--pcap {}", p.display()))?;
    PcapWriter::new(BufWriter::with_capacity(1 << 16, f), 65_535)
        .with_context(|| format!("--pcap {}", p.display()))
}

struct WriterState {
    jsonl: Option<BufWriter<File>>,
    pcap: Option<PcapWriter<BufWriter<File>>>,
    flows: HashMap<u64, PathCapture>,
    server: SocketAddrV4,
    clock: Clock,
    at: capture_point::CapturePoint,
    path: capture_point::EmulatedPath,
}

fn side(dir: usize) -> Side {
    if dir == 0 {
        Side::Client
    } else {
        Side::Server
    }
}

impl WriterState {
    fn run(&mut self, mut rx: mpsc::Receiver<Event>) -> anyhow::Result<()> {
        let mut result = Ok(());
        while let Some(ev) = rx.blocking_recv() {
            if let Err(e) = self.on_event(ev) {
                self.fail(&mut result, e);
            }
        }
        // Connections cut off at shutdown: their modelled packets still belong in the file.
        let left: Vec<u64> = self.flows.keys().copied().collect();
        for conn in left {
            if let Err(e) = self.on_event(Event::Close { conn }) {
                self.fail(&mut result, e);
            }
        }
        if let Some(j) = &mut self.jsonl {
            j.flush().context("flushing --record")?;
        }
        if let Some(p) = &mut self.pcap {
            p.flush().context("flushing --pcap")?;
        }
        result
    }

    /// Keeps draining after an error, so senders never block on a dead writer; the first
    /// error is reported at exit.
    fn fail(&mut self, result: &mut anyhow::Result<()>, e: anyhow::Error) {
        if result.is_ok() {
            *result = Err(e);
        }
        self.jsonl = None;
        self.pcap = None;
    }

    fn unix(&self, ts: Timestamp) -> Timestamp {
        Timestamp(self.clock.unix_start_ns + ts.as_nanos())
    }

    fn on_event(&mut self, ev: Event) -> anyhow::Result<()> {
        match ev {
            Event::Read {
                conn,
                dir,
                ts,
                len,
                gap,
            } => {
                if let Some(j) = &mut self.jsonl {
                    let unix = self.clock.unix_start_ns + ts.as_nanos();
                    let gap = gap.map_or_else(|| "null".to_string(), |g| g.to_string());
                    writeln!(
                        j,
                        r#"{{"conn":{conn},"dir":"{}","bytes":{len},"t_ns":{},"unix_ns":{unix},"gap_ns":{gap}}}"#,
                        DIR_NAMES[dir],
                        ts.as_nanos()
                    )
                    .context("writing --record")?;
                }
            }
            Event::Open { conn, ts, peer } => {
                if self.pcap.is_some() {
                    let client = SocketAddrV4::new(
                        Ipv4Addr::new(
                            10,
                            1 + ((conn >> 16) & 0x7f) as u8,
                            ((conn >> 8) & 0xff) as u8,
                            (conn & 0xff) as u8,
                        ),
                        peer.map_or(40_000, |p| p.port()),
                    );
                    let (flow, pkts) = PathCapture::new(
                        client,
                        self.server,
                        self.at,
                        self.path,
                        self.unix(ts),
                        PCAP_PAYLOAD,
                    );
                    self.flows.insert(conn, flow);
                    self.write(pkts)?;
                }
            }
            Event::Sent {
                conn,
                dir,
                ts,
                head,
                len,
            } => {
                let t = self.unix(ts);
                if let Some(f) = self.flows.get_mut(&conn) {
                    // Only the head of the payload travels here; lengths are the real ones.
                    let pkts = f.data(t, side(dir), &head, len);
                    self.write(pkts)?;
                }
            }
            Event::Acked { conn, dir, ts } => {
                let t = self.unix(ts);
                if let Some(f) = self.flows.get_mut(&conn) {
                    let pkts = f.ack(t, side(1 - dir));
                    self.write(pkts)?;
                }
            }
            Event::Fin { conn, dir, ts } => {
                let t = self.unix(ts);
                if let Some(f) = self.flows.get_mut(&conn) {
                    let pkts = f.fin(t, side(dir));
                    self.write(pkts)?;
                }
            }
            Event::Rst { conn, dir, ts } => {
                let t = self.unix(ts);
                if let Some(f) = self.flows.get_mut(&conn) {
                    let pkts = f.rst(t, side(dir));
                    self.write(pkts)?;
                }
            }
            Event::Close { conn } => {
                if let Some(mut f) = self.flows.remove(&conn) {
                    self.write(f.finish())?;
                }
            }
        }
        Ok(())
    }

    fn write(&mut self, pkts: Vec<(Timestamp, Vec<u8>, u32)>) -> anyhow::Result<()> {
        if let Some(w) = &mut self.pcap {
            for (ts, p, len) in pkts {
                w.write_packet(ts, &p, len).context("writing --pcap")?;
            }
        }
        Ok(())
    }
}
