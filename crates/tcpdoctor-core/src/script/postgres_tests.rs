//! The shipped PostgreSQL script (`examples/postgres.toml`) against bytes a real server sends:
//! its SCRAM-SHA-256 proof checked with RFC 7677's example exchange, typed length-prefixed
//! requests (`send_type`), responses framed up to ReadyForQuery, a refused login quoted.

use std::sync::Arc;

use super::*;

const EXAMPLE: &str = include_str!("../../../../examples/postgres.toml");

/// A backend message: the type byte, a u32be length counting itself, the body.
fn msg(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![kind];
    m.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
    m.extend_from_slice(body);
    m
}

/// An Authentication message (R) with its code and data.
fn auth(code: u32, data: &[u8]) -> Vec<u8> {
    let mut body = code.to_be_bytes().to_vec();
    body.extend_from_slice(data);
    msg(b'R', &body)
}

/// The example, changed only where RFC 7677's exchange differs from what libpq sends: the user
/// name in the client-first-message (`n=user`), a fixed 20-character client nonce, the password.
fn rfc7677_script() -> Arc<Script> {
    let mut src = EXAMPLE.to_string();
    for (from, to) in [
        ("n,,n=,r={random(24)}", "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"),
        ("concat(\"n=,r=\"", "concat(\"n=user,r=\""),
        ("r=([^,]{24})", "r=([^,]{20})"),
        ("password = \"bench-secret\"", "password = \"pencil\""),
    ] {
        assert!(src.contains(from), "the example no longer has `{from}`");
        src = src.replace(from, to);
    }
    Arc::new(Script::parse(&src).expect("valid"))
}

#[test]
fn scram_sha_256_login_matches_rfc7677_then_queries_run() {
    let mut conv = Conversation::new(rfc7677_script(), 0, 1);

    let startup = conv.next_request(Timestamp(1)).expect("StartupMessage");
    let body = b"\x00\x03\x00\x00user\0bench\0database\0postgres\0\0";
    let mut want = (body.len() as u32 + 4).to_be_bytes().to_vec();
    want.extend_from_slice(body);
    assert_eq!(startup.bytes, want);
    let sasl = auth(10, b"SCRAM-SHA-256\0\0");
    let done = conv.on_bytes(&sasl, Timestamp(2)).expect("framed");
    assert_eq!(done[0].failed_assertion, None);

    let initial = conv
        .next_request(Timestamp(3))
        .expect("SASLInitialResponse");
    let mut body = b"SCRAM-SHA-256\0\x00\x00\x00\x20".to_vec();
    body.extend_from_slice(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
    assert_eq!(initial.bytes, msg(b'p', &body));
    assert_eq!(initial.header_len, Some(5), "type byte and length field");
    let server_first: &[u8] = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    let done = conv
        .on_bytes(&auth(11, server_first), Timestamp(4))
        .expect("framed");
    assert_eq!(done[0].failed_assertion, None);

    let last = conv.next_request(Timestamp(5)).expect("SASLResponse");
    let want: &[u8] = b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    assert_eq!(
        String::from_utf8_lossy(&last.bytes),
        String::from_utf8_lossy(&msg(b'p', want)),
        "RFC 7677's client-final-message"
    );
    // SASLFinal, AuthenticationOk, a ParameterStatus, BackendKeyData, ReadyForQuery: one
    // response, in pieces.
    let mut ok = auth(12, b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
    ok.extend(auth(0, b""));
    ok.extend(msg(b'S', b"server_version\x0015.8\0"));
    ok.extend(msg(b'K', b"\x00\x00\x30\x39\x12\x34\x56\x78"));
    ok.extend(msg(b'Z', b"I"));
    let (a, b) = ok.split_at(30);
    assert!(conv.on_bytes(a, Timestamp(6)).expect("framed").is_empty());
    let done = conv.on_bytes(b, Timestamp(7)).expect("framed");
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].failed_assertion, None);
    assert_eq!(done[0].response_bytes, ok.len());

    let q = conv.next_request(Timestamp(8)).expect("Query");
    assert_eq!(q.bytes, msg(b'Q', b"SELECT 1\0"));
    let mut rows = msg(
        b'T',
        b"\x00\x01?column?\0\x00\x00\x00\x00\x00\x00\x00\x00\x00\x17\x00\x04\xff\xff\xff\xff\x00\x00",
    );
    rows.extend(msg(b'D', b"\x00\x01\x00\x00\x00\x011"));
    rows.extend(msg(b'C', b"SELECT 1\0"));
    rows.extend(msg(b'Z', b"I"));
    let done = conv.on_bytes(&rows, Timestamp(9)).expect("framed");
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].failed_assertion, None);
    assert_eq!(done[0].response_bytes, rows.len());
}

#[test]
fn a_refused_login_quotes_the_servers_error_text() {
    let mut conv = Conversation::new(rfc7677_script(), 0, 1);
    conv.next_request(Timestamp(1)).expect("startup");
    conv.on_bytes(&auth(10, b"SCRAM-SHA-256\0\0"), Timestamp(2))
        .expect("framed");
    conv.next_request(Timestamp(3)).expect("initial");
    conv.on_bytes(
        &auth(
            11,
            b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
        ),
        Timestamp(4),
    )
    .expect("framed");
    conv.next_request(Timestamp(5)).expect("final");
    // PostgreSQL 15's answer to a wrong password: ErrorResponse, then it closes.
    let refusal = msg(
        b'E',
        b"SFATAL\0VFATAL\0C28P01\0Mpassword authentication failed for user \"bench\"\0\
Fauth.c\0L323\0Rauth_failed\0\0",
    );
    let done = conv.on_bytes(&refusal, Timestamp(6)).expect("framed");
    let failed = done[0].failed_assertion.as_deref().expect("refused");
    assert!(failed.starts_with("sasl-final: expected"), "{failed}");
    assert!(
        failed.contains(r#"password authentication failed for user \"bench\""#),
        "{failed}"
    );
}
