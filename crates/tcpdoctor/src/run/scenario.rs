//! One scenario, end to end: start the hop (if the path has one) and the capture, drive the
//! target (`--repeat` times in a row, hop and capture spanning every run), account the
//! server's CPU, stop everything, pool the runs, diagnose.
//!
//! A Unix-socket target: the direct path has no packets (nothing to capture; bench figures,
//! stall counts, server CPU and `busy_poll` still hold), and a hop listens on TCP
//! 127.0.0.1 and forwards to the socket, so the driver↔hop leg is real TCP, captured live on
//! `lo` or from the hop's recording.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tcpdoctor_core::analysis::ScriptedClient;
use tcpdoctor_core::ends::{compare, EndCapture};
use tcpdoctor_core::impair::ChunkMode;
use tcpdoctor_core::report::{Bucket, Finding, FindingKind};
use tcpdoctor_core::run::{
    busy_poll, log_buckets, BusyPollInput, CaptureInfo, ChunkView, Figures, Pooled, ScenarioKind,
    ScenarioResult, ServerCpu,
};
use tcpdoctor_core::syscalls::Trace;

use super::live::LiveCapture;
use super::server::Server;
use super::Plan;
use crate::bench::{BenchConfig, Bound};
use crate::proxy::{self, Addr, CapturePoint, Listener, ProxyConfig};

/// A hop between driver and target.
#[derive(Clone, Debug)]
pub struct Hop {
    /// Nagle on the proxy's socket towards the driver.
    pub nagle_to_driver: bool,
    /// How server→client bytes are re-emitted.
    pub s2c_chunks: ChunkMode,
    /// One-way delay each way.
    pub delay: Duration,
}

/// What to run: a name, the path in words, the hop, and how the driver behaves.
#[derive(Clone, Debug)]
pub struct Path {
    pub name: String,
    pub describe: String,
    /// The path exactly (`Scenario::definition`).
    pub definition: String,
    pub hop: Option<Hop>,
    /// The driver's settings for this scenario (the demo's fixed twins change them).
    pub driver: Driver,
}

/// The driver's knobs a scenario may change.
#[derive(Clone, Debug)]
pub struct Driver {
    pub pipeline: usize,
    pub nagle: bool,
    pub split: crate::bench::SplitWrites,
    /// Open loop at this many requests per second (None: closed loop).
    pub rate: Option<f64>,
}

impl Path {
    /// The path of scenario `s` to `target` (a hop in front of a Unix socket says so).
    pub fn of(s: &tcpdoctor_core::run::Scenario, driver: Driver, target: &Addr) -> Path {
        let hop = |nagle: bool, delay: Duration| Hop {
            nagle_to_driver: nagle,
            s2c_chunks: ChunkMode::Preserve,
            delay,
        };
        let mut describe = s.describe();
        if matches!(target, Addr::Unix(_)) && s.kind != ScenarioKind::Direct {
            describe.push_str("; upstream: the Unix socket");
        }
        Path {
            name: s.name.clone(),
            describe,
            definition: s.definition(),
            hop: match &s.kind {
                ScenarioKind::Direct | ScenarioKind::Wan(_) => None,
                ScenarioKind::Proxy => Some(hop(false, Duration::ZERO)),
                ScenarioKind::ProxyNagle => Some(hop(true, Duration::ZERO)),
                ScenarioKind::ProxyDelay(d) => Some(hop(false, *d)),
            },
            driver,
        }
    }
}

fn proxy_config(upstream: &Addr, hop: &Hop, pcap: PathBuf) -> ProxyConfig {
    let mut cfg = ProxyConfig::forward_to(upstream.clone());
    cfg.c2s.delay = hop.delay;
    cfg.s2c.delay = hop.delay;
    cfg.s2c.chunks = hop.s2c_chunks;
    cfg.client_leg.nagle = hop.nagle_to_driver;
    cfg.pcap = Some(pcap);
    // Where the delay is, the recording shows what the driver's end of the path would see.
    if !hop.delay.is_zero() {
        cfg.pcap_at = CapturePoint::Client;
    }
    cfg
}

/// A proxy running in this process for one scenario.
struct RunningHop {
    addr: SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::sync::oneshot::Receiver<anyhow::Result<proxy::Summary>>,
    thread: std::thread::JoinHandle<()>,
    pcap: PathBuf,
}

impl RunningHop {
    /// Stops the proxy and waits for its summary (its recording is complete by then).
    async fn finish(self) -> anyhow::Result<proxy::Summary> {
        let _ = self.stop.send(());
        match self.task.await {
            Ok(summary) => summary.context("the scenario's proxy"),
            // The thread ended without a word: it panicked.
            Err(_) => Err(match self.thread.join() {
                Err(p) => anyhow::anyhow!(
                    "the scenario's proxy failed: {}",
                    p.downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| p.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "a panic".into())
                ),
                Ok(()) => anyhow::anyhow!("the scenario's proxy ended without a summary"),
            }),
        }
    }
}

/// A listening socket on 127.0.0.1 with the backlog tokio's own `bind` gives (std's is 128,
/// too few for `--connections` in the thousands opened at once).
fn hop_listener() -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    s.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())?;
    s.listen(1024)?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

/// Starts the scenario's proxy on a thread of its own, a helper (`bench::cpu`): its CPU is
/// tcpdoctor's, reported apart from the driver's work, and its tasks never share a thread
/// with the driver's connections (whose spinning is counted per thread, `crate::spin`).
fn start_hop(plan: &Plan, path: &Path, hop: &Hop) -> anyhow::Result<RunningHop> {
    let pcap = plan.file(&path.name, "proxy.pcap");
    let tcp = hop_listener().context("binding the scenario's proxy on 127.0.0.1")?;
    let addr = tcp.local_addr()?;
    let cfg = proxy_config(&plan.target, hop, pcap.clone());
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let (done, task) = tokio::sync::oneshot::channel();
    // The thread says whether its runtime and listener are up before the scenario drives
    // anything through it, so a proxy that cannot start fails the scenario at once.
    let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel::<anyhow::Result<()>>(1);
    let thread = std::thread::Builder::new()
        .name("tcpdoctor-hop".into())
        .spawn(move || {
            let _helper = crate::bench::cpu::helper_thread();
            let rt = match crate::cli::runtime(1) {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(e).context("the scenario's proxy"));
                    return;
                }
            };
            let ran = rt.block_on(async move {
                let listener = match tokio::net::TcpListener::from_std(tcp) {
                    Ok(l) => Listener::Tcp(l),
                    Err(e) => {
                        let _ = ready_tx.send(Err(e).context("the scenario's proxy listener"));
                        return None;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                Some(
                    proxy::run(listener, cfg, async move {
                        let _ = rx.await;
                    })
                    .await,
                )
            });
            if let Some(ran) = ran {
                let _ = done.send(ran);
            }
        })
        .context("starting the scenario's proxy thread")?;
    match ready_rx.recv() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(e),
        Err(_) => anyhow::bail!("the scenario's proxy thread ended before it was ready"),
    }
    Ok(RunningHop {
        addr,
        stop,
        task,
        thread,
        pcap,
    })
}

/// What the analysis is told about the client: the driver's pipelining, connections and the
/// requests it completed (all runs of the scenario: the capture spans them).
fn scripted_client(plan: &Plan, path: &Path, requests: u64) -> ScriptedClient {
    ScriptedClient {
        pipeline: u32::try_from(path.driver.pipeline).unwrap_or(u32::MAX),
        connections: u32::try_from(plan.connections).unwrap_or(u32::MAX),
        requests,
        rate: path.driver.rate,
    }
}

fn bucket_label(i: usize) -> String {
    let lo = 1u64 << i;
    let hi = (1u64 << (i + 1)) - 1;
    if lo == 1 {
        "1".into()
    } else {
        format!("{lo}–{hi}")
    }
}

fn chunk_view(s: &proxy::Summary) -> ChunkView {
    let sizes = |d: usize| -> Vec<Bucket> {
        s.total[d]
            .sizes
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .map(|(i, c)| Bucket {
                value: bucket_label(i),
                count: *c,
            })
            .collect()
    };
    ChunkView {
        c2s_chunks: s.total[0].chunks,
        s2c_chunks: s.total[1].chunks,
        s2c_sizes: sizes(1),
        c2s_sizes: sizes(0),
    }
}

/// Runs one scenario.
pub async fn run(
    plan: &Plan,
    path: &Path,
    server: Option<&Server>,
    live: bool,
    far: Option<super::far::FarEnd>,
) -> anyhow::Result<ScenarioResult> {
    let hop = match &path.hop {
        Some(h) => Some(start_hop(plan, path, h)?),
        None => None,
    };
    // Over a real path the server is the far end's, reached through the line.
    let server = far.as_ref().map(|f| &f.server).or(server);
    let driver_target = match (&far, &hop) {
        (Some(f), _) => Addr::Tcp(f.addr),
        (None, Some(h)) => Addr::Tcp(h.addr),
        (None, None) => plan.target.clone(),
    };
    // TCP ports on the path: the driver's target, and the server's when a hop is between.
    let mut ports: Vec<u16> = Vec::new();
    for a in [&driver_target, &plan.target] {
        if let Addr::Tcp(a) = a {
            if !ports.contains(&a.port()) {
                ports.push(a.port());
            }
        }
    }
    // A wan hop's packets on lo show no round trip (the kernel answers the handshake at
    // once); its recording, taken where the delay is, shows it.
    let delayed = path.hop.as_ref().is_some_and(|h| !h.delay.is_zero());
    // Over a real path the line records both ends; nothing to capture on lo.
    let capture = if live && !delayed && far.is_none() && !ports.is_empty() {
        let file = plan.file(&path.name, "lo.pcap");
        Some(LiveCapture::start(&ports, &file)?)
    } else {
        None
    };
    let cfg = BenchConfig {
        target: driver_target.clone(),
        script: Arc::clone(&plan.script),
        connections: plan.connections,
        pipeline: path.driver.pipeline,
        rate: path.driver.rate,
        spin: crate::bench::DEFAULT_SPIN,
        bound: Bound::Requests(plan.requests),
        warmup: Duration::ZERO,
        timeout: plan.timeout,
        // One exchange that times out is a timeout, counted, not a hung run: the watcher
        // must not give up at the same instant the exchange does.
        hang_after: plan.timeout * 2,
        nagle: path.driver.nagle,
        split: path.driver.split,
        repeat: plan.repeat,
        threads: 1,
        seed: 1,
        progress: false,
        watch_pid: server.map(|s| s.watch_pid()),
        timeline: server.map(|_| Arc::new(crate::bench::timeline::Timeline::default())),
        message_ends: Some(Arc::default()),
    };
    let message_ends = cfg.message_ends.clone();
    // The server's own sockets, read while the driver's connections are open.
    let sockets = match (server, &plan.target) {
        (Some(s), Addr::Tcp(a)) => Some(super::sockets::SocketsReader::start(
            s.pids(),
            a.port(),
            plan.connections,
        )),
        _ => None,
    };
    // The server's CPU along the driver's timeline (busy_poll).
    let sampler = match (server, &cfg.timeline) {
        (Some(s), Some(t)) => Some(
            super::cpu_sampler::Sampler::start(s.members(), Arc::clone(t))
                .context("starting the server's CPU sampler")?,
        ),
        _ => None,
    };
    // The trace's window is the scenario's: what came before (start-up, earlier scenarios)
    // is dropped, but for the socket options it set (`Trace::setup`).
    if let Some(s) = server {
        let _ = s.take_trace();
    }
    let cpu_before = server.map(|s| s.cpu());
    let started = Instant::now();
    let benched = crate::bench::run_keeping_measurements(Arc::new(cfg)).await;
    let wall = started.elapsed();
    let cpu_after = server.map(|s| s.cpu());
    let trace = server.map(|s| s.take_trace());
    let samples = sampler.map(|s| s.finish());
    let server_sockets = sockets.and_then(|r| r.finish());
    let live_outcome = capture.map(|c| c.finish());
    // The far end: stop its server, then the line, which writes both ends' captures.
    let far_captures = match far {
        Some(f) => Some(f.finish(&path.name)?),
        None => None,
    };
    let (summary, proxy_pcap) = match hop {
        Some(h) => {
            let pcap = h.pcap.clone();
            (Some(h.finish().await?), Some(pcap))
        }
        None => (None, None),
    };
    let (_, runs) = benched.map_err(|e| anyhow::anyhow!("{}: {e}", path.name))?;
    anyhow::ensure!(!runs.is_empty(), "{}: the bench made no run", path.name);
    let Pooled {
        bench,
        overall,
        repeat,
        noise,
    } = Pooled::of(plan.script.step_names(), &runs);
    let mut figures = Figures::of(&bench, &overall);
    figures.noise = Some(noise);

    let far_end_file = far_captures.as_ref().map(|c| c.far.clone());
    let (capture_file, source, note) = match (live_outcome, proxy_pcap, far_captures) {
        (_, _, Some(c)) => (
            Some(c.near.clone()),
            format!(
                "the delay line, at the client's end (real kernel TCP at both ends; {})",
                c.carried
            ),
            None,
        ),
        (Some(Ok(o)), _, None) => (
            o.file,
            format!(
                "AF_PACKET on lo ({}, {} dropped)",
                tcpdoctor_core::numfmt::count(o.packets, "packet"),
                o.dropped
            ),
            None,
        ),
        (Some(Err(e)), Some(p), None) => (
            Some(p),
            PROXY_RECORDING.to_string(),
            Some(format!(
                "live capture failed ({e:#}); used the proxy's recording"
            )),
        ),
        (Some(Err(e)), None, None) => (
            None,
            String::new(),
            Some(format!("live capture failed: {e:#}")),
        ),
        (None, Some(p), None) => (Some(p), PROXY_RECORDING.to_string(), None),
        (None, None, None) => (None, String::new(), Some(no_capture(plan, &driver_target))),
    };
    let mut findings: Vec<Finding> = Vec::new();
    let mut capture_info = None;
    // Every client in these captures is this run's driver (directly, or through the hop):
    // the analysis says so in what it finds about the client's conversation.
    let client = Some(scripted_client(plan, path, bench.exchanges));
    // Over a real path the two ends are also compared packet by packet: each end's packets
    // are kept during its analysis (one read per file).
    let mut near_end = match (&capture_file, &far_end_file) {
        (Some(near), Some(_)) => Some(EndCapture::new(&near.display().to_string())),
        _ => None,
    };
    // Where the driver's messages ended (the script's framing): evidence for the flows the
    // driver itself held, which are in the capture at the driver's end of the path (direct,
    // the driver↔hop leg, a wan: path's near end); a hop's upstream leg and the far end are
    // judged from the wire alone.
    let ends = message_ends.map(|log| Arc::new(log.take()));
    if let Some(file) = capture_file {
        match crate::cli::analyze::analyze_file_as(&file, near_end.as_mut(), client, ends) {
            Ok((summary, found)) => {
                // A refuted finding is not a finding (and no gate counts it), but the run says
                // so rather than dropping it silently.
                for w in &summary.withdrawn {
                    eprintln!(
                        "tcpdoctor: {}: the evidence audit withdrew {} {} ({}): {}",
                        path.name,
                        w.kind,
                        w.direction.as_str(),
                        w.server,
                        w.reasons.join("; ")
                    );
                }
                findings = found;
                // The driver pipelines: a turn of whole replies is not a reply in pieces.
                for f in &mut findings {
                    tcpdoctor_core::detect::reword_for_pipelining(f, path.driver.pipeline);
                }
                if let Some(how) = recording_basis(&source, path, &file) {
                    for f in &mut findings {
                        f.evidence.rests_on.push(how.clone());
                    }
                }
                figures.set_timer_stalls(&findings);
                capture_info = Some(CaptureInfo {
                    file: file.display().to_string(),
                    source,
                    summary,
                });
            }
            Err(e) => {
                near_end = None;
                eprintln!(
                    "tcpdoctor: {}: cannot analyse {}: {e:#}",
                    path.name,
                    file.display()
                );
            }
        }
    }
    // What the server's calls show, joined to the frames the findings quote (over a real
    // path, the client's end sees the server at the line's address).
    if let (Some(t), Some(info)) = (&trace, &capture_info) {
        let seen = match (&far_end_file, &plan.target) {
            (Some(_), Addr::Tcp(a)) => super::syscalls::server_seen_from_near(t, a.port()),
            _ => t.clone(),
        };
        cite_trace(
            &path.name,
            &mut findings,
            &seen,
            std::path::Path::new(&info.file),
        );
    }
    // Over a real path, the server's end too: what its kernel saw.
    let server_end = match &far_end_file {
        Some(file) => {
            let mut far_end = EndCapture::new(&file.display().to_string());
            match crate::cli::analyze::analyze_file_as(file, Some(&mut far_end), client, None) {
                Ok((_, mut found)) => Some(tcpdoctor_core::run::ServerEnd {
                    findings: {
                        if let Some(t) = &trace {
                            cite_trace(&path.name, &mut found, t, file);
                        }
                        found
                    },
                    file: file.display().to_string(),
                    path: near_end.take().map(|near| compare(near, far_end)),
                }),
                Err(e) => {
                    eprintln!(
                        "tcpdoctor: {}: cannot analyse {}: {e:#}",
                        path.name,
                        file.display()
                    );
                    None
                }
            }
        }
        None => None,
    };
    let chunks = summary.as_ref().map(chunk_view);
    if let Some(c) = &chunks {
        figures.set_chunks(c.s2c_chunks);
    }
    // What the trace says about the server's CPU: polling calls, or real work (busy_poll).
    let trace_verdict = trace
        .as_ref()
        .and_then(|t| tcpdoctor_core::syscalls::verdict(t, bench.exchanges, wall));
    let syscalls = trace
        .as_ref()
        .map(|t| tcpdoctor_core::syscalls::summarize(t, Some(bench.exchanges)));
    let server_cpu = match (cpu_before, cpu_after) {
        (Some(b), Some(a)) => {
            let (user, sys) = a.seconds_since(&b);
            Some(ServerCpu::new(
                user,
                sys,
                wall.as_secs_f64(),
                bench.exchanges,
                a.processes,
            ))
        }
        _ => None,
    };
    if let Some(cpu) = &server_cpu {
        figures.server_cpu_per_request_us = Some(cpu.per_request_us);
        if let Some(n) = figures.noise.as_mut() {
            if let (Some(b), Some(a)) = (cpu_before, cpu_after) {
                n.set_cpu(cpu.per_request_us, a.uncertainty_s(&b), bench.exchanges);
            }
        }
        let file = capture_info
            .as_ref()
            .map_or_else(|| "(process accounting)".to_string(), |c| c.file.clone());
        let target = plan.target.to_string();
        let samples = samples.unwrap_or_default();
        // busy_poll rule 0: the rest of the answers waited in the server's socket for the
        // client's ACK, as the capture shows it.
        let held_for_ack = findings.iter().any(|f| {
            matches!(
                f.kind,
                FindingKind::NagleDelayedAck | FindingKind::NagleRoundTrip
            ) && f.direction == tcpdoctor_core::flow::Direction::ServerToClient
        });
        let input = BusyPollInput {
            server: &target,
            file: &file,
            cpu: *cpu,
            samples: &samples,
            held_for_ack,
            exchanges: bench.exchanges,
            floor_us: bench.cpu.per_request_us,
            floor_of: "the driver's own CPU per request (its spinning for open-loop slots and \
                       answers and one-connection answers, and tcpdoctor's capture, socket-reading, \
                       delay-line and proxy-hop threads excluded)",
            cpu_counters: &format!(
                "{} ({} processes at the end)",
                crate::run::server::CPU_COUNTERS,
                cpu.processes
            ),
            floor_counters: crate::bench::cpu::COUNTERS,
            mean_ms: bench.latency_ms.mean,
            trace: trace_verdict.as_ref(),
        };
        if let Some(f) = busy_poll(&input) {
            findings.push(f);
        } else if let Some(why) = tcpdoctor_core::run::withheld_by_trace(&input) {
            eprintln!("tcpdoctor: {}: busy_poll: {why}", path.name);
        }
    }
    if let Some(k) = &server_sockets {
        tcpdoctor_core::inspect::server_sockets::corroborate(&mut findings, k);
    }
    Ok(ScenarioResult {
        name: path.name.clone(),
        definition: path.definition.clone(),
        path: path.describe.clone(),
        figures,
        latency_histogram: log_buckets(&overall),
        bench,
        repeat,
        capture: capture_info,
        capture_note: note,
        server_end,
        chunks,
        server_cpu,
        server_sockets,
        syscalls,
        findings,
    })
}

/// The capture source of a scenario diagnosed from its hop's recording.
const PROXY_RECORDING: &str = "proxy recording";

/// What a finding from the proxy's recording rests on: which of its packets were observed and
/// which modelled (see `proxy/record.rs` and `wire::capture_point`). `None` for a kernel capture.
fn recording_basis(source: &str, path: &Path, file: &std::path::Path) -> Option<String> {
    if source != PROXY_RECORDING {
        return None;
    }
    let delayed = path.hop.as_ref().is_some_and(|h| !h.delay.is_zero());
    Some(if delayed {
        format!(
            "the hop's recording {}, written as a capture at the driver's end of the emulated \
             path: data at the times the hop read it from the driver or wrote it to the driver \
             (observed); the handshake across the round trip and the far end's ACKs modelled \
             from the configured delay — not the kernel's segments",
            file.display()
        )
    } else {
        format!(
            "the hop's recording {}: one segment per chunk the hop sent on, at the time it \
             sent it (observed); with Nagle on a leg, the bytes the kernel held at the time \
             they left and the peer's ACK that released them (observed from the hop's send \
             queue); other ACKs written by the recorder — not the kernel's segments",
            file.display()
        )
    })
}

/// Why a scenario has no capture: a Unix socket carries no packets; else live capture was
/// not permitted.
fn no_capture(plan: &Plan, driver_target: &Addr) -> String {
    match driver_target {
        Addr::Unix(_) => "Unix socket: no packets (the figures, stall counts and server CPU \
                          still hold; a proxy scenario puts a TCP leg in front of it)"
            .to_string(),
        Addr::Tcp(_) => plan.no_capture_reason.clone(),
    }
}

/// Cites the server's trace in `findings` (which quote `file`); a failure is said, not fatal.
fn cite_trace(scenario: &str, findings: &mut [Finding], trace: &Trace, file: &std::path::Path) {
    if let Err(e) = super::syscalls::cite_from(findings, trace, file) {
        eprintln!(
            "tcpdoctor: {scenario}: the server's system calls were not joined to the frames: {e:#}"
        );
    }
}
