use super::*;

const S: u64 = 1_000_000_000;

fn sample(busy_us: u64, sndbuf_us: u64, retrans: u32, sent: u64) -> TcpSample {
    TcpSample {
        state: TCP_ESTABLISHED,
        busy_us,
        sndbuf_limited_us: sndbuf_us,
        total_retrans: retrans,
        bytes_sent: sent,
        ..TcpSample::default()
    }
}

fn socket(inode: u64, process: &str, port: u16, state: u8, s: Option<TcpSample>) -> SocketSeen {
    SocketSeen {
        inode,
        cookie: inode,
        process: Some(process.to_owned()),
        state,
        local: SocketAddr::from(([127, 0, 0, 1], port)),
        remote: SocketAddr::from(([127, 0, 0, 1], 40000)),
        sample: s,
    }
}

fn listener(inode: u64, process: &str, port: u16) -> SocketSeen {
    socket(inode, process, port, TCP_LISTEN, None)
}

fn conn(inode: u64, process: &str, port: u16, s: TcpSample) -> SocketSeen {
    socket(inode, process, port, TCP_ESTABLISHED, Some(s))
}

fn totals<'a>(l: &'a Ledger, process: &str, port: Port) -> &'a Totals {
    l.series()
        .find(|(k, _)| k.process == process && k.port == port)
        .map(|(_, t)| t)
        .unwrap_or_else(|| panic!("no series {process} {port:?}"))
}

#[test]
fn counters_grow_by_what_each_socket_added_since_its_last_sample() {
    let mut l = Ledger::new(MAX_SERIES);
    // At the first sample, what the sockets had counted before the exporter began is not its.
    l.observe(
        0,
        &[
            listener(1, "srv", 6379),
            conn(2, "srv", 6379, sample(500, 100, 3, 1000)),
        ],
    );
    let t = totals(&l, "srv", Port::Listen(6379));
    assert_eq!((t.busy_us, t.sndbuf_limited_us, t.opened), (0, 0, 0));
    assert_eq!(t.established, 1);
    l.observe(
        5 * S,
        &[
            listener(1, "srv", 6379),
            conn(2, "srv", 6379, sample(800, 150, 4, 3000)),
            // Opened since: everything it counted is new.
            conn(3, "srv", 6379, sample(70, 0, 1, 10)),
        ],
    );
    let t = totals(&l, "srv", Port::Listen(6379));
    assert_eq!(t.busy_us, 300 + 70);
    assert_eq!(t.sndbuf_limited_us, 50);
    assert_eq!(t.retransmitted_segments, 1 + 1);
    assert_eq!(t.bytes_sent, 2000 + 10);
    assert_eq!((t.opened, t.established), (1, 2));
    // Socket 2 closed: nothing is taken back, and the gauge follows.
    l.observe(
        10 * S,
        &[
            listener(1, "srv", 6379),
            conn(3, "srv", 6379, sample(90, 0, 1, 10)),
        ],
    );
    let t = totals(&l, "srv", Port::Listen(6379));
    assert_eq!((t.busy_us, t.established), (390, 1));
}

#[test]
fn a_counter_smaller_than_before_is_taken_as_a_new_socket() {
    let mut l = Ledger::new(MAX_SERIES);
    l.observe(0, &[conn(7, "c", 40000, sample(1000, 0, 0, 0))]);
    l.observe(S, &[conn(7, "c", 40000, sample(1500, 0, 0, 0))]);
    l.observe(2 * S, &[conn(7, "c", 40000, sample(200, 0, 0, 0))]);
    assert_eq!(totals(&l, "c", Port::Client).busy_us, 500 + 200);
}

#[test]
fn a_new_socket_on_a_reused_inode_is_told_by_its_cookie_even_when_its_counters_are_higher() {
    let mut l = Ledger::new(MAX_SERIES);
    l.observe(0, &[conn(7, "c", 40000, sample(1000, 0, 0, 100))]);
    // Closed between samples; a new connection got inode 7 and already counted more.
    let mut new = conn(7, "c", 40000, sample(1800, 0, 0, 900));
    new.cookie = 8;
    l.observe(S, &[new]);
    let t = totals(&l, "c", Port::Client);
    assert_eq!((t.busy_us, t.bytes_sent, t.opened), (1800, 900, 1));
}

#[test]
fn connections_on_a_listening_port_are_that_port_others_are_client() {
    let mut l = Ledger::new(MAX_SERIES);
    let seen = [
        listener(1, "api", 8080),
        conn(2, "api", 8080, sample(1, 0, 0, 0)),
        // The same process's connection to its database.
        conn(3, "api", 51234, sample(1, 0, 0, 0)),
        // Another process on the same port number, which it does not listen on.
        conn(4, "curl", 8080, sample(1, 0, 0, 0)),
    ];
    l.observe(0, &seen);
    let keys: Vec<(String, Port)> = l
        .series()
        .map(|(k, _)| (k.process.clone(), k.port.clone()))
        .collect();
    assert_eq!(
        keys,
        [
            ("api".to_owned(), Port::Listen(8080)),
            ("api".to_owned(), Port::Client),
            ("curl".to_owned(), Port::Client),
        ]
    );
}

#[test]
fn a_socket_placed_late_is_counted_from_its_first_sample_not_from_zero() {
    let mut l = Ledger::new(MAX_SERIES);
    l.observe(0, &[conn(5, "srv", 9, sample(0, 0, 0, 0))]);
    let mut unplaced = conn(6, "srv", 9, sample(1_000, 0, 0, 5_000));
    unplaced.process = None;
    l.observe(S, &[conn(5, "srv", 9, sample(0, 0, 0, 0)), unplaced]);
    // Its process is told at the next sample: only what it added since is counted.
    l.observe(
        2 * S,
        &[
            conn(5, "srv", 9, sample(0, 0, 0, 0)),
            conn(6, "srv", 9, sample(1_500, 0, 0, 7_000)),
        ],
    );
    let t = totals(&l, "srv", Port::Client);
    assert_eq!((t.busy_us, t.bytes_sent, t.opened), (500, 2_000, 0));
}

#[test]
fn series_are_capped_and_what_was_left_out_is_counted() {
    let mut l = Ledger::new(2);
    let seen: Vec<SocketSeen> = (0..5)
        .map(|i| conn(i, &format!("p{i}"), 1000, sample(1, 0, 0, 0)))
        .collect();
    l.observe(0, &seen);
    assert_eq!(l.series().count(), 2);
    assert_eq!(l.health.series_dropped, 3);
}

#[test]
fn a_process_that_went_away_leaves_no_series_behind() {
    let mut l = Ledger::new(MAX_SERIES);
    l.observe(0, &[conn(1, "gone", 1, sample(1, 0, 0, 0))]);
    l.observe(S, &[conn(2, "stays", 1, sample(1, 0, 0, 0))]);
    assert_eq!(l.series().count(), 2, "kept while recent");
    l.observe(
        SERIES_IDLE_NS + S,
        &[conn(2, "stays", 1, sample(1, 0, 0, 0))],
    );
    let names: Vec<&str> = l.series().map(|(k, _)| k.process.as_str()).collect();
    assert_eq!(names, ["stays"]);
    assert_eq!(l.health.series_expired, 1);
}

#[test]
fn a_shorter_idle_time_expires_sooner_and_a_process_back_starts_from_zero() {
    let mut l = Ledger::new(MAX_SERIES).with_series_idle(2 * S);
    l.observe(0, &[conn(1, "svc", 80, sample(10, 0, 0, 0))]);
    l.observe(S, &[conn(1, "svc", 80, sample(900, 0, 0, 5_000))]);
    assert_eq!(totals(&l, "svc", Port::Client).bytes_sent, 5_000);
    // Gone for 1 s: kept; for 2 s: removed.
    l.observe(2 * S, &[]);
    assert_eq!(l.series().count(), 1, "kept while within the idle time");
    l.observe(3 * S, &[]);
    assert_eq!((l.series().count(), l.health.series_expired), (0, 1));
    // Back with a new socket: its series starts again from what that socket counted.
    l.observe(4 * S, &[conn(7, "svc", 80, sample(300, 0, 0, 700))]);
    let t = totals(&l, "svc", Port::Client);
    assert_eq!((t.busy_us, t.bytes_sent, t.opened), (300, 700, 1));
}

#[test]
fn unattributed_sockets_are_counted_not_exported() {
    let mut l = Ledger::new(MAX_SERIES);
    let mut other = conn(9, "x", 22, sample(1, 0, 0, 0));
    other.process = None;
    // TIME_WAIT: no inode, no process, and nobody's to attribute.
    let mut time_wait = other.clone();
    time_wait.inode = 0;
    l.observe(0, &[other, time_wait]);
    assert_eq!((l.series().count(), l.health.unattributed), (0, 1));
    assert_eq!(l.health.sockets, 2);
}

#[test]
fn the_exposition_has_help_type_units_and_escaped_labels() {
    let mut l = Ledger::new(MAX_SERIES);
    l.observe(
        0,
        &[
            listener(1, "we\"ird\\na\nme", 80),
            conn(2, "we\"ird\\na\nme", 80, sample(0, 0, 0, 0)),
        ],
    );
    l.observe(
        S,
        &[
            listener(1, "we\"ird\\na\nme", 80),
            conn(2, "we\"ird\\na\nme", 80, sample(2_500_000, 1_000_000, 2, 0)),
        ],
    );
    let text = render(&l, "1.2.3");
    assert!(text.contains("# TYPE tcpdoctor_tcp_send_buffer_limited_seconds_total counter\n"));
    assert!(text.contains(
        "tcpdoctor_tcp_busy_seconds_total{process=\"we\\\"ird\\\\na\\nme\",port=\"80\"} 2.5\n"
    ));
    assert!(text.contains(
        "tcpdoctor_tcp_send_buffer_limited_seconds_total{process=\"we\\\"ird\\\\na\\nme\",port=\"80\"} 1\n"
    ));
    assert!(text.contains("tcpdoctor_build_info{version=\"1.2.3\"} 1\n"));
    assert!(text.contains("tcpdoctor_watch_samples_total 2\n"));
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let name = line.split(['{', ' ']).next().unwrap_or_default();
        assert!(
            text.contains(&format!("# HELP {name} ")) && text.contains(&format!("# TYPE {name} ")),
            "{name} has HELP and TYPE"
        );
    }
}

#[test]
fn retransmission_timeouts_are_counted_where_the_kernel_reports_them_and_absent_elsewhere() {
    let rto = |n: Option<u32>| TcpSample {
        total_rto: n,
        ..sample(0, 0, 0, 0)
    };
    let mut l = Ledger::new(MAX_SERIES);
    l.observe(
        0,
        &[
            listener(1, "new", 80),
            conn(2, "new", 80, rto(Some(2))),
            listener(3, "old", 81),
            conn(4, "old", 81, rto(None)),
        ],
    );
    l.observe(
        S,
        &[
            listener(1, "new", 80),
            conn(2, "new", 80, rto(Some(5))),
            // Opened since, with one timeout already (its SYN's): all of it is new.
            conn(5, "new", 80, rto(Some(1))),
            listener(3, "old", 81),
            conn(4, "old", 81, rto(None)),
        ],
    );
    assert_eq!(
        totals(&l, "new", Port::Listen(80)).retransmission_timeouts,
        Some(3 + 1)
    );
    assert_eq!(
        totals(&l, "old", Port::Listen(81)).retransmission_timeouts,
        None
    );
    let text = render(&l, "1");
    assert!(text.contains("# TYPE tcpdoctor_tcp_retransmission_timeouts_total counter\n"));
    assert!(text
        .contains("tcpdoctor_tcp_retransmission_timeouts_total{process=\"new\",port=\"80\"} 4\n"));
    assert!(
        !text.contains("tcpdoctor_tcp_retransmission_timeouts_total{process=\"old\""),
        "{text}"
    );
}
