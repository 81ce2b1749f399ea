//! The request/response workload of the capture tests, as a program to run inside
//! `tcpdoctor sandbox` (see `tests/common/exchange.rs`):
//!
//!   exchange serve ADDR [coalesce]   per-line server (Nagle on), or its coalesced twin
//!   exchange client ADDR N           N exchanges, then prints what it sent and received:
//!                                    `sent_bytes=.. received_bytes=.. segments=..`

#[allow(dead_code)]
#[path = "../tests/common/exchange.rs"]
mod exchange;

use std::net::TcpListener;

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
        _ => {
            eprintln!("usage: exchange serve ADDR [coalesce] | exchange client ADDR N");
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("exchange: {e}");
        std::process::exit(1);
    }
}
