//! `pcap_at`: a capture modelled at one end of the emulated path shows the path's RTT, so
//! `tcpdoctor analyze` can name a client that pays one round trip per command. Real kernel
//! sockets on 127.0.0.1, port 0; nothing asserts on wall time.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::tests::Proxy;
use super::{Addr, CapturePoint, ProxyConfig};
use tcpdoctor_core::report::{CaptureSummary, Finding, FindingKind};

const REQUEST: &[u8] = b"PING\n";
/// Sequential exchanges: at 10 ms RTT, 39 saved round trips (390 ms) is far above
/// rtt_bound's 100 ms minimum saving, and 40 is far above its 10 exchanges.
const EXCHANGES: usize = 40;

/// An echo server: every chunk read is written back, on every connection.
async fn echo_server() -> std::net::SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            s.set_nodelay(true).unwrap();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                    }
                }
            });
        }
    });
    addr
}

/// `EXCHANGES` requests through `proxy`: one at a time, or all in one write.
async fn client(proxy: std::net::SocketAddr, pipelined: bool) {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.set_nodelay(true).unwrap();
    let mut got = vec![0u8; REQUEST.len() * EXCHANGES];
    if pipelined {
        s.write_all(&REQUEST.repeat(EXCHANGES)).await.unwrap();
        s.read_exact(&mut got).await.unwrap();
    } else {
        for i in 0..EXCHANGES {
            s.write_all(REQUEST).await.unwrap();
            let at = i * REQUEST.len();
            s.read_exact(&mut got[at..at + REQUEST.len()])
                .await
                .unwrap();
        }
    }
    assert_eq!(got, REQUEST.repeat(EXCHANGES), "echoed byte-exact");
    s.shutdown().await.unwrap();
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty());
}

/// One connection through a proxy with 5 ms each way, captured at `at`; the analysis.
async fn capture(
    dir: &Path,
    name: &str,
    at: CapturePoint,
    pipelined: bool,
) -> (CaptureSummary, Vec<Finding>) {
    let server = echo_server().await;
    let mut cfg = ProxyConfig::forward_to(Addr::Tcp(server));
    cfg.c2s.delay = Duration::from_millis(5);
    cfg.s2c.delay = Duration::from_millis(5);
    let pcap: PathBuf = dir.join(name);
    cfg.pcap = Some(pcap.clone());
    cfg.pcap_at = at;
    let proxy = Proxy::start(cfg).await;
    client(proxy.addr, pipelined).await;
    proxy.stop().await;
    crate::cli::analyze::analyze_file(&pcap, None).unwrap()
}

fn rtt_ms(summary: &CaptureSummary) -> f64 {
    let s = summary.servers.first().expect("one server");
    s.rtt_ms.expect("an RTT at the capture point")
}

fn named(found: &[Finding], kind: FindingKind) -> bool {
    found.iter().any(|f| f.kind == kind)
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tcpdoctor-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// At the client, 5 ms each way shows as a 10 ms RTT, and a client that waits for every
/// response is named round-trip bound; the same requests sent at once are not. The proxy's
/// own view of the same ping-pong shows no path RTT (the reason `pcap_at` exists).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_at_the_client_names_a_round_trip_bound_client() {
    let dir = scratch("pcap-at-client");
    let kinds = |f: &[Finding]| f.iter().map(|f| f.kind.as_str()).collect::<Vec<_>>();

    let (summary, found) = capture(&dir, "pingpong.pcap", CapturePoint::Client, false).await;
    let rtt = rtt_ms(&summary);
    assert!((9.0..=20.0).contains(&rtt), "rtt {rtt} ms");
    assert!(summary.exchanges >= EXCHANGES as u64 - 1, "{summary:?}");
    assert!(named(&found, FindingKind::RttBound), "{:?}", kinds(&found));

    let (summary, found) = capture(&dir, "pipelined.pcap", CapturePoint::Client, true).await;
    let rtt = rtt_ms(&summary);
    assert!((9.0..=20.0).contains(&rtt), "rtt {rtt} ms");
    assert!(!named(&found, FindingKind::RttBound), "{:?}", kinds(&found));

    let (summary, found) = capture(&dir, "middle.pcap", CapturePoint::Proxy, false).await;
    let rtt = summary.servers.first().and_then(|s| s.rtt_ms);
    assert!(rtt.is_none_or(|r| r < 1.0), "rtt {rtt:?} ms");
    assert!(!named(&found, FindingKind::RttBound), "{:?}", kinds(&found));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The mirror: at the server the handshake's last ACK and the client's ACKs come one round
/// trip after the server's packets, so the same 10 ms shows there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_at_the_server_shows_the_same_round_trip() {
    let dir = scratch("pcap-at-server");
    let (summary, found) = capture(&dir, "pingpong.pcap", CapturePoint::Server, false).await;
    let rtt = rtt_ms(&summary);
    assert!((9.0..=20.0).contains(&rtt), "rtt {rtt} ms");
    assert!(named(&found, FindingKind::RttBound));
    let _ = std::fs::remove_dir_all(&dir);
}
