//! The allocation-free path gives the same bytes and exchanges as the plain one: requests
//! rendered once at parse time, requests appended to a caller's buffer, responses completed
//! into a caller's vector, regexes matched with each conversation's own scratch.

use std::sync::Arc;

use super::*;
use crate::impair::SplitMix64;
use expr::Scope;
use functions::Sources;

fn t(ns: u64) -> Timestamp {
    Timestamp::from_nanos(ns)
}

fn preset(name: &str, pairs: &[(&str, &str)]) -> Script {
    let given: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Script::preset(name, &given).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn a_fixed_request_is_the_request_the_template_renders() {
    let custom = Script::parse(
        "[[steps]]\nname = \"framed\"\nsend = 'HEAD\\r\\n{body}payload {{x}}'\n\
         send_prefix = \"u16le\"\nsend_prefix_counts_itself = true\nread = { length = 1 }\n\
         [[steps]]\nname = \"hex\"\nsend_hex = \"00 01 {body} 0d 0a\"\nread = { length = 1 }\n",
    )
    .unwrap();
    let scripts = [
        preset("resp", &[]),
        preset("resp", &[("command", "get")]),
        preset("http1", &[("method", "HEAD")]),
        preset("memcache", &[]),
        preset("line", &[]),
        preset("echo", &[]),
        custom,
    ];
    let mut fixed = 0;
    for script in &scripts {
        for step in script.steps.iter().filter(|s| s.send.is_some()) {
            let mut rendered = b"before".to_vec();
            let mut rng = SplitMix64::new(4);
            let mut scope = Scope {
                lookup: &|_| None,
                conn: 3,
                iteration: 9,
                sources: Sources {
                    rng: &mut rng,
                    clock: None,
                },
            };
            let header = step.render(&mut scope, &mut rendered, &mut None);
            match &step.fixed {
                Some(f) => {
                    fixed += 1;
                    assert_eq!(rendered[6..], f.bytes[..], "{}", step.name);
                    assert_eq!(header, f.header_len, "{}", step.name);
                }
                None => assert!(!step.send.as_ref().unwrap().is_fixed(), "{}", step.name),
            }
        }
    }
    // PING, GET, HEAD, get, the line, and both custom steps; SET, set and echo draw random.
    assert_eq!(fixed, 7);
    let framed = &scripts[6].steps[0];
    let bytes = &framed.fixed.as_ref().unwrap().bytes;
    assert_eq!(&bytes[..2], &[2 + 6 + 11, 0], "the field counts itself");
    assert_eq!(framed.fixed.as_ref().unwrap().header_len, Some(2 + 6));
}

#[test]
fn requests_appended_to_a_buffer_match_requests_returned_alone() {
    for script in [preset("echo", &[("size", "12")]), preset("http1", &[])] {
        let script = Arc::new(script);
        let mut alone = Conversation::new(Arc::clone(&script), 2, 7);
        let mut into = Conversation::new(Arc::clone(&script), 2, 7);
        let mut buf = b"earlier batch".to_vec();
        for k in 0..3 {
            let want = alone.next_request(t(k)).unwrap();
            let at = buf.len();
            let got = into.next_request_into(t(k), &mut buf).unwrap();
            assert_eq!(buf[at..], want.bytes[..], "{}", script.name());
            assert_eq!(got.len, want.bytes.len());
            assert_eq!((got.step, got.header_len), (want.step, want.header_len));
        }
        assert!(buf.starts_with(b"earlier batch"));
    }
}

#[test]
fn a_request_not_ready_leaves_the_buffer_untouched() {
    let greeted = Script::parse(
        "[greeting]\nread = { until = \"\\n\" }\n\
         [[steps]]\nsend = \"x\\n\"\nread = { until = \"\\n\" }\n",
    )
    .unwrap();
    let mut conv = Conversation::new(Arc::new(greeted), 0, 0);
    let mut buf = b"batch".to_vec();
    assert_eq!(
        conv.next_request_into(t(1), &mut buf),
        None,
        "greeting awaited"
    );
    assert_eq!(buf, b"batch");
    conv.on_bytes(b"hello\n", t(2)).unwrap();
    conv.next_request_into(t(3), &mut buf).unwrap();
    assert_eq!(buf, b"batchx\n");
}

#[test]
fn completed_into_a_vector_appends_and_an_error_appends_nothing() {
    let script = Arc::new(preset("resp", &[]));
    let mut conv = Conversation::new(Arc::clone(&script), 0, 0);
    let mut sink = Vec::new();
    for k in 0..2 {
        conv.next_request_into(t(k), &mut sink).unwrap();
    }
    let mut done = Vec::new();
    conv.on_bytes_into(b"+PONG\r\n+PO", t(5), &mut done)
        .unwrap();
    assert_eq!(done.len(), 1);
    conv.on_bytes_into(b"NG\r\n", t(6), &mut done).unwrap();
    assert_eq!(done.len(), 2);
    assert_eq!((done[1].intended, done[1].finished), (t(1), t(6)));

    // A whole response followed by bytes nobody asked for: the error wins, nothing is added.
    conv.next_request_into(t(7), &mut sink).unwrap();
    let e = conv
        .on_bytes_into(b"+PONG\r\n+EXTRA\r\n", t(8), &mut done)
        .unwrap_err();
    assert!(e.message.contains("no response outstanding"), "{e}");
    assert_eq!(done.len(), 2);
}

#[test]
fn regex_framing_and_expect_match_across_every_split_and_on_many_threads() {
    let script = Arc::new(preset(
        "line",
        &[
            ("request", "LIST"),
            ("until_line", "^\\.\\r?$"),
            ("expect", "^200 "),
        ],
    ));
    let answer: &[u8] = b"200 ok\r\na\r\n.\r\n500 no\r\n.\r\n";
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let script = Arc::clone(&script);
            std::thread::spawn(move || {
                for split in 0..=answer.len() {
                    let mut conv = Conversation::new(Arc::clone(&script), 0, 0);
                    let mut sink = Vec::new();
                    conv.next_request_into(t(0), &mut sink).unwrap();
                    conv.next_request_into(t(0), &mut sink).unwrap();
                    let mut done = Vec::new();
                    conv.on_bytes_into(&answer[..split], t(1), &mut done)
                        .unwrap();
                    conv.on_bytes_into(&answer[split..], t(2), &mut done)
                        .unwrap();
                    assert_eq!(done.len(), 2, "split at {split}");
                    assert_eq!(done[0].response_bytes, 14, "split at {split}");
                    assert_eq!(done[0].failed_assertion, None, "split at {split}");
                    assert!(done[1].failed_assertion.is_some(), "split at {split}");
                }
            })
        })
        .collect();
    for th in threads {
        th.join().unwrap();
    }
}
