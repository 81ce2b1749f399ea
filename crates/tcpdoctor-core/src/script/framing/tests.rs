//! Every framing on good and bad bytes, fed whole, split at every offset, and byte by byte.

use std::time::Duration;

use regex::bytes::Regex;

use super::*;
use crate::impair::SplitMix64;

fn re(s: &str) -> Regex {
    Regex::new(s).unwrap()
}

fn until(t: &str) -> Framing {
    Framing::Until {
        terminator: t.as_bytes().to_vec(),
        single_line_if: None,
    }
}

fn zino() -> Framing {
    Framing::UntilLine {
        pattern: re(r"^\.\r?$"),
        single_line_if: Some(re(r"^5\d\d ")),
    }
}

fn prefix(name: &str, counts_itself: bool) -> Framing {
    Framing::LengthPrefix(LengthPrefix::from_name(name, counts_itself).unwrap())
}

/// PostgreSQL's backend messages: a type byte, a u32be length that counts itself, a body.
fn postgres(until_type: &str) -> Framing {
    Framing::Typed(TypedMessages {
        prefix: LengthPrefix::from_name("u32be", true).unwrap(),
        until_type: until_type.as_bytes().to_vec(),
    })
}

/// `SELECT 1` answered by a real PostgreSQL 15: RowDescription, DataRow, CommandComplete,
/// ReadyForQuery (idle).
const SELECT_1: &[u8] = b"T\x00\x00\x00\x21\x00\x01?column?\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x17\x00\x04\xff\xff\xff\xff\x00\x00\
D\x00\x00\x00\x0b\x00\x01\x00\x00\x00\x011\
C\x00\x00\x00\x0dSELECT 1\x00\
Z\x00\x00\x00\x05I";

/// Feeds `pieces` one after another into a fresh reader; the first non-Need result, with the
/// number of pieces it took.
fn feed(framing: &Framing, request: &[u8], pieces: &[&[u8]], max: usize) -> Result<Poll, String> {
    let mut reader = framing.reader(request);
    let mut buf = Vec::new();
    let mut last = Poll::Need;
    for piece in pieces {
        buf.extend_from_slice(piece);
        last = reader.poll(framing, &buf, max)?;
        if let Poll::Complete(_) = last {
            return Ok(last);
        }
    }
    Ok(last)
}

/// The same answer whole, split at every offset, and one byte at a time.
fn every_split(
    framing: &Framing,
    request: &[u8],
    bytes: &[u8],
    max: usize,
) -> Result<Poll, String> {
    let whole = feed(framing, request, &[bytes], max);
    for at in 0..=bytes.len() {
        let split = feed(framing, request, &[&bytes[..at], &bytes[at..]], max);
        assert_eq!(
            split,
            whole,
            "split at {at} of {:?}",
            String::from_utf8_lossy(bytes)
        );
    }
    let singles: Vec<&[u8]> = bytes.chunks(1).collect();
    assert_eq!(feed(framing, request, &singles, max), whole, "byte by byte");
    whole
}

const MAX: usize = 4096;

/// (framing, request, response bytes, Ok(length of the first response) / Err(substring)).
type Case = (
    Framing,
    &'static str,
    &'static [u8],
    Result<Option<usize>, &'static str>,
);

fn cases() -> Vec<Case> {
    let chunked: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\nNEXT";
    vec![
        (until("\r\n"), "", b"+OK\r\nnext", Ok(Some(5))),
        (
            until("\r\n.\r\n"),
            "",
            b"200 list\r\n1\r\n2\r\n.\r\n",
            Ok(Some(19)),
        ),
        (until("\r\n.\r\n"), "", b"200 list\r\n1\r\n2\r\n", Ok(None)),
        (
            zino(),
            "",
            b"304 list follows\r\n1\r\n22\r\n.\r\n",
            Ok(Some(28)),
        ),
        (zino(), "", b"304 list follows\n1\n.\nNEXT", Ok(Some(21))),
        (
            zino(),
            "",
            b"500 event \"9\" does not exist\r\n",
            Ok(Some(30)),
        ),
        (zino(), "", b"303 attrs follow\r\nid: 1\r\n..\r\n", Ok(None)),
        (
            Framing::Until {
                terminator: b"\r\n.\r\n".to_vec(),
                single_line_if: Some(re("^5")),
            },
            "",
            b"500 no\r\nrest",
            Ok(Some(8)),
        ),
        (Framing::Length(4), "", b"abcdef", Ok(Some(4))),
        (Framing::Length(4), "", b"abc", Ok(None)),
        (
            Framing::Length(MAX + 1),
            "",
            b"abc",
            Err("exceeds max_response"),
        ),
        (prefix("u8", false), "", b"\x03abcX", Ok(Some(4))),
        (prefix("u16be", false), "", b"\x00\x02hi", Ok(Some(4))),
        (prefix("u16le", false), "", b"\x02\x00hi", Ok(Some(4))),
        (
            prefix("u32be", false),
            "",
            b"\x00\x00\x00\x01!",
            Ok(Some(5)),
        ),
        (prefix("u32le", true), "", b"\x05\x00\x00\x00!", Ok(Some(5))),
        (prefix("u32be", false), "", b"\x00\x00\x00\x00", Ok(Some(4))),
        (
            prefix("u32le", true),
            "",
            b"\x03\x00\x00\x00",
            Err("smaller than the 4-byte field"),
        ),
        (
            prefix("u32be", false),
            "",
            b"\xff\xff\xff\xff",
            Err("exceeds max_response"),
        ),
        (prefix("u16be", false), "", b"\x00", Ok(None)),
        (Framing::Resp, "", b"+OK\r\n", Ok(Some(5))),
        (Framing::Resp, "", b"-ERR unknown\r\n", Ok(Some(14))),
        (Framing::Resp, "", b":-42\r\n", Ok(Some(6))),
        (Framing::Resp, "", b"$5\r\nhello\r\n+NEXT\r\n", Ok(Some(11))),
        (Framing::Resp, "", b"$0\r\n\r\n", Ok(Some(6))),
        (Framing::Resp, "", b"$-1\r\n", Ok(Some(5))),
        (Framing::Resp, "", b"*-1\r\n", Ok(Some(5))),
        (Framing::Resp, "", b"*0\r\n", Ok(Some(4))),
        (
            Framing::Resp,
            "",
            b"*2\r\n$1\r\na\r\n*2\r\n:1\r\n$-1\r\n",
            Ok(Some(24)),
        ),
        (Framing::Resp, "", b"*2\r\n*1\r\n+x\r\n", Ok(None)),
        (Framing::Resp, "", b"%1\r\n+k\r\n#t\r\n", Ok(Some(12))),
        (
            Framing::Resp,
            "",
            b"|1\r\n+ttl\r\n:3\r\n$2\r\nhi\r\n",
            Ok(Some(22)),
        ),
        (Framing::Resp, "", b"~2\r\n_\r\n,3.14\r\n", Ok(Some(14))),
        (
            Framing::Resp,
            "",
            b">1\r\n(123456789012345678901234567890\r\n",
            Ok(Some(37)),
        ),
        (
            Framing::Resp,
            "",
            b"=7\r\ntxt:abc\r\n!3\r\nerr\r\n",
            Ok(Some(13)),
        ),
        (Framing::Resp, "", b"?what\r\n", Err("is not a RESP type")),
        (
            Framing::Resp,
            "",
            b"$3\r\nabcd\r\n",
            Err("not followed by \\r\\n"),
        ),
        (Framing::Resp, "", b"$x\r\n", Err("bad length")),
        (Framing::Resp, "", b"*-2\r\n", Err("bad count")),
        (Framing::Resp, "", b":12a\r\n", Err("bad integer")),
        (Framing::Resp, "", b"#x\r\n", Err("bad boolean")),
        (Framing::Resp, "", b"+OK\n", Err("bare `\\n`")),
        (
            Framing::Resp,
            "",
            b"$99999\r\n",
            Err("exceeds max_response"),
        ),
        (
            Framing::Http,
            "GET / HTTP/1.1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP",
            Ok(Some(43)),
        ),
        (
            Framing::Http,
            "GET / HTTP/1.1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ncontent-length:0\r\n\r\n",
            Ok(Some(37)),
        ),
        (
            Framing::Http,
            "GET / HTTP/1.1\r\n\r\n",
            chunked,
            Ok(Some(chunked.len() - 4)),
        ),
        (
            Framing::Http,
            "GET / HTTP/1.1\r\n\r\n",
            b"HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n",
            Ok(Some(46)),
        ),
        (
            Framing::Http,
            "GET / HTTP/1.1\r\n\r\n",
            b"HTTP/1.1 304 Not Modified\r\n\r\n",
            Ok(Some(29)),
        ),
        (
            Framing::Http,
            "HEAD / HTTP/1.1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n",
            Ok(Some(39)),
        ),
        (
            Framing::Http,
            "GET / HTTP/1.1\r\n\r\n",
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx",
            Ok(Some(64)),
        ),
        (
            Framing::Http,
            "GET / HTTP/1.1\r\n\r\n",
            b"HTTP/1.0 200 OK\nContent-Length: 2\n\nhi",
            Ok(Some(37)),
        ),
        (
            Framing::Http,
            "GET / HTTP/1.1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel",
            Ok(None),
        ),
        (
            Framing::Http,
            "GET / HTTP/1.1\r\n\r\n",
            b"SSH-2.0-OpenSSH\r\n",
            Err("not an HTTP/1.x status line"),
        ),
        (
            Framing::Http,
            "GET / HTTP/1.1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            Err("bad Content-Length"),
        ),
        (
            Framing::Http,
            "GET / HTTP/1.1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            Err("two different"),
        ),
        (
            Framing::Http,
            "GET / HTTP/1.1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            Err("bad chunk size"),
        ),
        (
            Framing::Http,
            "GET / HTTP/1.1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc",
            Err("not followed by"),
        ),
        (postgres("Z"), "", SELECT_1, Ok(Some(SELECT_1.len()))),
        (postgres("Z"), "", &SELECT_1[..SELECT_1.len() - 1], Ok(None)),
        // A response ends at its first Z: the next one's bytes are not taken.
        (
            postgres("Z"),
            "",
            b"Z\x00\x00\x00\x05IZ\x00\x00\x00\x05I",
            Ok(Some(6)),
        ),
        // Without until_type, one message: AuthenticationSASLContinue alone.
        (
            postgres(""),
            "",
            b"R\x00\x00\x00\x0c\x00\x00\x00\x0br=abS\x00",
            Ok(Some(13)),
        ),
        // A refused login ends with E (ErrorResponse) and no Z.
        (
            postgres("ZE"),
            "",
            b"R\x00\x00\x00\x08\x00\x00\x00\x00E\x00\x00\x00\x09SFATAL",
            Ok(Some(19)),
        ),
        (
            postgres("Z"),
            "",
            b"N\x00\x00\x00\x03",
            Err("message `N` at byte 0: u32be length 3 is smaller"),
        ),
        (
            postgres("Z"),
            "",
            b"Z\x00\x00\x00\x05ID\x00\x01\x00\x00",
            Ok(Some(6)),
        ),
        (
            postgres("Z"),
            "",
            b"C\x00\x00\x00\x05xD\x00\x00\x10\x00",
            Err("exceeds max_response"),
        ),
        (
            Framing::Http,
            "GET / HTTP/1.1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nbroken\r\n\r\n",
            Err("without `:`"),
        ),
        (
            Framing::Http,
            "GET / HTTP/1.1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 99999\r\n\r\n",
            Err("exceeds max_response"),
        ),
    ]
}

#[test]
fn every_framing_at_every_split_point() {
    let mut wrong = Vec::new();
    for (i, (framing, request, bytes, want)) in cases().into_iter().enumerate() {
        let got = every_split(&framing, request.as_bytes(), bytes, MAX);
        let ok = match (&got, want) {
            (Ok(Poll::Complete(n)), Ok(Some(m))) => *n == m,
            (Ok(Poll::Need), Ok(None)) => true,
            (Err(e), Err(needle)) => e.contains(needle),
            _ => false,
        };
        if !ok {
            wrong.push(format!(
                "case {i} ({}): got {got:?}, want {want:?}",
                framing.kind()
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn http_without_length_waits_for_close() {
    let got = every_split(
        &Framing::Http,
        b"GET /",
        b"HTTP/1.1 200 OK\r\n\r\nbody",
        MAX,
    );
    assert_eq!(got, Ok(Poll::UntilClose));
}

#[test]
fn unterminated_input_is_bounded() {
    let framings = [
        until("\r\n"),
        zino(),
        Framing::Resp,
        Framing::Http,
        postgres("Z"),
        Framing::Idle(Duration::from_millis(5)),
        Framing::Close,
    ];
    let endless = [b'+']
        .iter()
        .chain([b'a'; 300].iter())
        .copied()
        .collect::<Vec<_>>();
    for framing in framings {
        let mut reader = framing.reader(b"");
        let mut buf = Vec::new();
        let mut result = Ok(Poll::Need);
        for chunk in endless.chunks(7) {
            buf.extend_from_slice(chunk);
            result = reader.poll(&framing, &buf, 100);
            if result.is_err() {
                break;
            }
        }
        let e = result.unwrap_err();
        assert!(
            e.contains("exceeds max_response (100 bytes)"),
            "{}: {e}",
            framing.kind()
        );
        assert!(
            buf.len() <= 107,
            "{}: buffered {}",
            framing.kind(),
            buf.len()
        );
    }
}

#[test]
fn deep_resp_nesting_is_an_error() {
    let deep = b"*1\r\n".repeat(200);
    let e = feed(&Framing::Resp, b"", &[&deep], 1 << 20).unwrap_err();
    assert!(e.contains("nested deeper than 128"), "{e}");
}

#[test]
fn no_framing_panics_on_random_or_mutated_bytes() {
    let framings = [
        until("\r\n.\r\n"),
        zino(),
        Framing::Length(10),
        prefix("u16le", true),
        prefix("u8", false),
        postgres("Z"),
        postgres(""),
        Framing::Resp,
        Framing::Http,
    ];
    let seeds: Vec<Vec<u8>> = cases().into_iter().map(|c| c.2.to_vec()).collect();
    let mut rng = SplitMix64::new(4);
    for round in 0..3000 {
        let mut bytes = seeds[round % seeds.len()].clone();
        for _ in 0..(rng.next_u64() % 4) {
            if bytes.is_empty() {
                break;
            }
            let at = (rng.next_u64() as usize) % bytes.len();
            const ALPHABET: &[u8] = b"\r\n0123456789$*+-:%|~>#_,(=!HTTP/1. xf";
            bytes[at] = ALPHABET[rng.next_u64() as usize % ALPHABET.len()];
        }
        if round % 5 == 0 {
            bytes = (0..rng.next_u64() % 64)
                .map(|_| rng.next_u64() as u8)
                .collect();
        }
        for framing in &framings {
            let cut = if bytes.is_empty() {
                0
            } else {
                rng.next_u64() as usize % bytes.len()
            };
            let _ = feed(framing, b"HEAD", &[&bytes[..cut], &bytes[cut..]], 512);
        }
    }
}
