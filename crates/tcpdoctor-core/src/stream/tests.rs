use super::framing::{Counter, Framing};
use super::*;

fn framings() -> Vec<Framing> {
    ["u8", "u16be", "u16le", "u32be", "u32le", "line", "crlf"]
        .iter()
        .map(|n| Framing::parse(n, None).unwrap())
        .chain([Framing::parse("fixed", Some(37)).unwrap()])
        .collect()
}

/// Messages of several sizes, back to back, fed whole, cut at every offset, and byte by byte:
/// the count is the same.
#[test]
fn counter_counts_whole_messages_however_the_bytes_arrive() {
    for f in framings() {
        let sizes: Vec<u64> = match f {
            Framing::Fixed { size } => vec![u64::from(size); 5],
            Framing::Prefix { width, .. } => {
                vec![u64::from(width), 3 + u64::from(width), 40, 200, 7]
            }
            Framing::Line { crlf } => vec![1 + u64::from(crlf), 3 + u64::from(crlf), 40, 200, 7],
        };
        let stream: Vec<u8> = sizes.iter().flat_map(|&s| f.message(s).unwrap()).collect();
        let mut whole = Counter::new(f);
        whole.feed(&stream).unwrap();
        assert_eq!(whole.messages, 5, "{f:?}");
        assert_eq!(whole.bytes(), stream.len() as u64);
        for cut in 0..=stream.len() {
            let mut c = Counter::new(f);
            c.feed(&stream[..cut]).unwrap();
            c.feed(&stream[cut..]).unwrap();
            assert_eq!(c.messages, 5, "{f:?} cut at {cut}");
        }
        let mut bytewise = Counter::new(f);
        let mut seen = Vec::new();
        for b in &stream {
            bytewise.feed(std::slice::from_ref(b)).unwrap();
            seen.push(bytewise.messages);
        }
        // A message is counted exactly when its last byte arrives.
        let mut end = 0;
        for (i, s) in sizes.iter().enumerate() {
            end += *s as usize;
            assert_eq!(seen[end - 1], i as u64 + 1, "{f:?}");
            if end >= 2 {
                assert_eq!(seen[end - 2], i as u64, "{f:?}");
            }
        }
    }
}

#[test]
fn a_prefix_over_the_limit_names_its_stream_byte() {
    let f = Framing::parse("u32be", None).unwrap();
    let mut stream = f.message(10).unwrap();
    stream.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]);
    let mut c = Counter::new(f);
    let err = c.feed(&stream).unwrap_err();
    assert!(err.contains("stream byte 10"), "{err}");
    assert!(err.contains("4294967295"), "{err}");
}

#[test]
fn framing_and_size_errors_say_what_is_allowed() {
    let e = Framing::parse("u24", None).unwrap_err();
    assert!(e.contains("u32be") && e.contains("u24"), "{e}");
    assert!(Framing::parse("fixed", None)
        .unwrap_err()
        .contains("--size"));
    let u8f = Framing::parse("u8", None).unwrap();
    assert!(u8f.message(300).unwrap_err().contains("at most 255"));
    assert_eq!(u8f.message(256).unwrap()[0], 255);
    let crlf = Framing::parse("crlf", None).unwrap();
    assert!(crlf.message(1).unwrap_err().contains("from 2 bytes"));
    let le = Framing::parse("u16le", None).unwrap().message(300).unwrap();
    assert_eq!(&le[..2], &[42, 1]);
}

fn setup(direction: Direction) -> Setup {
    Setup {
        target: "127.0.0.1:7000".into(),
        direction,
        framing: "u32be",
        message_bytes: None,
        connections: 1,
        warmup_s: 0.5,
        server: Some("srv".into()),
    }
}

fn measured(segments: u64, calls: u64) -> Measured {
    Measured {
        direction: Direction::FromServer,
        seconds: 2.0,
        messages: 10_000,
        bytes: 1_000_000,
        data_segments: Ok(segments),
        full_segment: Some(1448),
        server_cpu_s: Some(0.5),
        calls: CallsSeen::Counted {
            by: vec![("sendto".into(), calls)],
            bytes: 1_000_000,
        },
        notes: Vec::new(),
        traced: true,
    }
}

#[test]
fn one_call_and_one_packet_per_message_is_named_with_its_batched_cost() {
    let r = report("t", setup(Direction::FromServer), measured(9_800, 10_000));
    assert_eq!(r.messages_per_s, 5_000.0);
    assert_eq!(r.bytes_per_s, 500_000.0);
    assert_eq!(r.server_cpu_us_per_message, Some(50.0));
    let seg = r.segments.as_ref().unwrap();
    assert_eq!(seg.per_message, Some(0.98));
    let reading = r.reading.as_deref().unwrap();
    assert!(reading.contains("unbatched_messages"), "{reading}");
    assert!(reading.contains("(1 calls per message)"), "{reading}");
    // Traced segments are the pace's: said, and not read.
    assert!(
        r.warnings[0].contains("measure segments with --no-trace"),
        "{:?}",
        r.warnings
    );
    let text = render(&r);
    assert!(text.contains("5000 messages/s"), "{text}");
    assert!(text.contains("500 KB/s"), "{text}");
}

#[test]
fn the_reading_rests_on_the_calls_not_on_the_traced_segments() {
    // Fewer segments than calls (the kernel merged writes): still one call per message.
    let merged = report("t", setup(Direction::FromServer), measured(1_000, 10_000));
    assert!(merged.reading.unwrap().contains("its own call"));
    // 1000-byte messages are more than half a 1448-byte segment: not small, nothing said.
    let mut big = measured(1_000, 10_000);
    big.bytes = 10_000_000;
    big.calls = CallsSeen::Counted {
        by: vec![("sendto".into(), 10_000)],
        bytes: 10_000_000,
    };
    assert!(report("t", setup(Direction::FromServer), big)
        .reading
        .is_none());
    let batched = report("t", setup(Direction::FromServer), measured(700, 100));
    assert_eq!(
        batched.reading.unwrap(),
        "the server batches: 100 messages per send call"
    );
    // Between the two thresholds nothing is said.
    assert!(
        report("t", setup(Direction::FromServer), measured(9_000, 7_000))
            .reading
            .is_none()
    );
}

#[test]
fn nothing_is_read_without_the_trace_and_nothing_counted_is_a_warning() {
    let mut m = measured(9_800, 10_000);
    m.calls = CallsSeen::Unknown("not started by tcpdoctor".into());
    m.traced = false;
    let r = report("t", setup(Direction::FromServer), m.clone());
    assert!(r.reading.is_none() && r.calls.is_none());
    assert_eq!(r.calls_unknown.as_deref(), Some("not started by tcpdoctor"));
    assert!(r.warnings.is_empty());
    m.messages = 0;
    m.bytes = 0;
    let r = report("t", setup(Direction::FromServer), m);
    assert!(
        r.warnings[0].contains("no whole message arrived"),
        "{:?}",
        r.warnings
    );
    assert_eq!(r.messages_per_s, 0.0);
    assert!(r.segments.unwrap().per_message.is_none());
}

#[test]
fn a_receiver_reading_in_parts_is_said_and_tcpdoctors_own_segments_are_not_shown() {
    let mut m = measured(0, 20_000);
    m.direction = Direction::ToServer;
    m.calls = CallsSeen::Counted {
        by: vec![("recvfrom".into(), 20_000)],
        bytes: 1_000_000,
    };
    let r = report("t", setup(Direction::ToServer), m.clone());
    assert!(r.segments.is_none() && r.segments_unknown.is_some());
    assert!(r.reading.unwrap().contains("2 receive calls per message"));
    m.calls = CallsSeen::Counted {
        by: vec![("read".into(), 100)],
        bytes: 1_000_000,
    };
    assert_eq!(
        report("t", setup(Direction::ToServer), m.clone())
            .reading
            .unwrap(),
        "the server reads 100 messages per receive call"
    );
    m.calls = CallsSeen::Counted {
        by: vec![("read".into(), 10_000)],
        bytes: 1_000_000,
    };
    assert!(report("t", setup(Direction::ToServer), m).reading.is_none());
}

#[test]
fn calls_per_message_count_the_messages_the_calls_moved_not_the_windows() {
    // The window counted 10,000 messages, but the calls moved only 800 KB of them (the rest
    // were in the buffers before the window): 8,000 messages, one call each.
    let mut m = measured(9_800, 8_000);
    m.calls = CallsSeen::Counted {
        by: vec![("sendto".into(), 8_000)],
        bytes: 800_000,
    };
    let r = report("t", setup(Direction::FromServer), m);
    assert_eq!(r.calls.unwrap().per_message, Some(1.0));
}

#[test]
fn hello_escapes_and_their_errors() {
    use super::framing::unescape;
    assert_eq!(
        unescape("SUB x\\r\\n\\x00é").unwrap(),
        b"SUB x\r\n\x00\xc3\xa9"
    );
    assert!(unescape("a\\q")
        .unwrap_err()
        .contains("character 2: unknown escape `\\q`"));
    assert!(unescape("\\x4").unwrap_err().contains("two hex digits"));
    assert!(unescape("ab\\").unwrap_err().contains("character 3"));
}
