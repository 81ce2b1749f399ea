//! Throughput of the capture reader and TCP decoder on small packets.
//!
//!     cargo run --release -p tcpdoctor-core --example wire_throughput -- /tmp/big.pcap 1000
//!
//! Writes a pcap of about the given number of MB (default 500) of 66–120-byte TCP frames if
//! the file does not exist yet, then reads it from the file and from memory, counting TCP
//! segments, and prints MB/s for reading alone and for reading plus decoding.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::time::Instant;

use tcpdoctor_core::wire::{decode_tcp, CaptureReader, Decoded};

fn packet(i: u32) -> Vec<u8> {
    let payload = [0usize, 0, 8, 54][i as usize % 4];
    let mut p = vec![0u8; 12];
    p.extend([0x08, 0x00]);
    let total = (20 + 32 + payload) as u16;
    p.extend([
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0,
        0,
        0x40,
        0,
        64,
        6,
        0,
        0,
    ]);
    p.extend([127, 0, 0, 1, 127, 0, 0, 1]);
    p.extend(40000u16.to_be_bytes());
    p.extend(8080u16.to_be_bytes());
    p.extend(i.wrapping_mul(1000).to_be_bytes());
    p.extend(i.wrapping_mul(7).to_be_bytes());
    p.extend([0x80, 0x18, 0x02, 0x00, 0, 0, 0, 0]);
    p.extend([1, 1, 8, 10]);
    p.extend(i.to_be_bytes());
    p.extend(i.wrapping_sub(1).to_be_bytes());
    p.resize(p.len() + payload, b'x');
    p
}

fn generate(path: &str, mb: u64) -> std::io::Result<()> {
    let mut w = BufWriter::with_capacity(1 << 20, File::create(path)?);
    w.write_all(&[0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0])?;
    w.write_all(&[0; 8])?;
    w.write_all(&262_144u32.to_le_bytes())?;
    w.write_all(&1u32.to_le_bytes())?;
    let (mut written, mut i) = (24u64, 0u32);
    while written < mb << 20 {
        let p = packet(i);
        for x in [
            1_700_000_000 + i / 100_000,
            (i % 100_000) * 10,
            p.len() as u32,
            p.len() as u32,
        ] {
            w.write_all(&x.to_le_bytes())?;
        }
        w.write_all(&p)?;
        written += 16 + p.len() as u64;
        i = i.wrapping_add(1);
    }
    w.flush()
}

fn run<R: Read>(what: &str, r: R, bytes: u64, decode: bool) {
    let start = Instant::now();
    let mut r = CaptureReader::new(r).expect("capture");
    let (mut frames, mut tcp, mut payload) = (0u64, 0u64, 0u64);
    while let Some(f) = r.next_frame().expect("frame") {
        frames += 1;
        if decode {
            if let Decoded::Tcp(t, _) = decode_tcp(f.link, f.data, f.orig_len) {
                tcp += 1;
                payload += u64::from(t.payload_len);
            }
        } else {
            payload += f.data.len() as u64;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{what:<28} {frames} frames, {tcp} TCP, {payload} payload bytes: {:.2} s, {:.0} MB/s, {:.1} M frames/s",
        secs,
        bytes as f64 / secs / 1e6,
        frames as f64 / secs / 1e6
    );
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .map_or("/tmp/tcpdoctor-throughput.pcap", |s| s.as_str());
    let mb = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(500);
    if std::fs::metadata(path).is_err() {
        generate(path, mb)?;
    }
    let data = std::fs::read(path)?;
    let bytes = data.len() as u64;
    println!("{path}: {bytes} bytes");
    run("file, read only", File::open(path)?, bytes, false);
    run("file, read + decode_tcp", File::open(path)?, bytes, true);
    run("memory, read only", &data[..], bytes, false);
    run("memory, read + decode_tcp", &data[..], bytes, true);
    Ok(())
}
