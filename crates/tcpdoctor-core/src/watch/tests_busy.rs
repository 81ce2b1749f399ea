//! `busy_poll` in `watch` ([`super::busy`]): candidates by traffic, CPU read in stages,
//! inspect's rule over the interval between two walks.

use std::collections::BTreeSet;

use super::*;
use crate::inspect::ProcessCounters;

const S: u64 = 1_000_000_000;
/// Per process: its PID, name, port, connection inode.
const SPIN: (u32, &str, u16, u64) = (10, "spin", 80, 101);
const CALM: (u32, &str, u16, u64) = (20, "calm", 81, 201);

fn socket(inode: u64, process: &str, port: u16, state: u8, s: Option<TcpSample>) -> SocketSeen {
    SocketSeen {
        inode,
        cookie: inode,
        process: Some(process.to_owned()),
        state,
        local: SocketAddr::from(([127, 0, 0, 1], port)),
        remote: SocketAddr::from(([127, 0, 0, 1], 40000 + port)),
        sample: s,
    }
}

/// Both servers at second `t`: each answered 10 requests a second since it began.
fn host(t: u64) -> Vec<SocketSeen> {
    let mut v = Vec::new();
    for (_, name, port, inode) in [SPIN, CALM] {
        v.push(socket(inode - 100, name, port, TCP_LISTEN, None));
        let s = TcpSample {
            at_ns: t * S,
            state: TCP_ESTABLISHED,
            data_segs_in: 10 * t as u32,
            data_segs_out: 10 * t as u32,
            ..TcpSample::default()
        };
        v.push(socket(inode, name, port, TCP_ESTABLISHED, Some(s)));
    }
    v
}

fn pid_of(inode: u64) -> Option<u32> {
    match inode {
        101 => Some(SPIN.0),
        201 => Some(CALM.0),
        _ => None,
    }
}

/// What the shell reads of a process at second `t`: the spinner burns 90% of a core, 80% of
/// it in the kernel, and sleeps 5 times a second; the calm one 1% and sleeps 20 times.
fn counters(pid: u32, t: u64) -> (u64, ProcessCounters) {
    let (cpu_ms, sleeps) = if pid == SPIN.0 { (900, 5) } else { (10, 20) };
    let cpu_ns = t * cpu_ms * 1_000_000;
    let ticks = cpu_ns / 10_000_000;
    let c = ProcessCounters {
        at_ns: t * S,
        cpu_ns,
        user_ticks: Some(ticks / 5),
        system_ticks: Some(ticks - ticks / 5),
        voluntary_ctxt_switches: t * sleeps,
        nonvoluntary_ctxt_switches: 0,
        syscr: None,
        syscw: None,
    };
    (cpu_ns, c)
}

/// One host sample: ledger, busy's stages as the shell runs them, kinds. Returns the PIDs walked.
fn tick(l: &mut Ledger, k: &mut Kinds, b: &mut Busy, t: u64, threads: &[u32]) -> Vec<u32> {
    let seen = host(t);
    l.observe(t * S, &seen);
    let mut walked = Vec::new();
    for pid in b.candidates(k, &seen, pid_of) {
        let (cpu_ns, c) = counters(pid, t);
        if b.cpu(pid, t * S, cpu_ns) {
            b.walked(pid, c, threads.iter().copied().collect::<BTreeSet<u32>>());
            walked.push(pid);
        }
    }
    b.conclude(l);
    k.conclude(&seen, l);
    walked
}

fn busy(l: &Ledger, name: &str, port: u16) -> Option<KindTotals> {
    l.series()
        .find(|(key, _)| key.process == name && key.port == Port::Listen(port))
        .and_then(|(_, t)| t.kinds.get(&FindingKind::BusyPoll).cloned())
}

#[test]
fn a_spinning_process_is_walked_then_named_and_a_calm_one_is_never_walked() {
    let (mut l, mut k, mut b) = (Ledger::new(MAX_SERIES), Kinds::default(), Busy::default());
    // First sample: no interval yet. Second: one CPU read each, nothing to compare with.
    assert!(tick(&mut l, &mut k, &mut b, 0, &[10]).is_empty());
    assert!(tick(&mut l, &mut k, &mut b, 1, &[10]).is_empty());
    // Third: the spinner's CPU per segment is far over budget, so it is walked; the calm one
    // (10 ms for 20 segments, under 10 × 100 µs each) is not.
    assert_eq!(tick(&mut l, &mut k, &mut b, 2, &[10]), vec![SPIN.0]);
    assert!(
        busy(&l, "spin", 80).is_none(),
        "one walk is not an interval"
    );
    // Fourth: walked at both ends, the rule runs.
    assert_eq!(tick(&mut l, &mut k, &mut b, 3, &[10]), vec![SPIN.0]);
    let spin = busy(&l, "spin", 80).expect("busy_poll on the spinner's series");
    // 0.9 s of CPU against a budget of 20 segments × 100 µs.
    assert!((spin.lost_seconds - 0.898).abs() < 1e-6, "{spin:?}");
    assert_eq!(spin.sockets, 1);
    assert!(busy(&l, "calm", 81).is_none());
    let text = render(&l, "1");
    assert!(
        text.contains(
            "tcpdoctor_finding_lost_seconds_total{kind=\"busy_poll\",process=\"spin\",port=\"80\"}"
        ),
        "{text}"
    );
    assert!(
        !text.contains("kind=\"busy_poll\",process=\"calm\""),
        "{text}"
    );
}

#[test]
fn a_thread_that_exited_between_walks_leaves_the_sleeps_unknown_and_nothing_is_named() {
    let (mut l, mut k, mut b) = (Ledger::new(MAX_SERIES), Kinds::default(), Busy::default());
    for t in 0..3 {
        tick(&mut l, &mut k, &mut b, t, &[10, 11]);
    }
    // Thread 11 is gone at the next walk: its switches went with it.
    assert_eq!(tick(&mut l, &mut k, &mut b, 3, &[10]), vec![SPIN.0]);
    assert!(busy(&l, "spin", 80).is_none());
    // The interval after that has the same threads at both ends: judged.
    tick(&mut l, &mut k, &mut b, 4, &[10]);
    assert!(busy(&l, "spin", 80).is_some());
}
