//! Runs the capture reader over arbitrary bytes and decodes every frame.
//!
//! Each input is read twice: once as a slice with a buffer that holds all of it (what the
//! default 1 MiB buffer does for small files, without allocating 1 MiB per run), once through a
//! reader that hands out a few bytes per call into a tiny buffer (so every refill, compaction
//! and growth path runs). Both must see the same frames and the same error, and nothing may
//! panic. Seed with the repository's captures: `fuzz/seed-corpus.sh`.

#![no_main]

use std::io::Read;

use libfuzzer_sys::fuzz_target;
use tcpdoctor_core::wire::{decode_frame, decode_tcp, CaptureError, CaptureReader, Decoded};

/// A reader that returns at most `chunk` bytes per call.
struct Chunked<'a> {
    data: &'a [u8],
    chunk: usize,
}

impl Read for Chunked<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = self.chunk.min(out.len()).min(self.data.len());
        out[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

type Seen = (u64, u64, u32, u32, Vec<u8>, Decoded);

fn run<R: Read>(reader: Result<CaptureReader<R>, CaptureError>, len: usize) -> (Vec<Seen>, String) {
    let mut r = match reader {
        Ok(r) => r,
        Err(e) => return (Vec::new(), e.to_string()),
    };
    let mut seen = Vec::new();
    let err = loop {
        match r.next_frame() {
            Ok(Some(f)) => {
                assert!(f.offset < len as u64 && f.data.len() < len);
                let d = decode_tcp(f.link, f.data, f.orig_len);
                if let Some(t) = d.tcp() {
                    assert!(t.payload_len <= f.orig_len.max(f.data.len() as u32));
                }
                // Every packet of the frame (an A-MSDU's subframes): as bounded.
                for p in decode_frame(f.link, f.data, f.orig_len) {
                    if let Some(t) = p.tcp() {
                        assert!(t.payload_len <= f.orig_len.max(f.data.len() as u32));
                    }
                }
                seen.push((
                    f.number,
                    f.ts.as_nanos(),
                    f.orig_len,
                    f.interface,
                    f.data.to_vec(),
                    d,
                ));
            }
            Ok(None) => break String::new(),
            Err(e) => break e.to_string(),
        }
    };
    assert!(r.bytes_read() <= len as u64);
    (seen, err)
}

fuzz_target!(|data: &[u8]| {
    let whole = run(
        CaptureReader::with_buffer_size(data, data.len() + 64),
        data.len(),
    );
    let chunked = Chunked {
        data,
        chunk: 1 + data.len() % 13,
    };
    let tiny = run(
        CaptureReader::with_buffer_size(chunked, data.len() % 97),
        data.len(),
    );
    assert_eq!(whole, tiny);
    assert!(
        whole.1.is_empty() || whole.1.contains("at byte "),
        "{}",
        whole.1
    );
});
