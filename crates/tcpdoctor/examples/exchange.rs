//! The request/response workload of the capture tests, as a program to run inside
//! `tcpdoctor sandbox` (see `tests/common/exchange.rs`):
//!
//!   exchange serve ADDR [coalesce]   per-line server (Nagle on), or its coalesced twin
//!   exchange client ADDR N           N exchanges, then prints what it sent and received:
//!                                    `sent_bytes=.. received_bytes=.. segments=..`
//!   exchange sink ADDR               reads and discards every connection (for the flood);
//!                                    prints `ready` once listening
//!   exchange flood ADDR SECONDS SIZE writes SIZE-byte chunks with TCP_NODELAY for SECONDS:
//!                                    one segment per write, a packet-rate load for
//!                                    `scripts/bench-capture.sh`; prints `writes=..`

#[allow(dead_code)]
#[path = "../tests/common/exchange.rs"]
mod exchange;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    let result = match arg(1) {
        "serve" => {
            TcpListener::bind(arg(2)).and_then(|l| exchange::serve_forever(l, arg(3) == "coalesce"))
        }
        "client" => {
            let n: usize = arg(3).parse().unwrap_or(0);
            exchange::connect(arg(2))
                .and_then(|c| exchange::client(c, n))
                .map(|(sent, received)| {
                    println!(
                        "sent_bytes={} received_bytes={received} segments={}",
                        sent.bytes, sent.segments
                    );
                })
        }
        "sink" => TcpListener::bind(arg(2)).and_then(sink),
        "flood" => {
            let secs: f64 = arg(3).parse().unwrap_or(0.0);
            let size: usize = arg(4).parse().unwrap_or(1);
            exchange::connect(arg(2)).and_then(|c| flood(c, Duration::from_secs_f64(secs), size))
        }
        _ => {
            eprintln!(
                "usage: exchange serve ADDR [coalesce] | client ADDR N | sink ADDR | \
                 flood ADDR SECONDS SIZE"
            );
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("exchange: {e}");
        std::process::exit(1);
    }
}

fn sink(listener: TcpListener) -> std::io::Result<()> {
    println!("ready");
    std::io::stdout().flush()?;
    for conn in listener.incoming() {
        let mut conn = conn?;
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 16];
            while matches!(conn.read(&mut buf), Ok(n) if n > 0) {}
        });
    }
    Ok(())
}

fn flood(mut conn: std::net::TcpStream, length: Duration, size: usize) -> std::io::Result<()> {
    conn.set_nodelay(true)?;
    let buf = vec![b'x'; size.max(1)];
    let start = Instant::now();
    let mut writes = 0u64;
    while start.elapsed() < length {
        for _ in 0..256 {
            conn.write_all(&buf)?;
        }
        writes += 256;
    }
    println!("writes={writes}");
    Ok(())
}
