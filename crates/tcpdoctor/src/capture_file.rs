//! Opening a capture file as it is, or through gzip when it starts with gzip's magic.
//!
//! Wireshark reads `.pcap.gz` and `.pcapng.gz` as if they were not compressed, and rotated
//! captures are often kept that way, so `analyze` does the same:
//! 1. The first two bytes decide, never the name: `1f 8b` is gzip (RFC 1952), anything else
//!    is handed to the capture reader as it is (which names what it found if that is not a
//!    capture either).
//! 2. Decompression streams through a fixed buffer, like the reader itself: nothing is
//!    unpacked to disk or memory. Concatenated gzip members (`cat a.gz b.gz`) are one stream.
//! 3. The capture reader sees decompressed bytes, so every byte offset it names counts
//!    decompressed bytes; callers say so in their messages ([`Input::is_gzip`]).
//! 4. A gzip stream that stops early (a `tcpdump -w - | gzip` killed, a download cut) is a
//!    capture cut short: the bytes decompressed so far are passed on and then the stream
//!    ends, so the reader reports the incomplete last record exactly as for a plain file.
//!    [`Input::gzip_cut_short`] tells that it happened even when the cut fell between records
//!    (only the 8-byte trailer missing, say).
//! 5. Corrupt compressed data (a bad deflate block, a checksum or length mismatch, garbage
//!    where the next member should start) stays a read error.

use std::fs::File;
use std::io::{self, BufReader, Chain, Cursor, ErrorKind, Read};

use flate2::bufread::MultiGzDecoder;

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Compressed bytes are read in chunks of this size.
const GZIP_READ_BUF: usize = 256 << 10;

/// The first bytes, already read to detect the format, followed by the rest of the file.
type Peeked<R> = Chain<Cursor<Vec<u8>>, R>;

/// A capture file's bytes, decompressed if need be.
pub struct Input<R = File> {
    inner: Inner<R>,
}

enum Inner<R> {
    Plain(Peeked<R>),
    Gzip {
        /// Boxed: the decoder and its header state dwarf the plain variant.
        decoder: Box<MultiGzDecoder<BufReader<Counting<Peeked<R>>>>>,
        cut_short: bool,
    },
}

/// Counts the bytes read through it: the compressed position, for progress.
struct Counting<R> {
    inner: R,
    read: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

impl<R: Read> Input<R> {
    /// Reads the first two bytes to tell gzip from anything else. Works on pipes: nothing is
    /// read twice or sought back.
    pub fn new(mut file: R) -> io::Result<Input<R>> {
        let mut head = [0u8; 2];
        let mut got = 0;
        while got < head.len() {
            match file.read(&mut head[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let rest = Cursor::new(head[..got].to_vec()).chain(file);
        let inner = if head[..got] == GZIP_MAGIC {
            let counted = Counting {
                inner: rest,
                read: 0,
            };
            Inner::Gzip {
                decoder: Box::new(MultiGzDecoder::new(BufReader::with_capacity(
                    GZIP_READ_BUF,
                    counted,
                ))),
                cut_short: false,
            }
        } else {
            Inner::Plain(rest)
        };
        Ok(Input { inner })
    }

    /// Whether the file is gzip-compressed (its byte offsets count decompressed bytes).
    pub fn is_gzip(&self) -> bool {
        matches!(self.inner, Inner::Gzip { .. })
    }

    /// Whether the gzip stream stopped before its end (always false for a plain file).
    pub fn gzip_cut_short(&self) -> bool {
        matches!(
            self.inner,
            Inner::Gzip {
                cut_short: true,
                ..
            }
        )
    }

    /// Bytes of the file consumed so far (compressed bytes for gzip), for progress; `None`
    /// for a plain file, whose reader knows its own position.
    pub fn compressed_read(&self) -> Option<u64> {
        match &self.inner {
            Inner::Plain(_) => None,
            Inner::Gzip { decoder, .. } => Some(decoder.get_ref().get_ref().read),
        }
    }
}

impl<R: Read> Read for Input<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &mut self.inner {
            Inner::Plain(r) => r.read(buf),
            Inner::Gzip { decoder, cut_short } => match decoder.read(buf) {
                // flate2 says UnexpectedEof when the compressed bytes end inside a member.
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => {
                    *cut_short = true;
                    Ok(0)
                }
                other => other,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use flate2::write::GzEncoder;
    use flate2::Compression;

    use super::*;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut enc = GzEncoder::new(Vec::new(), Compression::default());
        enc.write_all(data).expect("compress");
        enc.finish().expect("finish")
    }

    /// Everything `Input` yields, whether it said cut short, or the error.
    fn drain(bytes: &[u8]) -> (Vec<u8>, bool, Option<String>) {
        let mut input = Input::new(bytes).expect("open");
        let mut out = Vec::new();
        let mut buf = [0u8; 1000];
        loop {
            match input.read(&mut buf) {
                Ok(0) => return (out, input.gzip_cut_short(), None),
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) => return (out, input.gzip_cut_short(), Some(e.to_string())),
            }
        }
    }

    fn sample() -> Vec<u8> {
        // Compressible but not trivially: a few kilobytes of counting text.
        (0..3000u32)
            .flat_map(|i| i.to_string().into_bytes())
            .collect()
    }

    #[test]
    fn plain_bytes_pass_through_whatever_their_length() {
        let data = sample();
        for len in [0, 1, 2, 3, data.len()] {
            let (out, cut, err) = drain(&data[..len]);
            assert_eq!((out.as_slice(), cut, err), (&data[..len], false, None));
            assert!(!Input::new(&data[..len]).expect("open").is_gzip());
        }
        let (out, _, _) = drain(&[0x1f]);
        assert_eq!(out, [0x1f], "one byte of the magic is not gzip");
    }

    #[test]
    fn gzip_is_decompressed_and_members_concatenate() {
        let data = sample();
        let (a, b) = data.split_at(1234);
        assert!(Input::new(&gzip(a)[..]).expect("open").is_gzip());
        assert_eq!(drain(&gzip(&data)), (data.clone(), false, None));
        let two = [gzip(a), gzip(b)].concat();
        assert_eq!(drain(&two), (data, false, None));
    }

    #[test]
    fn a_gzip_stream_cut_anywhere_yields_a_prefix_and_says_cut_short() {
        let data = sample();
        let gz = gzip(&data);
        for cut in 2..gz.len() {
            let (out, cut_short, err) = drain(&gz[..cut]);
            assert_eq!(err, None, "cut at {cut}");
            assert!(cut_short, "cut at {cut}");
            assert!(data.starts_with(&out), "cut at {cut}");
        }
    }

    #[test]
    fn corrupt_gzip_is_an_error() {
        let data = sample();
        let mut gz = gzip(&data);
        let n = gz.len();
        gz[n - 8] ^= 0xff; // the CRC-32 of the data
        let (_, cut, err) = drain(&gz);
        assert!(!cut);
        assert!(err.is_some_and(|e| e.contains("checksum")));
        let mut gz = gzip(&data);
        gz[12] ^= 0x55; // inside the deflate data
        assert!(drain(&gz).2.is_some());
    }
}
