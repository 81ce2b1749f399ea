//! Conversations driven byte by byte: presets, captures and loops, pipelining, assertions.

use std::sync::Arc;

use super::*;

fn t(ns: u64) -> Timestamp {
    Timestamp::from_nanos(ns)
}

fn params(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn echo_preset_round_trip() {
    let script = Arc::new(Script::preset("echo", &params(&[("size", "5")])).unwrap());
    let mut conv = Conversation::new(Arc::clone(&script), 0, 1);
    let req = conv.next_request(t(10)).unwrap();
    assert_eq!(req.bytes.len(), 9);
    assert_eq!(&req.bytes[..4], &[0, 0, 0, 5]);
    assert_eq!(req.header_len, Some(4));
    // The echo comes back in two pieces.
    assert!(conv.on_bytes(&req.bytes[..6], t(20)).unwrap().is_empty());
    let done = conv.on_bytes(&req.bytes[6..], t(30)).unwrap();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].intended, t(10));
    assert_eq!(done[0].finished, t(30));
    assert_eq!((done[0].request_bytes, done[0].response_bytes), (9, 9));
    assert_eq!(done[0].failed_assertion, None);
    assert!(!conv.is_finished());
    assert_eq!(script.step_names(), ["echo"]);
}

const ZINO: &str = include_str!("../../../../examples/zino-legacy.toml");

/// The login the example computes for the challenge `3f2a` of [`greeted`]: the SHA-1 of
/// "3f2a bench-secret" (Python's hashlib), as Zino 2 checks it.
const ZINO_LOGIN: &str = "USER bench 44c83d58d4ac4154fe5a6335a35675154d8107fa";

/// A fake Zino legacy server: answers one request line.
fn zino_server(line: &str, fail_hist_of: &str) -> String {
    let words: Vec<&str> = line.trim_end().split(' ').collect();
    match words[..] {
        ["USER", ..] if line.trim_end() == ZINO_LOGIN => "200 ok\r\n".into(),
        ["USER", ..] => "500 authentication failure\r\n".into(),
        ["CASEIDS"] => {
            "304 list of active cases follows, terminated with '.'\r\n7\r\n8\r\n9\r\n.\r\n".into()
        }
        ["GETATTRS", id] => format!(
            "303 simple attributes follow, terminated with '.'\r\nid: {id}\r\nstate: open\r\n.\r\n"
        ),
        ["GETHIST", id] if id == fail_hist_of => format!("500 event \"{id}\" does not exist\r\n"),
        ["GETHIST", _] => {
            "301 history follows, terminated with '.'\r\n1697635024 state change\r\n.\r\n".into()
        }
        ["GETLOG", _] => {
            "300 log follows, terminated with '.'\r\n1697635024 port down\r\n.\r\n".into()
        }
        _ => "500 unknown command\r\n".into(),
    }
}

/// Drives a conversation against `server` with up to `pipeline` requests outstanding, feeding
/// every response one byte at a time; returns the request lines and the completions.
fn drive(
    conv: &mut Conversation,
    pipeline: usize,
    max_requests: usize,
    server: &dyn Fn(&str) -> String,
) -> (Vec<String>, Vec<Completed>) {
    let mut sent = Vec::new();
    let mut done = Vec::new();
    let mut answers: std::collections::VecDeque<u8> = Default::default();
    let mut clock = 0;
    for _ in 0..100_000 {
        clock += 1;
        while conv.outstanding() < pipeline && sent.len() < max_requests {
            let Some(req) = conv.next_request(t(clock)) else {
                break;
            };
            let line = String::from_utf8(req.bytes).unwrap();
            answers.extend(server(&line).bytes());
            sent.push(line.trim_end().to_string());
        }
        match answers.pop_front() {
            Some(b) => done.extend(conv.on_bytes(&[b], t(clock)).unwrap()),
            None => break,
        }
    }
    (sent, done)
}

fn greeted(script: &Arc<Script>) -> Conversation {
    let mut conv = Conversation::new(Arc::clone(script), 1, 7);
    assert_eq!(conv.outstanding(), 1, "the greeting is awaited");
    assert_eq!(conv.next_request(t(0)), None, "nothing before the greeting");
    let done = conv.on_bytes(b"200 3f2a Hello, there\r\n", t(1)).unwrap();
    assert_eq!(done.len(), 1);
    assert_eq!(
        (done[0].step, done[0].intended, done[0].request_bytes),
        (StepId(0), t(0), 0)
    );
    conv
}

#[test]
fn zino_captures_case_ids_and_walks_them_in_order() {
    let script = Arc::new(Script::parse(ZINO).unwrap());
    assert_eq!(
        script.step_names(),
        ["greeting", "USER", "CASEIDS", "GETATTRS", "GETHIST", "GETLOG"]
    );
    for pipeline in [1, 8] {
        let mut conv = greeted(&script);
        let (sent, done) = drive(&mut conv, pipeline, 2 + 9 + 3, &|l| zino_server(l, ""));
        let mut want = vec![ZINO_LOGIN.to_string(), "CASEIDS".into()];
        for id in [7, 8, 9, 7] {
            for cmd in ["GETATTRS", "GETHIST", "GETLOG"] {
                want.push(format!("{cmd} {id}"));
            }
        }
        want.truncate(14);
        assert_eq!(sent, want, "pipeline {pipeline}");
        assert_eq!(done.len(), 14);
        assert!(
            done.iter().all(|c| c.failed_assertion.is_none()),
            "{done:?}"
        );
        let steps: Vec<usize> = done.iter().map(|c| c.step.0).collect();
        assert_eq!(steps[..5], [1, 2, 3, 4, 5]);
    }
}

#[test]
fn pipelining_stops_at_a_capture_still_outstanding() {
    let script = Arc::new(Script::parse(ZINO).unwrap());
    let mut conv = greeted(&script);
    let first: Vec<_> = std::iter::from_fn(|| conv.next_request(t(2))).collect();
    assert_eq!(
        first.len(),
        2,
        "USER (its challenge is in) and CASEIDS need nothing outstanding"
    );
    assert_eq!(first[0].bytes, format!("{ZINO_LOGIN}\r\n").as_bytes());
    assert_eq!(conv.outstanding(), 2);
    assert!(!conv.is_finished());
    conv.on_bytes(b"200 ok\r\n", t(3)).unwrap();
    assert_eq!(
        conv.next_request(t(4)),
        None,
        "the loop waits for CASEIDS' list"
    );
    let done = conv.on_bytes(b"304 list\r\n41\r\n.\r\n", t(5)).unwrap();
    assert_eq!(done.len(), 1);
    let next = conv.next_request(t(6)).unwrap();
    assert_eq!(next.bytes, b"GETATTRS 41\r\n");
    assert_eq!(script.step_names()[next.step.0], "GETATTRS");
}

#[test]
fn failed_status_is_an_assertion_not_a_crash() {
    let script = Arc::new(Script::parse(ZINO).unwrap());
    let mut conv = greeted(&script);
    let (sent, done) = drive(&mut conv, 4, 12, &|l| zino_server(l, "8"));
    assert_eq!(sent.len(), 12);
    let failed: Vec<_> = done
        .iter()
        .filter_map(|c| c.failed_assertion.as_deref())
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(
        failed[0].starts_with("GETHIST: expected `^[23]\\d\\d `, received \"500 event"),
        "{}",
        failed[0]
    );
    assert_eq!(
        done.len(),
        12,
        "the single-line 500 answer is framed and the run goes on"
    );
}

#[test]
fn echo_pipelines_and_answers_in_order() {
    let script =
        Arc::new(Script::preset("echo", &params(&[("size", "3"), ("prefix", "u8")])).unwrap());
    let mut conv = Conversation::new(script, 0, 1);
    let reqs: Vec<Request> = (0..4)
        .map(|k| conv.next_request(t(k * 10)).unwrap())
        .collect();
    assert_eq!(conv.outstanding(), 4);
    assert!(reqs
        .iter()
        .all(|r| r.bytes.len() == 4 && r.bytes[0] == 3 && r.header_len == Some(1)));
    let all: Vec<u8> = reqs.iter().flat_map(|r| r.bytes.clone()).collect();
    let first = conv.on_bytes(&all[..9], t(100)).unwrap();
    let rest = conv.on_bytes(&all[9..], t(200)).unwrap();
    let intended: Vec<_> = first
        .iter()
        .chain(&rest)
        .map(|c| (c.intended, c.finished))
        .collect();
    assert_eq!(
        intended,
        [
            (t(0), t(100)),
            (t(10), t(100)),
            (t(20), t(200)),
            (t(30), t(200))
        ]
    );
    assert_eq!(conv.outstanding(), 0);
}

#[test]
fn conn_iteration_and_random_are_deterministic() {
    let src = "iterations = 3\n[[steps]]\nsend = \"GET item-{conn}-{i} {random:8}\\n\"\nread = { until = \"\\n\" }\n";
    let script = Arc::new(Script::parse(src).unwrap());
    let run = |conn: u64, seed: u64| -> Vec<String> {
        let mut conv = Conversation::new(Arc::clone(&script), conn, seed);
        let mut lines = Vec::new();
        while let Some(req) = conv.next_request(t(0)) {
            lines.push(String::from_utf8(req.bytes.clone()).unwrap());
            conv.on_bytes(b"OK\n", t(1)).unwrap();
        }
        assert!(conv.is_finished());
        lines
    };
    let a = run(3, 42);
    assert_eq!(a.len(), 3, "iterations = 3");
    for (i, line) in a.iter().enumerate() {
        assert!(line.starts_with(&format!("GET item-3-{i} ")), "{line}");
        assert_eq!(line.len(), "GET item-3-0 ".len() + 8 + 1);
    }
    assert_eq!(a, run(3, 42), "same connection and seed, same bytes");
    assert_ne!(a[0][13..], run(3, 43)[0][13..], "another seed");
    assert_ne!(a[0][13..], run(4, 42)[0][13..], "another connection");
    assert_ne!(a[0][13..], a[1][13..], "each request draws new bytes");
}

#[test]
fn a_capture_feeds_later_requests_and_blocks_them_until_it_arrives() {
    let src = include_str!("../../../../examples/token-session.toml");
    let script = Arc::new(Script::parse(src).unwrap());
    let mut conv = Conversation::new(script, 0, 0);
    let login = conv.next_request(t(0)).unwrap();
    assert_eq!(login.bytes, b"LOGIN bench\n");
    assert_eq!(conv.next_request(t(0)), None, "FETCH needs the token");
    conv.on_bytes(b"OK token=abc123\n", t(1)).unwrap();
    let fetch = conv.next_request(t(2)).unwrap();
    assert_eq!(fetch.bytes, b"FETCH abc123 0\n");
    let ping = conv.next_request(t(2)).unwrap();
    assert_eq!(ping.bytes, b"\x00\x01P");
    let done = conv.on_bytes(b"\x00\x02hi\x00\x01P", t(3)).unwrap();
    assert_eq!(
        done.iter().map(|c| c.response_bytes).collect::<Vec<_>>(),
        [4, 3]
    );
    assert_eq!(conv.next_request(t(4)).unwrap().bytes, b"FETCH abc123 1\n");
}

#[test]
fn a_capture_that_finds_nothing_is_a_failed_assertion() {
    let src = include_str!("../../../../examples/token-session.toml");
    let mut conv = Conversation::new(Arc::new(Script::parse(src).unwrap()), 0, 0);
    conv.next_request(t(0)).unwrap();
    let done = conv.on_bytes(b"ERR denied\n", t(1)).unwrap();
    let failed = done[0].failed_assertion.as_deref().unwrap();
    assert!(failed.contains("capture `token` found no"), "{failed}");
    assert_eq!(
        conv.next_request(t(2)).unwrap().bytes,
        b"FETCH  0\n",
        "empty, not stuck"
    );
}

#[test]
fn an_empty_list_ends_the_conversation_instead_of_spinning() {
    let src = "[[setup]]\nsend = \"LIST\\n\"\nread = { until_line = '^\\.$' }\ncapture = { items = { each_line = '^item (\\w+)' } }\n\
               [[steps]]\nfor_each = \"x in items\"\n[[steps.do]]\nsend = \"GET {x}\\n\"\nread = { until = \"\\n\" }\n";
    let mut conv = Conversation::new(Arc::new(Script::parse(src).unwrap()), 0, 0);
    conv.next_request(t(0)).unwrap();
    assert!(!conv.is_finished());
    conv.on_bytes(b"none\n.\n", t(1)).unwrap();
    assert_eq!(conv.next_request(t(2)), None);
    assert!(conv.is_finished());
}

#[test]
fn idle_and_close_framings_complete_on_idle_and_eof() {
    let src = "[[steps]]\nsend = \"STATS\\n\"\nread = { idle = \"20ms\" }\n";
    let mut conv = Conversation::new(Arc::new(Script::parse(src).unwrap()), 0, 0);
    assert_eq!(conv.idle_period(), None, "nothing awaited yet");
    conv.next_request(t(0)).unwrap();
    assert_eq!(
        conv.idle_period(),
        Some(std::time::Duration::from_millis(20))
    );
    assert!(conv.on_bytes(b"a=1\n", t(1)).unwrap().is_empty());
    assert!(conv.on_bytes(b"b=2\n", t(2)).unwrap().is_empty());
    let done = conv.on_idle(t(30));
    assert_eq!(
        (done.len(), done[0].response_bytes, done[0].finished),
        (1, 8, t(30))
    );

    let src = "[[steps]]\nsend = \"BYE\\n\"\nread = \"close\"\n";
    let mut conv = Conversation::new(Arc::new(Script::parse(src).unwrap()), 0, 0);
    conv.next_request(t(0)).unwrap();
    conv.on_bytes(b"see you", t(1)).unwrap();
    let done = conv.on_eof(t(2)).unwrap();
    assert_eq!(done[0].response_bytes, 7);
}

#[test]
fn eof_with_a_framed_response_outstanding_is_an_error() {
    let mut conv = Conversation::new(Arc::new(Script::preset("resp", &[]).unwrap()), 0, 0);
    conv.next_request(t(0)).unwrap();
    conv.on_bytes(b"+PO", t(1)).unwrap();
    let e = conv.on_eof(t(2)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "step `PING`: connection closed with 1 response(s) outstanding (resp framing) (received \"+PO\")"
    );
}

#[test]
fn bytes_that_are_not_a_response_are_errors() {
    let mut conv = Conversation::new(Arc::new(Script::preset("resp", &[]).unwrap()), 0, 0);
    let e = conv.on_bytes(b"+PONG\r\n", t(0)).unwrap_err();
    assert_eq!(e.to_string(), "step `after (none)`: 7 byte(s) arrived with no response outstanding (received \"+PONG\\r\\n\")");
    conv.next_request(t(1)).unwrap();
    let e = conv.on_bytes(b"+PONG\r\n+EXTRA\r\n", t(2)).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("step `after PING`: 8 byte(s) arrived"),
        "{e}"
    );
    let mut conv = Conversation::new(Arc::new(Script::preset("resp", &[]).unwrap()), 0, 0);
    conv.next_request(t(1)).unwrap();
    let e = conv.on_bytes(b"@\x00\xff\r\n", t(2)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "step `PING`: `@` at byte 0 is not a RESP type (received \"@\\x00\\xff\\r\\n\")"
    );
}

#[test]
fn http_head_responses_have_no_body() {
    let script =
        Arc::new(Script::preset("http1", &params(&[("method", "head"), ("path", "/x")])).unwrap());
    let mut conv = Conversation::new(script, 0, 0);
    let req = conv.next_request(t(0)).unwrap();
    assert_eq!(req.bytes, b"HEAD /x HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let done = conv
        .on_bytes(b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n", t(1))
        .unwrap();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].failed_assertion, None);
}

#[test]
fn a_response_ended_by_silence_holds_back_the_next_request() {
    let src = "[[steps]]\nsend = \"STATS\\n\"\nread = { idle = \"20ms\" }\n";
    let mut conv = Conversation::new(Arc::new(Script::parse(src).unwrap()), 0, 0);
    conv.next_request(t(0)).unwrap();
    assert_eq!(
        conv.next_request(t(1)),
        None,
        "its answer would run into the idle one"
    );
    conv.on_bytes(b"x=1\n", t(2)).unwrap();
    assert_eq!(conv.on_idle(t(30)).len(), 1);
    assert!(conv.next_request(t(31)).is_some());
}

#[test]
fn a_close_framed_script_ends_once_its_iterations_are_done() {
    let src = "[[steps]]\nsend = \"GET\\n\"\nread = \"close\"\n";
    let mut conv = Conversation::new(Arc::new(Script::parse(src).unwrap()), 0, 0);
    conv.next_request(t(0)).unwrap();
    assert_eq!(conv.on_eof(t(1)).unwrap().len(), 1);
    assert!(
        !conv.is_finished(),
        "more iterations: the driver reconnects"
    );
    let once = format!("iterations = 1\n{src}");
    let mut conv = Conversation::new(Arc::new(Script::parse(&once).unwrap()), 0, 0);
    conv.next_request(t(0)).unwrap();
    assert_eq!(conv.on_eof(t(1)).unwrap().len(), 1);
    assert!(conv.is_finished());
}

#[test]
fn scripts_and_conversations_move_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Script>();
    send_sync::<Conversation>();
    send_sync::<ScriptError>();
    send_sync::<ResponseError>();
}

#[test]
fn max_response_can_be_overridden() {
    let script = Script::preset("line", &[]).unwrap().with_max_response(8);
    let mut conv = Conversation::new(Arc::new(script), 0, 0);
    conv.next_request(t(0)).unwrap();
    let e = conv.on_bytes(b"123456789", t(1)).unwrap_err();
    assert!(e.message.contains("exceeds max_response (8 bytes)"), "{e}");
}

#[test]
fn a_list_captured_every_iteration_is_walked_every_iteration() {
    let src = r#"
[[steps]]
send = "CASEIDS\r\n"
read = { until_line = '^\.\r?$' }
capture = { ids = { each_line = '^(\d+)\r?$' } }

[[steps]]
for_each = "id in ids"
[[steps.do]]
send = "GETATTRS {id} {i}\r\n"
read = { until_line = '^\.\r?$' }
"#;
    let script = Arc::new(Script::parse(src).unwrap());
    let mut conv = Conversation::new(script, 0, 0);
    let (sent, done) = drive(&mut conv, 8, 7, &|line| {
        if line.starts_with("CASEIDS") {
            "304 list\r\n1\r\n2\r\n.\r\n".to_string()
        } else {
            "303 attrs\r\n.\r\n".to_string()
        }
    });
    assert_eq!(
        sent,
        [
            "CASEIDS",
            "GETATTRS 1 0",
            "GETATTRS 2 0",
            "CASEIDS",
            "GETATTRS 1 1",
            "GETATTRS 2 1",
            "CASEIDS"
        ]
    );
    assert_eq!(done.len(), 7);
}

/// Rule 6 (issue 12): `Connection: close`, or HTTP/1.0 without keep-alive, ends the sending on
/// this connection, and the pipelined requests behind it are reported unanswered (for the
/// driver to re-send), not as a response error; keep-alive answers change nothing.
#[test]
fn http_connection_close_ends_sending_and_names_the_unanswered() {
    let script = Arc::new(Script::preset("http1", &[]).unwrap());
    let cases: [(&[u8], bool); 5] = [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false),
        (
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
            true,
        ),
        (
            b"HTTP/1.1 200 OK\r\nconnection: Upgrade, CLOSE\r\nContent-Length: 2\r\n\r\nok",
            true,
        ),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", true),
        (
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok",
            false,
        ),
    ];
    for (response, closes) in cases {
        let mut conv = Conversation::new(Arc::clone(&script), 0, 1);
        conv.next_request(t(10)).unwrap();
        conv.next_request(t(20)).unwrap();
        let done = conv.on_bytes(response, t(30)).unwrap();
        let shown = String::from_utf8_lossy(response);
        assert_eq!(done.len(), 1, "{shown}");
        assert_eq!(conv.server_closes(), closes, "{shown}");
        let unanswered: Vec<_> = conv.unanswered().collect();
        assert_eq!(unanswered, vec![t(20)], "{shown}");
        assert_eq!(conv.next_request(t(40)).is_none(), closes, "{shown}");
    }
}
