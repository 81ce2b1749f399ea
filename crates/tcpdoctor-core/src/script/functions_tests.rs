//! Template functions against published test vectors, and computed values in conversations
//! (the Zino 2 login, pipelining around a capture used inside a function, failures, inputs).

use std::sync::Arc;

use super::expr::Scope;
use super::functions::{Sources, WallClock};
use super::template::Template;
use super::*;
use crate::impair::SplitMix64;

fn no_env(_: &str) -> Option<String> {
    None
}

/// Renders the text template `text` with `x` = `X`, `y` = `Y` (connection 3, iteration 7);
/// Err: the parse error or the first failed computation.
fn render_with(text: &str, unix_time: Option<u64>, seed: u64) -> Result<Vec<u8>, String> {
    let t = Template::parse_text(text, &no_env).map_err(|e| e.message)?;
    let lookup = |name: &str| match name {
        "x" => Some(&b"X"[..]),
        "y" => Some(&b"Y"[..]),
        "bin" => Some(&b"\x00\xff\x10"[..]),
        _ => None,
    };
    let mut rng = SplitMix64::new(seed);
    let mut scope = Scope {
        lookup: &lookup,
        conn: 3,
        iteration: 7,
        sources: Sources {
            rng: &mut rng,
            clock: unix_time.map(WallClock::fixed),
        },
    };
    let mut out = Vec::new();
    let mut failed = None;
    t.render(&mut scope, &mut out, &mut failed);
    match failed {
        Some(m) => Err(m),
        None => Ok(out),
    }
}

fn render(text: &str) -> String {
    let out = render_with(text, Some(1_700_000_000), 1).unwrap_or_else(|e| panic!("{text}: {e}"));
    String::from_utf8(out).expect("text")
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn every_function_is_in_the_table() {
    use super::functions::Func;
    let all: Vec<Func> = Func::all().collect();
    // One row per variant of `Func` (24), each found by its own name.
    assert_eq!(all.len(), 24);
    for f in all {
        assert_eq!(Func::from_name(f.name()), Some(f));
    }
}

#[test]
fn sha1_rfc3174() {
    assert_eq!(
        render(r#"{hex(sha1("abc"))}"#),
        "a9993e364706816aba3e25717850c26c9cd0d89d"
    );
    assert_eq!(
        render(r#"{hex(sha1("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"))}"#),
        "84983e441c3bd26ebaae4aa1f95129e5e54670f1"
    );
}

#[test]
fn sha256_fips180_2() {
    assert_eq!(
        render(r#"{hex(sha256("abc"))}"#),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(
        render(r#"{hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"))}"#),
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
    );
}

#[test]
fn md5_rfc1321() {
    for (input, want) in [
        ("", "d41d8cd98f00b204e9800998ecf8427e"),
        ("a", "0cc175b9c0f1b6a831c399e269772661"),
        ("abc", "900150983cd24fb0d6963f7d28e17f72"),
        ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
    ] {
        assert_eq!(
            render(&format!("{{hex(md5(\"{input}\"))}}")),
            want,
            "{input}"
        );
    }
}

#[test]
fn hmac_sha256_rfc4231() {
    // Test case 1: key = 0x0b * 20, "Hi There".
    assert_eq!(
        render(
            r#"{hex(hmac_sha256(unhex("0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b"), "Hi There"))}"#
        ),
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
    );
    // Test case 2: a key shorter than the output.
    assert_eq!(
        render(r#"{hex(hmac_sha256("Jefe", "what do ya want for nothing?"))}"#),
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
    // Test case 3: key = 0xaa * 20, data = 0xdd * 50 (bytes, not text).
    let key = "aa".repeat(20);
    let data = "dd".repeat(50);
    assert_eq!(
        render(&format!(
            r#"{{hex(hmac_sha256(unhex("{key}"), unhex("{data}")))}}"#
        )),
        "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"
    );
    // Test case 6: a key larger than the block (hashed first).
    let key = "aa".repeat(131);
    assert_eq!(
        render(&format!(
            r#"{{hex(hmac_sha256(unhex("{key}"), "Test Using Larger Than Block-Size Key - Hash Key First"))}}"#
        )),
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
    );
}

#[test]
fn base64_rfc4648_section_10() {
    for (plain, encoded) in [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ] {
        assert_eq!(render(&format!("{{base64(\"{plain}\")}}")), encoded);
        assert_eq!(render(&format!("{{unbase64(\"{encoded}\")}}")), plain);
    }
    // Bytes survive the round trip.
    assert_eq!(render("{hex(unbase64(base64(bin)))}"), "00ff10");
}

#[test]
fn pbkdf2_sha256_rfc7914_and_rfc6070_style() {
    // RFC 7914 section 11.
    assert_eq!(
        render(r#"{hex(pbkdf2_sha256("passwd", "salt", 1, 64))}"#),
        "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc\
         49ca9cccf179b645991664b39d77ef317c71b845b1e30bd509112041d3a19783"
    );
    assert_eq!(
        render(r#"{hex(pbkdf2_sha256("Password", "NaCl", 80000, 64))}"#),
        "4ddcd8f60b98be21830cee5ef22701f9641a4418d04c0414aeff08876b34ab56\
         a1d425a1225833549adb841b51c9b3176a272bdebba1d078478f62b397f33c8d"
    );
    // The RFC 6070 inputs with HMAC-SHA-256 (as SCRAM-SHA-256 uses it).
    for (iterations, want) in [
        (
            1,
            "120fb6cffcf8b32c43e7225256c4f837a86548c92ccc35480805987cb70be17b",
        ),
        (
            2,
            "ae4d0c95af6b46d32d0adff928f06dd02a303f8ef3c251dfd6e2d85a95474c43",
        ),
        (
            4096,
            "c5e478d59288c841aa530db6845c4c8d962893a001ce4e11a4963873aa98134a",
        ),
    ] {
        assert_eq!(
            render(&format!(
                r#"{{hex(pbkdf2_sha256("password", "salt", {iterations}, 32))}}"#
            )),
            want
        );
    }
}

#[test]
fn text_and_byte_functions() {
    let cases: &[(&str, &str)] = &[
        ("{concat(x, ' ', y)}", "X Y"),
        ("{concat(x)}", "X"),
        ("{len(concat(x, y, 'abc'))}", "5"),
        ("{len('')}", "0"),
        ("{upper('abc-é')}", "ABC-é"),
        ("{lower('ABC')}{x}", "abcX"),
        ("{hex(xor(unhex('0f0f'), unhex('ff00')))}", "f00f"),
        ("{hex(unhex('DE ad'))}", "dead"),
        (
            "{hex(u8(255))}{hex(u16be(258))}{hex(u16le(258))}",
            "ff01020201",
        ),
        ("{hex(u32be(len(x)))}{hex(u32le(1))}", "0000000101000000"),
        (
            "{hex(u64be(1))}/{hex(u64le(1))}",
            "0000000000000001/0100000000000000",
        ),
        ("{hex(u16be(len(concat(x, y))))}", "0002"),
        ("{concat(conn, '-', i)}", "3-7"),
        (
            "{ hex( sha1( 'abc' ) ) }",
            "a9993e364706816aba3e25717850c26c9cd0d89d",
        ),
        (r#"{concat("a\"b", 'c\'d', "\x41\r\n")}"#, "a\"bc'dA\r\n"),
        ("{concat('}', '{')}", "}{"),
        ("{now_unix()}", "1700000000"),
        ("{len(random(12))}", "12"),
    ];
    for (text, want) in cases {
        assert_eq!(render(text), *want, "{text}");
    }
}

#[test]
fn uuid_and_random_come_from_the_seeded_generator() {
    let a = render_with("{uuid()} {random(16)}", None, 5).expect("renders");
    let text = String::from_utf8(a.clone()).expect("text");
    let (uuid, random) = text.split_once(' ').expect("two parts");
    let groups: Vec<usize> = uuid.split('-').map(str::len).collect();
    assert_eq!(groups, [8, 4, 4, 4, 12], "{uuid}");
    assert_eq!(&uuid[14..15], "4", "version 4: {uuid}");
    assert!(
        matches!(&uuid[19..20], "8" | "9" | "a" | "b"),
        "variant: {uuid}"
    );
    assert!(random.bytes().all(|b| b.is_ascii_alphanumeric()));
    assert_eq!(
        a,
        render_with("{uuid()} {random(16)}", None, 5).expect("renders")
    );
    assert_ne!(
        a,
        render_with("{uuid()} {random(16)}", None, 6).expect("renders")
    );
}

#[test]
fn constant_calls_are_computed_at_load() {
    let t = Template::parse_text(r#"AUTH {hex(sha1("abc"))}\r\n"#, &no_env).expect("parses");
    assert!(t.is_fixed(), "{t:?}");
    let t = Template::parse_text("AUTH {hex(sha1(x))}", &no_env).expect("parses");
    assert!(!t.is_fixed());
    assert_eq!(t.vars().collect::<Vec<_>>(), ["x"]);
    // Impure functions are never folded.
    for text in ["{uuid()}", "{now_unix()}", "{random(4)}"] {
        assert!(
            !Template::parse_text(text, &no_env).expect(text).is_fixed(),
            "{text}"
        );
    }
}

#[test]
fn computations_that_fail_at_a_request_say_why_without_the_value() {
    let cases: &[(&str, &str)] = &[
        ("{unhex(x)}", "unhex: odd number of hex digits"),
        ("{unhex(concat(x, x))}", "unhex: digit pair 1 is not hex"),
        ("{unbase64(concat(x, '*'))}", "unbase64: not base64"),
        (
            "{xor(x, 'ab')}",
            "xor: the two values differ in length (1 and 2 bytes)",
        ),
        ("{u8(len(random(300)))}", "u8: 300 is larger than 255"),
        ("{u16be(x)}", "u16be: expected a decimal integer"),
        ("{pbkdf2_sha256(x, y, 0, 32)}", "iterations must be 1 to"),
    ];
    for (text, needle) in cases {
        let e = render_with(text, None, 1).expect_err(text);
        assert!(e.contains(needle), "{text}: {e}");
        assert!(!e.contains('X'), "{text}: the value shows in `{e}`");
    }
    let e = render_with("{now_unix()}", None, 1).expect_err("no clock");
    assert!(e.contains("no wall clock"), "{e}");
}

#[test]
fn bad_expressions_name_the_offset() {
    let cases: &[(&str, usize, &str)] = &[
        ("A {sha3(x)}", 3, "unknown function `sha3`"),
        (
            "A {hex(sha1())}",
            7,
            "`sha1` takes 1 argument (sha1(data)), not 0",
        ),
        (
            "{hmac_sha256(x)}",
            1,
            "takes 2 arguments (hmac_sha256(key, message)), not 1",
        ),
        ("{uuid(x)}", 1, "takes no arguments"),
        ("{concat()}", 1, "at least 1"),
        ("{hex(x}", 6, "expected `,` or `)`"),
        ("{hex(x) y}", 8, "expected `}`"),
        ("{hex('abc)}", 5, "without its closing quote"),
        ("{hex(1x)}", 5, "not a number or a name"),
        ("{hex(random)}", 5, "write random(N)"),
        ("{hex(,)}", 5, "unexpected `,`"),
        ("{hex(unhex('zz'))}", 5, "unhex: digit pair 1 is not hex"),
        ("{hex(u8(256))}", 5, "u8: 256 is larger than 255"),
        ("{env:}", 5, "needs a variable name"),
        ("{env:NOPE}", 5, "`NOPE` is not set"),
    ];
    for (text, offset, needle) in cases {
        let e = Template::parse_text(text, &no_env).expect_err(text);
        assert!(e.message.contains(needle), "{text}: {}", e.message);
        assert_eq!(e.offset, *offset, "{text}: {}", e.message);
    }
    let deep = format!("{{{}x{}}}", "hex(".repeat(40), ")".repeat(40));
    let e = Template::parse_text(&deep, &no_env).expect_err("too deep");
    assert!(e.message.contains("nest deeper"), "{}", e.message);
    // Each hex doubles: 30 of them over 1 byte would be a 1GiB value, made when loading.
    let huge = format!("{{{}'x'{}}}", "hex(".repeat(30), ")".repeat(30));
    let e = Template::parse_text(&huge, &no_env).expect_err("too large");
    assert!(e.message.contains("64MiB"), "{}", e.message);
}

const ZINO_LOGIN: &str = r#"
[vars]
user = "bench"
secret = "bench-secret"

[greeting]
read = { until = "\r\n" }
capture = { challenge = '^200 (\S+) ' }

[[setup]]
send = 'USER {user} {hex(sha1(concat(challenge, " ", secret)))}\r\n'
read = { until = "\r\n" }
expect = '^200 '

[[steps]]
send = "CASEIDS\r\n"
read = { until = "\r\n" }
"#;

#[test]
fn zino_login_answers_the_challenge() {
    let script = Arc::new(Script::parse(ZINO_LOGIN).expect("valid"));
    let mut conv = Conversation::new(script, 0, 1);
    assert!(
        conv.next_request(Timestamp(1)).is_none(),
        "the greeting comes first"
    );
    let greeting = b"200 a8d7f0a9b8c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5 Hello, there\r\n";
    let done = conv.on_bytes(greeting, Timestamp(2)).expect("a greeting");
    assert_eq!(done.len(), 1);
    let login = conv.next_request(Timestamp(3)).expect("the login");
    // sha1_hex("a8d7f0a9b8c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5 bench-secret"), from Python's hashlib.
    assert_eq!(
        String::from_utf8(login.bytes).expect("text"),
        "USER bench 52e85eafa4aef217bec1584405a4d19c270cd446\r\n"
    );
}

#[test]
fn a_capture_used_only_inside_a_function_holds_the_request_back() {
    let src = r#"
[[setup]]
send = "HELLO\r\n"
read = { until = "\r\n" }
capture = { nonce = '^NONCE (\w+)' }

[[setup]]
send = 'PROOF {hex(hmac_sha256("k", nonce))}\r\n'
read = { until = "\r\n" }
"#;
    let script = Arc::new(Script::parse(src).expect("valid"));
    let mut conv = Conversation::new(script, 0, 1);
    assert!(conv.next_request(Timestamp(1)).is_some());
    assert!(
        conv.next_request(Timestamp(2)).is_none(),
        "PROOF must wait for the nonce it hashes"
    );
    conv.on_bytes(b"NONCE n1\r\n", Timestamp(3)).expect("ok");
    let proof = conv.next_request(Timestamp(4)).expect("now it can go");
    let want = {
        use hmac::Mac;
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(b"k").expect("any key");
        mac.update(b"n1");
        format!("PROOF {}\r\n", hex_of(&mac.finalize().into_bytes()))
    };
    assert_eq!(String::from_utf8(proof.bytes).expect("text"), want);
}

#[test]
fn binary_captures_feed_functions() {
    // PostgreSQL's AuthenticationMD5Password: 'R', length 12, code 5, then a 4-byte salt that
    // may hold any byte (here CR, LF, NUL and 0xff).
    let src = r#"
[[setup]]
send = "STARTUP\n"
read = { length = 13 }
capture = { salt = '(?s-u)^R\x00\x00\x00\x0c\x00\x00\x00\x05(.{4})' }

[[setup]]
send = '{concat("md5", hex(md5(concat(hex(md5("pwuser")), salt))))}\0'
send_prefix = "u32be"
send_prefix_counts_itself = true
read = { length = 1 }
"#;
    let script = Arc::new(Script::parse(src).expect("valid"));
    let mut conv = Conversation::new(script, 0, 1);
    conv.next_request(Timestamp(1)).expect("startup");
    let auth = b"R\x00\x00\x00\x0c\x00\x00\x00\x05\r\n\x00\xff";
    let done = conv.on_bytes(auth, Timestamp(2)).expect("ok");
    assert_eq!(done[0].failed_assertion, None);
    let password = conv.next_request(Timestamp(3)).expect("password message");
    // md5(hex(md5(password || user)) || salt), as libpq computes it.
    let inner = hex_of(&<md5::Md5 as sha1::Digest>::digest(b"pwuser"));
    let mut outer_input = inner.into_bytes();
    outer_input.extend_from_slice(b"\r\n\x00\xff");
    let outer = hex_of(&<md5::Md5 as sha1::Digest>::digest(&outer_input));
    let mut want = vec![0, 0, 0, 40];
    want.extend_from_slice(format!("md5{outer}\0").as_bytes());
    assert_eq!(password.bytes, want);
    assert_eq!(password.header_len, Some(4));
}

#[test]
fn a_failed_computation_counts_the_exchange_as_an_error() {
    let src = r#"
[[setup]]
send = "HELLO\n"
read = { until = "\n" }
capture = { salt = '^SALT (\S+)' }

[[steps]]
send = "KEY {hex(unhex(salt))}\n"
read = { until = "\n" }
"#;
    let script = Arc::new(Script::parse(src).expect("valid"));
    let mut conv = Conversation::new(script, 0, 1);
    conv.next_request(Timestamp(1)).expect("hello");
    conv.on_bytes(b"SALT not-hex\n", Timestamp(2)).expect("ok");
    let req = conv.next_request(Timestamp(3)).expect("key");
    assert_eq!(req.bytes, b"KEY \n", "the failed value writes nothing");
    let done = conv.on_bytes(b"OK\n", Timestamp(4)).expect("ok");
    let failed = done[0].failed_assertion.as_deref().expect("an error");
    assert!(failed.contains("KEY: in `send`: unhex"), "{failed}");
}

#[test]
fn now_unix_follows_the_intended_time() {
    let src = "[[steps]]\nsend = \"T {now_unix()}\\n\"\nread = { until = \"\\n\" }\n";
    let script = Arc::new(Script::parse(src).expect("valid"));
    let mut conv = Conversation::new(script, 0, 1);
    conv.set_wall_clock(1_700_000_000, Timestamp(5_000_000_000));
    let a = conv.next_request(Timestamp(5_000_000_000)).expect("first");
    assert_eq!(a.bytes, b"T 1700000000\n");
    conv.on_bytes(b"ok\n", Timestamp(5_100_000_000))
        .expect("ok");
    let b = conv.next_request(Timestamp(7_500_000_000)).expect("second");
    assert_eq!(b.bytes, b"T 1700000002\n");
}

#[test]
fn params_set_vars_and_env_fills_placeholders() {
    let src = r#"
[vars]
user = "bench"
secret = "bench-secret"

[[steps]]
send = 'USER {user} {hex(sha1(concat("c ", secret)))} {env:ZINO_TOKEN}\n'
read = { until = "\n" }
"#;
    let env = |name: &str| (name == "ZINO_TOKEN").then(|| "t0k".to_string());
    let vars = vec![("secret".to_string(), "other".to_string())];
    let allowed = ["ZINO_TOKEN".to_string()];
    let script = Script::parse_with(
        src,
        &Inputs {
            vars: &vars,
            env: Some(&env),
            allow_env: &allowed,
        },
    )
    .expect("valid");
    let mut conv = Conversation::new(Arc::new(script), 0, 1);
    let req = conv.next_request(Timestamp(1)).expect("a request");
    let sha = hex_of(&<sha1::Sha1 as sha1::Digest>::digest(b"c other"));
    assert_eq!(
        String::from_utf8(req.bytes).expect("text"),
        format!("USER bench {sha} t0k\n")
    );

    let unknown = vec![("pasword".to_string(), "x".to_string())];
    let e = Script::parse_with(
        src,
        &Inputs {
            vars: &unknown,
            env: Some(&env),
            allow_env: &allowed,
        },
    )
    .expect_err("a typo");
    assert_eq!(
        e.to_string(),
        "--param pasword: the script has no variable `pasword` (its variables: user, secret)"
    );
    let e = Script::parse(src).expect_err("no environment");
    assert_eq!(
        e.to_string(),
        "line 7, column 56: the script reads the environment variable `ZINO_TOKEN` and it was \
         not allowed: a script sends what it reads to its target, so name each one it may read \
         with --allow-env ZINO_TOKEN"
    );
    let e = Script::parse_with(
        src,
        &Inputs {
            allow_env: &allowed,
            ..Inputs::default()
        },
    )
    .expect_err("allowed, not set");
    assert_eq!(
        e.to_string(),
        "line 7, column 60: in `send`: environment variable `ZINO_TOKEN` is not set"
    );
}

/// The login shown in docs/scripts.md ("Computed values") parses and sends what its comment
/// says for the greeting its comment shows.
#[test]
fn the_documented_zino_login_sends_what_the_docs_say() {
    let doc = include_str!("../../../../docs/scripts.md");
    let section = doc
        .split("## Computed values")
        .nth(1)
        .expect("a Computed values section");
    let block = section
        .split("```toml\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a toml block");
    let script = Arc::new(Script::parse(block).unwrap_or_else(|e| panic!("{e}\n{block}")));
    let mut conv = Conversation::new(script, 0, 1);
    conv.on_bytes(
        b"200 a8d7f0a9b8c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5 Hello, there\r\n",
        Timestamp(1),
    )
    .expect("a greeting");
    let login = conv.next_request(Timestamp(2)).expect("the login");
    let line = String::from_utf8(login.bytes).expect("text");
    assert!(
        block.contains(&format!("# {}", line.trim_end())),
        "the docs show another request than `{line}`"
    );
}

#[test]
fn hex_templates_take_computed_length_fields() {
    let src = r#"
[vars]
payload = "hello"

[[steps]]
send_hex = "01 {u16be(len(payload))} {payload} {u8(len(concat(payload, conn)))}"
read = { length = 1 }
"#;
    let script = Arc::new(Script::parse(src).expect("valid"));
    let mut conv = Conversation::new(script, 7, 1);
    let req = conv.next_request(Timestamp(1)).expect("a request");
    assert_eq!(req.bytes, b"\x01\x00\x05hello\x06");
}
