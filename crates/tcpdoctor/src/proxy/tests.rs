//! End-to-end tests over real kernel sockets on 127.0.0.1: every listener binds port 0, every
//! wait is on a socket or a task, every loop is bounded, and nothing asserts on wall time.

use std::net::SocketAddr;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tcpdoctor_core::impair::{ChunkMode, SplitMix64};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::{run, Addr, Listener, ProxyConfig, Summary};
use crate::proxy::summary::{C2S, S2C};

pub(super) struct Proxy {
    pub(super) addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<anyhow::Result<Summary>>,
}

impl Proxy {
    pub(super) async fn start(cfg: ProxyConfig) -> Proxy {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (stop, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(run(Listener::Tcp(l), cfg, async {
            let _ = rx.await;
        }));
        Proxy { addr, stop, task }
    }

    pub(super) async fn stop(self) -> Summary {
        let _ = self.stop.send(());
        self.task.await.unwrap().unwrap()
    }
}

fn payload(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = SplitMix64::new(seed);
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        v.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    v.truncate(len);
    v
}

/// Reads to EOF; returns (bytes, SHA-256).
async fn drain<R: AsyncRead + Unpin>(mut r: R) -> std::io::Result<(u64, [u8; 32])> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut n = 0u64;
    loop {
        let k = r.read(&mut buf).await?;
        if k == 0 {
            return Ok((n, h.finalize().into()));
        }
        n += k as u64;
        h.update(&buf[..k]);
    }
}

fn sha(b: &[u8]) -> [u8; 32] {
    Sha256::digest(b).into()
}

/// Sends `out` and shuts down writing, while reading everything the peer sends.
async fn exchange<S: AsyncRead + AsyncWrite>(s: S, out: &[u8]) -> (u64, [u8; 32]) {
    let (r, mut w) = tokio::io::split(s);
    let send = async {
        w.write_all(out).await.unwrap();
        w.shutdown().await.unwrap();
    };
    let (_, got) = tokio::join!(send, drain(r));
    got.unwrap()
}

/// An upstream that, for each of `n` connections, exchanges `reply` for whatever it is sent;
/// returns what it received per connection.
fn upstream_exchange(l: TcpListener, n: usize, reply: Vec<u8>) -> JoinHandle<Vec<(u64, [u8; 32])>> {
    tokio::spawn(async move {
        let mut tasks = Vec::new();
        for _ in 0..n {
            let (s, _) = l.accept().await.unwrap();
            let reply = reply.clone();
            tasks.push(tokio::spawn(async move { exchange(s, &reply).await }));
        }
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        out
    })
}

async fn bound() -> (TcpListener, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    (l, a)
}

/// 64 MiB each way through the pass-through path: SHA-256 equal on both sides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn byte_exact_64_mib_each_way() {
    const N: usize = 64 << 20;
    let (up, up_addr) = bound().await;
    let to_client = payload(1, N);
    let to_server = payload(2, N);
    let server = upstream_exchange(up, 1, to_client.clone());
    let proxy = Proxy::start(ProxyConfig::forward_to(Addr::Tcp(up_addr))).await;
    let c = TcpStream::connect(proxy.addr).await.unwrap();
    let got = exchange(c, &to_server).await;
    assert_eq!(got, (N as u64, sha(&to_client)), "server → client");
    assert_eq!(
        server.await.unwrap()[0],
        (N as u64, sha(&to_server)),
        "client → server"
    );
    let s = proxy.stop().await;
    assert_eq!(s.total[C2S].bytes, N as u64);
    assert_eq!(s.total[S2C].bytes, N as u64);
}

/// Thousands of tiny writes each way, the pattern that makes the splice path's reads short:
/// every byte still arrives once, in order. (A lost readiness edge would hang here, so the
/// whole exchange is bounded in time.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiny_writes_both_ways_arrive_exact() {
    const WRITES: usize = 20_000;
    let (up, upstream) = bound().await;
    let mut rng = SplitMix64::new(9);
    let sizes: Vec<usize> = (0..WRITES)
        .map(|_| 1 + (rng.next_u64() % 200) as usize)
        .collect();
    let to_client = payload(5, sizes.iter().sum());
    let to_server = payload(6, sizes.iter().sum());
    let tiny = |s: TcpStream, data: Vec<u8>, sizes: Vec<usize>| async move {
        s.set_nodelay(true).unwrap();
        let (r, mut w) = s.into_split();
        let send = async move {
            let mut at = 0;
            for n in sizes {
                w.write_all(&data[at..at + n]).await.unwrap();
                at += n;
            }
            w.shutdown().await.unwrap();
        };
        let (_, got) = tokio::join!(send, drain(r));
        got.unwrap()
    };
    let (reply, server_sizes) = (to_client.clone(), sizes.clone());
    let server = tokio::spawn(async move {
        let (s, _) = up.accept().await.unwrap();
        tiny(s, reply, server_sizes).await
    });
    let proxy = Proxy::start(ProxyConfig::forward_to(Addr::Tcp(upstream))).await;
    let c = TcpStream::connect(proxy.addr).await.unwrap();
    let both = async {
        (
            tiny(c, to_server.clone(), sizes).await,
            server.await.unwrap(),
        )
    };
    let (got_client, got_server) = tokio::time::timeout(Duration::from_secs(120), both)
        .await
        .expect("tiny writes through the proxy did not finish within 120 s");
    assert_eq!(got_client, (to_client.len() as u64, sha(&to_client)));
    assert_eq!(got_server, (to_server.len() as u64, sha(&to_server)));
    proxy.stop().await;
}

/// Small chunks are copied, and what a slow receiver cannot take yet waits in a pipe ahead of
/// what is spliced later: with a 4 KiB send buffer towards a server that reads 64 bytes at a
/// time, 2 MiB written 1000 bytes at a time still arrive whole and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_chunks_into_a_slow_receiver_stay_in_order() {
    const N: usize = 2 << 20;
    let (up, up_addr) = bound().await;
    socket2::SockRef::from(&up)
        .set_recv_buffer_size(4096)
        .expect("SO_RCVBUF on the listener");
    let server = tokio::spawn(async move {
        let (mut s, _) = up.accept().await.expect("accept");
        let mut h = Sha256::new();
        let mut buf = [0u8; 64];
        let mut n = 0u64;
        loop {
            let k = s.read(&mut buf).await.expect("read");
            if k == 0 {
                return (n, <[u8; 32]>::from(h.finalize()));
            }
            n += k as u64;
            h.update(&buf[..k]);
        }
    });
    let mut cfg = ProxyConfig::forward_to(Addr::Tcp(up_addr));
    cfg.server_leg.sndbuf = Some(4096);
    let proxy = Proxy::start(cfg).await;
    let data = payload(11, N);
    let mut c = TcpStream::connect(proxy.addr).await.expect("connect");
    c.set_nodelay(true).expect("nodelay");
    let send = async {
        for piece in data.chunks(1000) {
            c.write_all(piece).await.expect("write");
        }
        c.shutdown().await.expect("shutdown");
    };
    let both = async { tokio::join!(send, server).1 };
    let got = tokio::time::timeout(Duration::from_secs(120), both)
        .await
        .expect("did not finish within 120 s")
        .expect("server task");
    assert_eq!(got, (N as u64, sha(&data)));
    let s = proxy.stop().await;
    assert_eq!(s.total[C2S].bytes, N as u64);
}

/// The impaired path (delay, jitter, pacing, re-chunking) to a Unix-socket upstream: still
/// byte-exact and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn byte_exact_impaired_to_unix_upstream() {
    const N: usize = 4 << 20;
    let path = std::env::temp_dir().join(format!("tcpdoctor-proxy-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let up = UnixListener::bind(&path).unwrap();
    let to_client = payload(3, N);
    let to_server = payload(4, N);
    let reply = to_client.clone();
    let server = tokio::spawn(async move {
        let (s, _) = up.accept().await.unwrap();
        exchange(s, &reply).await
    });
    let mut cfg = ProxyConfig::forward_to(Addr::Unix(path.clone()));
    cfg.c2s.delay = Duration::from_millis(2);
    cfg.c2s.jitter = Duration::from_millis(2);
    cfg.c2s.chunks = ChunkMode::Split(1000);
    cfg.s2c.delay = Duration::from_millis(1);
    cfg.s2c.rate_bps = Some(2_000_000_000);
    cfg.s2c.chunks = ChunkMode::Coalesce;
    cfg.max_queued = 256 << 10;
    let proxy = Proxy::start(cfg).await;
    let c = TcpStream::connect(proxy.addr).await.unwrap();
    let got = exchange(c, &to_server).await;
    assert_eq!(got, (N as u64, sha(&to_client)));
    assert_eq!(server.await.unwrap(), (N as u64, sha(&to_server)));
    proxy.stop().await;
    let _ = std::fs::remove_file(&path);
}

/// A delayed chunk never leaves early: every round trip through `--delay c2s=1500us,s2c=500us`
/// takes at least the 2 ms asked for (a lower bound only: how late is the benchmark's business,
/// `scripts/bench-proxy.sh`, not a test's on a shared machine), and the bytes come back exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_round_trips_never_arrive_early() {
    let (up, upstream) = bound().await;
    let server = tokio::spawn(async move {
        let (mut s, _) = up.accept().await.unwrap();
        let mut b = [0u8; 1];
        while s.read_exact(&mut b).await.is_ok() {
            s.write_all(&b).await.unwrap();
        }
    });
    let mut cfg = ProxyConfig::forward_to(Addr::Tcp(upstream));
    cfg.c2s.delay = Duration::from_micros(1500);
    cfg.s2c.delay = Duration::from_micros(500);
    let proxy = Proxy::start(cfg).await;
    let mut c = TcpStream::connect(proxy.addr).await.unwrap();
    c.set_nodelay(true).unwrap();
    for i in 0..40u8 {
        let t = std::time::Instant::now();
        c.write_all(&[i]).await.unwrap();
        let mut b = [0u8; 1];
        c.read_exact(&mut b).await.unwrap();
        let rtt = t.elapsed();
        assert_eq!(b, [i]);
        assert!(
            rtt >= Duration::from_millis(2),
            "round trip {i} took {rtt:?} < 2 ms"
        );
    }
    drop(c);
    server.await.unwrap();
    proxy.stop().await;
}

/// 500 connections at once, each with its own payload both ways.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_concurrent_connections() {
    crate::limits::raise_fd_limit().expect("open-file limit");
    const CONNS: usize = 500;
    let (up, up_addr) = bound().await;
    let server = upstream_exchange(up, CONNS, payload(9, 3000));
    let proxy = Proxy::start(ProxyConfig::forward_to(Addr::Tcp(up_addr))).await;
    // Open every connection before any finishes, so all 500 are in flight together.
    let mut socks = Vec::new();
    for _ in 0..CONNS {
        socks.push(TcpStream::connect(proxy.addr).await.unwrap());
    }
    let mut tasks = Vec::new();
    for (i, s) in socks.into_iter().enumerate() {
        tasks.push(tokio::spawn(async move {
            let out = payload(100 + i as u64, 1000 + i);
            (exchange(s, &out).await, sha(&out), out.len())
        }));
    }
    let want_reply = (3000u64, sha(&payload(9, 3000)));
    let mut sent = Vec::new();
    for t in tasks {
        let (got, h, len) = t.await.unwrap();
        assert_eq!(got, want_reply);
        sent.push((len as u64, h));
    }
    let mut received = server.await.unwrap();
    received.sort();
    sent.sort();
    assert_eq!(
        received, sent,
        "every connection's bytes arrived, to one connection each"
    );
    let s = proxy.stop().await;
    assert_eq!(s.connections, CONNS as u64);
    assert_eq!(s.open, 0);
}

/// The client sends its request and FIN; the server answers only after reading EOF.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_close_keeps_the_other_direction_open() {
    let (up, up_addr) = bound().await;
    let server = tokio::spawn(async move {
        let (mut s, _) = up.accept().await.unwrap();
        let mut req = Vec::new();
        s.read_to_end(&mut req).await.unwrap();
        // Our receiving side saw EOF; the sending side still works.
        for _ in 0..100 {
            s.write_all(b"reply after your FIN\n").await.unwrap();
        }
        s.shutdown().await.unwrap();
        req
    });
    let mut cfg = ProxyConfig::forward_to(Addr::Tcp(up_addr));
    cfg.s2c.delay = Duration::from_millis(1);
    let proxy = Proxy::start(cfg).await;
    let mut c = TcpStream::connect(proxy.addr).await.unwrap();
    c.write_all(b"request").await.unwrap();
    c.shutdown().await.unwrap();
    let mut reply = Vec::new();
    c.read_to_end(&mut reply).await.unwrap();
    assert_eq!(reply, b"reply after your FIN\n".repeat(100));
    assert_eq!(server.await.unwrap(), b"request");
    proxy.stop().await;
}

fn reset_and_drop(s: TcpStream) {
    socket2::SockRef::from(&s)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    drop(s);
}

/// RST from the client reaches the server as a reset, and RST from the server reaches the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resets_propagate_both_ways() {
    let (up, up_addr) = bound().await;
    let proxy = Proxy::start(ProxyConfig::forward_to(Addr::Tcp(up_addr))).await;

    // Client resets.
    let mut c = TcpStream::connect(proxy.addr).await.unwrap();
    c.write_all(b"hello").await.unwrap();
    let (mut s, _) = up.accept().await.unwrap();
    let mut buf = [0u8; 5];
    s.read_exact(&mut buf).await.unwrap();
    reset_and_drop(c);
    let e = s
        .read(&mut buf)
        .await
        .expect_err("server sees the reset, not EOF");
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset);

    // Server resets.
    let mut c = TcpStream::connect(proxy.addr).await.unwrap();
    let (mut s, _) = up.accept().await.unwrap();
    s.write_all(b"hi").await.unwrap();
    let mut two = [0u8; 2];
    c.read_exact(&mut two).await.unwrap();
    reset_and_drop(s);
    let e = c
        .read(&mut two)
        .await
        .expect_err("client sees the reset, not EOF");
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset);

    let sum = proxy.stop().await;
    let ends: Vec<String> = sum.conns.iter().filter_map(|c| c.end.clone()).collect();
    assert!(ends[0].starts_with("client reset"), "{ends:?}");
    assert!(ends[1].starts_with("server reset"), "{ends:?}");
}

/// An upstream that refuses: the client is reset, and the summary says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_refusing_resets_the_client() {
    let (l, dead) = bound().await;
    drop(l);
    let proxy = Proxy::start(ProxyConfig::forward_to(Addr::Tcp(dead))).await;
    // The reset may even beat the end of `connect`.
    let r = match TcpStream::connect(proxy.addr).await {
        Ok(mut c) => c.read(&mut [0u8; 16]).await,
        Err(e) => Err(e),
    };
    assert!(
        matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
        "{r:?}"
    );
    let s = proxy.stop().await;
    let end = s.conns[0].end.clone().unwrap_or_default();
    assert!(end.contains("refused"), "{end}");
}

/// The client disappears while the server is streaming: the server's writes fail (the proxy
/// resets it) instead of filling buffers forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_vanishing_mid_stream_stops_the_server() {
    let (up, up_addr) = bound().await;
    let server = tokio::spawn(async move {
        let (mut s, _) = up.accept().await.unwrap();
        let block = vec![7u8; 64 * 1024];
        // Bounded: 16 GiB would take minutes; the error must come long before.
        for i in 0..(16u64 << 14) {
            if let Err(e) = s.write_all(&block).await {
                return Some((i, e.kind()));
            }
        }
        None
    });
    let proxy = Proxy::start(ProxyConfig::forward_to(Addr::Tcp(up_addr))).await;
    let mut c = TcpStream::connect(proxy.addr).await.unwrap();
    let mut buf = vec![0u8; 1 << 20];
    c.read_exact(&mut buf).await.unwrap();
    drop(c); // unread data pending: the kernel resets
    let (_, kind) = server.await.unwrap().expect("server write failed");
    assert!(
        matches!(
            kind,
            std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
        ),
        "{kind:?}"
    );
    let s = proxy.stop().await;
    assert_eq!(s.open, 0);
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Run alone in a child process (see `no_fd_left_open`), where no other test opens files.
#[test]
#[ignore = "run by no_fd_left_open in its own process"]
fn fd_count_child() {
    if std::env::var_os("TCPDOCTOR_FD_CHILD").is_none() {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (before, after) = rt.block_on(async {
        // Warm up once so descriptors the runtime creates lazily (the signal driver) exist.
        let (l, a) = bound().await;
        Proxy::start(ProxyConfig::forward_to(Addr::Tcp(a)))
            .await
            .stop()
            .await;
        drop(l);
        let before = open_fds();
        let (up, up_addr) = bound().await;
        let server = tokio::spawn(async move {
            let mut tasks = Vec::new();
            for _ in 0..60 {
                let (mut s, _) = up.accept().await.unwrap();
                tasks.push(tokio::spawn(async move {
                    // Reset connections fail here; that is expected.
                    let _ = s.write_all(b"ok").await;
                    let _ = s.shutdown().await;
                    let _ = drain(&mut s).await;
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
        });
        let proxy = Proxy::start(ProxyConfig::forward_to(Addr::Tcp(up_addr))).await;
        let mut tasks = Vec::new();
        for i in 0..60 {
            let a = proxy.addr;
            tasks.push(tokio::spawn(async move {
                let c = TcpStream::connect(a).await.unwrap();
                if i % 3 == 0 {
                    reset_and_drop(c);
                } else {
                    exchange(c, b"hello").await;
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        server.await.unwrap();
        let s = proxy.stop().await;
        assert_eq!(s.open, 0);
        assert_eq!(s.connections, 60);
        (before, open_fds())
    });
    assert_eq!(after, before, "file descriptors left open");
    println!("FD_CHILD_OK before={before} after={after}");
}

#[test]
fn no_fd_left_open() {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args([
            "proxy::tests::fd_count_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("TCPDOCTOR_FD_CHILD", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("FD_CHILD_OK"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One line of the per-line server's response; five of them make a response.
const LINE: &[u8] = b"attr 00 = value of the attribute\n";
const LINES: usize = 5;

/// A per-line server: for each request line it writes its response one line per `write`,
/// doing a little work (200 µs) per line, like a server that fetches each line from a store.
/// It sets TCP_NODELAY, like Python's asyncio and Go: with Nagle on, such a server stalls on
/// its own even when connected to directly (measured: 198 of 200 exchanges ≥ 30 ms), and the
/// point here is the proxy's part.
fn per_line_server() -> (SocketAddr, std::thread::JoinHandle<()>) {
    use std::io::{BufRead, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        s.set_nodelay(true).unwrap();
        let mut w = s.try_clone().unwrap();
        for line in std::io::BufReader::new(s).lines() {
            if line.is_err() {
                break;
            }
            for _ in 0..LINES {
                std::thread::sleep(Duration::from_micros(200));
                if w.write_all(LINE).is_err() {
                    return;
                }
            }
        }
    });
    (a, t)
}

/// `n` request/response exchanges; returns each one's latency.
fn exchanges(addr: SocketAddr, n: usize) -> Vec<Duration> {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_nodelay(true).unwrap();
    let mut buf = vec![0u8; LINE.len() * LINES];
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = std::time::Instant::now();
        c.write_all(b"GET\n").unwrap();
        c.read_exact(&mut buf).unwrap();
        out.push(t.elapsed());
    }
    out
}

fn share_slow(lat: &[Duration]) -> f64 {
    lat.iter()
        .filter(|d| **d >= Duration::from_millis(30))
        .count() as f64
        / lat.len() as f64
}

fn median(lat: &[Duration]) -> Duration {
    let mut v = lat.to_vec();
    v.sort();
    v[v.len() / 2]
}

const EXCHANGES: usize = 50;

/// Runs the per-line server behind `cfg` (or directly); returns latencies and the summary.
async fn per_line_through(cfg: Option<ProxyConfig>) -> (Vec<Duration>, Option<Summary>) {
    let (server, t) = per_line_server();
    let (target, proxy) = match cfg {
        Some(mut c) => {
            c.upstream = Addr::Tcp(server);
            let p = Proxy::start(c).await;
            (p.addr, Some(p))
        }
        None => (server, None),
    };
    let lat = tokio::task::spawn_blocking(move || exchanges(target, EXCHANGES))
        .await
        .unwrap();
    let summary = match proxy {
        Some(p) => Some(p.stop().await),
        None => None,
    };
    t.join().unwrap();
    (lat, summary)
}

fn findings(pcap: &std::path::Path) -> Vec<String> {
    let (_, found) = crate::cli::analyze::analyze_file(&pcap.to_path_buf(), None).unwrap();
    found.iter().map(|f| f.kind.as_str().to_string()).collect()
}

/// Direct: fast. Through `--nagle client=on --chunks preserve`: the proxy re-emits each line
/// it reads with Nagle on, the client delays its ACK, and exchanges pin near 40 ms. Through
/// `--nagle off`: fast again. The recording and the capture tell the same story.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nagle_on_the_client_leg_reproduces_the_stall() {
    let dir = std::env::temp_dir().join(format!("tcpdoctor-nagle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (direct, _) = per_line_through(None).await;

    let mut stalled_cfg = ProxyConfig::forward_to(Addr::Tcp("127.0.0.1:9".parse().unwrap()));
    stalled_cfg.client_leg.nagle = true;
    stalled_cfg.record = Some(dir.join("stalled.jsonl"));
    stalled_cfg.pcap = Some(dir.join("stalled.pcap"));
    let (stalled, s_sum) = per_line_through(Some(stalled_cfg)).await;

    let mut off_cfg = ProxyConfig::forward_to(Addr::Tcp("127.0.0.1:9".parse().unwrap()));
    off_cfg.pcap = Some(dir.join("off.pcap"));
    let (off, _) = per_line_through(Some(off_cfg)).await;

    let (d, s, o) = (share_slow(&direct), share_slow(&stalled), share_slow(&off));
    eprintln!(
        "share of exchanges ≥ 30 ms: direct {d:.2} (median {:?}), nagle on {s:.2} (median \
         {:?}), nagle off {o:.2} (median {:?})",
        median(&direct),
        median(&stalled),
        median(&off)
    );
    assert!(d < 0.2, "direct should be fast: {d}");
    assert!(
        s >= 0.5,
        "nagle on the client leg should stall most exchanges: {s}"
    );
    assert!(o < 0.2, "nagle off should be fast: {o}");

    // The recording: one line per chunk read; the client's requests are one chunk each.
    let s_sum = s_sum.unwrap();
    let text = std::fs::read_to_string(dir.join("stalled.jsonl")).unwrap();
    let mut count = [0u64; 2];
    let mut bytes = [0u64; 2];
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let d = if v["dir"] == "c2s" { C2S } else { S2C };
        count[d] += 1;
        bytes[d] += v["bytes"].as_u64().unwrap();
        assert!(v["t_ns"].is_u64() && (v["gap_ns"].is_u64() || v["gap_ns"].is_null()));
    }
    assert_eq!(count[C2S], EXCHANGES as u64);
    assert_eq!(bytes[C2S], 4 * EXCHANGES as u64);
    assert_eq!(bytes[S2C], (LINE.len() * LINES * EXCHANGES) as u64);
    assert_eq!(count[S2C], s_sum.total[S2C].chunks);
    assert!(
        count[S2C] > EXCHANGES as u64,
        "lines arrive as separate chunks"
    );

    // The capture: analyze names the stall, and only where there is one.
    let stalled_kinds = findings(&dir.join("stalled.pcap"));
    assert!(
        stalled_kinds.iter().any(|k| k == "nagle_delayed_ack"),
        "{stalled_kinds:?}"
    );
    let off_kinds = findings(&dir.join("off.pcap"));
    assert!(
        !off_kinds.iter().any(|k| k == "nagle_delayed_ack"),
        "{off_kinds:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
