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
