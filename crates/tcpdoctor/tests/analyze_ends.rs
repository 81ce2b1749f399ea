//! `analyze --ends A B`: the client's end and the server's end of one path, read together.
//! The captures (testdata/captures/ends/, see the README there) were taken by the sandbox's
//! delay line at both ends of a 2 ms-each-way path that dropped the server's 8th and 9th
//! packets; the figures asserted here were read from the packets with tshark (seq/ack/len/
//! TSval of each packet at each end), not from tcpdoctor.

mod common;

use std::path::PathBuf;

use serde_json::Value;

fn ends(name: &str) -> PathBuf {
    common::repo().join("testdata/captures/ends").join(name)
}

fn run(args: &[&str]) -> (Value, i32, String) {
    let out = common::tcpdoctor(args);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let code = out.status.code().unwrap_or(-1);
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (v, code, stderr)
}

#[test]
fn a_dropped_response_is_placed_on_the_path_with_the_frames_at_both_ends() {
    let (client, server) = (
        ends("drop_response.pcapng"),
        ends("drop_response.server.pcapng"),
    );
    let (c, s) = (client.to_str().unwrap(), server.to_str().unwrap());
    let (r, code, err) = run(&["analyze", "--format", "json", "--ends", c, s]);
    assert_eq!(code, 0, "{err}");
    common::validate(&r);
    let e = &r["ends"];
    assert_eq!(e["paired"], 1);
    assert_eq!(e["roles"]["first_is_client_end"], 1);
    assert_eq!(e["roles"]["assumed"], 0);
    // tshark: the server sent 16 packets, the client's end shows 14 of them; frames 17 (the
    // 8th response) and 19 (an ACK) of the server's file are missing at the client's end.
    let s2c = &e["server_to_client"];
    assert_eq!(s2c["sent"], 16);
    assert_eq!(s2c["arrived"], 14);
    assert_eq!(s2c["lost_frames"], serde_json::json!([17, 19]));
    // Its frame 20 resends the lost response: a retransmission that replaced a lost packet.
    assert_eq!(s2c["retransmitted"], 1);
    assert_eq!(s2c["replaced_lost"], 1);
    // The client's frame 17 resends its request, whose first copy (client frame 16) is the
    // server's frame 16: the request had arrived; what was lost was the answer acking it.
    let c2s = &e["client_to_server"];
    assert_eq!(c2s["lost"], 0);
    assert_eq!(c2s["needless"], 1);
    assert_eq!(
        c2s["needless_frames"][0],
        serde_json::json!({"resent_frame": 17, "arrived_frame": 16})
    );
    // 2 ms each way (tshark: median 2.017 ms and 2.016 ms): one clock, nothing negative.
    for dir in ["client_to_server", "server_to_client"] {
        let p50 = common::num(&e[dir]["delay_ms"]["p50"]);
        assert!((2.0..2.5).contains(&p50), "{dir}: {p50}");
    }
    assert_eq!(e["clocks_differ"], false);

    // The text says the same, naming the files the frames belong to; the order of the files
    // does not matter (the handshakes tell whose end is whose).
    let out = common::tcpdoctor(&["analyze", "--ends", s, c]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("{c} is the client's end (from the handshakes)")),
        "{text}"
    );
    assert!(
        text.contains(&format!("2 lost on the path (frames 17, 19 in {s})")),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "frame 17 in {c} resends what frame 16 in {s} shows arriving"
        )),
        "{text}"
    );
}

#[test]
fn captures_of_different_traffic_pair_nothing_and_say_so() {
    let other = common::repo().join("testdata/captures/wan15ms_window4.pcap");
    let c = ends("drop_response.pcapng");
    let (r, code, err) = run(&[
        "analyze",
        "--format",
        "json",
        "--ends",
        c.to_str().unwrap(),
        other.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["ends"]["paired"], 0);
    let out = common::tcpdoctor(&[
        "analyze",
        "--ends",
        c.to_str().unwrap(),
        other.to_str().unwrap(),
    ]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("No connection appears in both files"));
}

#[test]
fn ends_needs_exactly_two_regular_files() {
    let c = ends("drop_response.pcapng");
    let c = c.to_str().unwrap();
    let (_, code, err) = run(&["analyze", "--ends", c]);
    assert_eq!(code, 2);
    assert!(err.contains("--ends compares two files"), "{err}");
    let (_, code, err) = run(&["analyze", "--ends", c, c, c]);
    assert_eq!(code, 2);
    assert!(err.contains("3 given"), "{err}");
    let (_, code, err) = run(&["analyze", "--ends", c, "/dev/stdin"]);
    assert_eq!(code, 2);
    assert!(err.contains("not a regular file"), "{err}");
}
