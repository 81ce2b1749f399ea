//! Tiny load generator for `scripts/bench-proxy.sh`: ping-pong latency and bulk throughput,
//! plain blocking std::net with TCP_NODELAY, so what it measures is the path, not the tool.
//!
//!   netbench echo ADDR              echo server (one thread per connection)
//!   netbench sink ADDR              reads to EOF, then answers one byte
//!   netbench pingpong ADDR SIZE N [FILE]   N round trips of SIZE bytes; prints median and
//!                                   p99 in µs, and appends every sample to FILE if given
//!   netbench bulk ADDR BYTES        sends BYTES, waits for the sink's byte; prints GB/s and
//!                                   the CPU seconds (user + system) the sender used
//!
//! Servers print `ready` on stdout once listening.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    match arg(1) {
        "echo" => serve(arg(2), echo),
        "sink" => serve(arg(2), sink),
        "pingpong" => pingpong(arg(2), parse(arg(3)), parse(arg(4)), arg(5)),
        "bulk" => bulk(arg(2), parse(arg(3)) as u64),
        _ => {
            eprintln!("usage: netbench echo|sink ADDR | pingpong ADDR SIZE N | bulk ADDR BYTES");
            std::process::exit(2);
        }
    }
}

fn parse(s: &str) -> usize {
    s.parse().unwrap_or_else(|_| {
        eprintln!("netbench: `{s}` is not a number");
        std::process::exit(2)
    })
}

fn serve(addr: &str, f: fn(TcpStream) -> std::io::Result<()>) {
    let l = TcpListener::bind(addr).expect("bind");
    println!("ready");
    let _ = std::io::stdout().flush();
    for s in l.incoming().flatten() {
        std::thread::spawn(move || {
            let _ = s.set_nodelay(true);
            let _ = f(s);
        });
    }
}

fn echo(mut s: TcpStream) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        s.write_all(&buf[..n])?;
    }
}

fn sink(mut s: TcpStream) -> std::io::Result<()> {
    let mut buf = vec![0u8; 256 * 1024];
    while s.read(&mut buf)? > 0 {}
    s.write_all(b"k")
}

fn pingpong(addr: &str, size: usize, n: usize, samples: &str) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_nodelay(true).expect("nodelay");
    let msg = vec![b'x'; size];
    let mut back = vec![0u8; size];
    let mut lat = Vec::with_capacity(n);
    for i in 0..n + n / 10 {
        let t = Instant::now();
        s.write_all(&msg).expect("write");
        s.read_exact(&mut back).expect("read");
        if i >= n / 10 {
            // the first 10% warm up caches and the connection
            lat.push(t.elapsed().as_nanos() as f64 / 1e3);
        }
    }
    if !samples.is_empty() {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(samples)
            .expect("samples file");
        let text: String = lat.iter().map(|v| format!("{v:.1}\n")).collect();
        f.write_all(text.as_bytes()).expect("write samples");
    }
    lat.sort_by(f64::total_cmp);
    let q = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];
    println!("{:.1} {:.1}", q(0.5), q(0.99));
}

fn bulk(addr: &str, bytes: u64) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_nodelay(true).expect("nodelay");
    let block = vec![0x5au8; 256 * 1024];
    let t = Instant::now();
    let mut left = bytes;
    while left > 0 {
        let n = left.min(block.len() as u64) as usize;
        s.write_all(&block[..n]).expect("write");
        left -= n as u64;
    }
    s.shutdown(std::net::Shutdown::Write).expect("shutdown");
    let mut k = [0u8; 1];
    s.read_exact(&mut k).expect("sink's answer");
    let gbps = bytes as f64 / t.elapsed().as_secs_f64() / 1e9;
    println!("{gbps:.3} {:.3}", cpu_seconds());
}

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the zeroed struct we own.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}
