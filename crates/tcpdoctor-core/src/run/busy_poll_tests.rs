//! The rule on sampled timelines: a spinner named, work, warm-up and timers not.

use super::*;
use crate::run::cpu_samples::{CpuInterval, Phase};
use crate::syscalls::fixtures::{real_work_server, siocoutq_spinner};
use crate::syscalls::{verdict, TraceVerdict};

/// A run of `exchanges` exchanges sampled in 1 ms intervals: per exchange, `work_ms` while the
/// server owed an answer at `work_cpu` of a core, one mixed interval, then `wait_ms` owing
/// nothing, awake `wait_cpu(k)` of the time for exchange k (on a CPU 90% of that).
fn timeline(
    exchanges: u64,
    work_ms: u64,
    work_cpu: f64,
    wait_ms: u64,
    wait_cpu: impl Fn(u64) -> f64,
) -> Vec<CpuInterval> {
    // A thread awake 97% of the time runs 90% of it here (the machine is shared).
    let iv = |share: f64, phase| CpuInterval {
        wall_ns: 1_000_000,
        cpu_ns: (share * 0.9 * 1e6) as u64,
        ready_ns: (share * 0.1 * 1e6) as u64,
        phase,
    };
    let mut v = Vec::new();
    for k in 0..exchanges {
        v.extend((0..work_ms).map(|_| iv(work_cpu, Phase::Working)));
        v.push(iv(0.5, Phase::Mixed));
        v.extend((0..wait_ms).map(|_| iv(wait_cpu(k), Phase::Waiting)));
    }
    v
}

fn judge(intervals: Vec<CpuInterval>, switches: Option<u64>, exchanges: u64) -> Option<Finding> {
    judge_split(intervals, switches, exchanges, 0.7)
}

/// [`judge`] with `system` of the server's CPU in system time.
fn judge_split(
    intervals: Vec<CpuInterval>,
    switches: Option<u64>,
    exchanges: u64,
    system: f64,
) -> Option<Finding> {
    judge_traced(intervals, switches, exchanges, system, None).0
}

/// [`judge_split`] with what the trace says (rule 7), and [`withheld_by_trace`]'s sentence.
fn judge_traced(
    intervals: Vec<CpuInterval>,
    switches: Option<u64>,
    exchanges: u64,
    system: f64,
    trace: Option<&TraceVerdict>,
) -> (Option<Finding>, Option<String>) {
    let samples = CpuSamples {
        intervals,
        voluntary_switches: switches,
        counters: "process CPU clocks every 1 ms".into(),
    };
    let cpu_ns: u64 = samples.intervals.iter().map(|i| i.cpu_ns).sum();
    let wall_ns: u64 = samples.intervals.iter().map(|i| i.wall_ns).sum();
    let cpu_s = cpu_ns as f64 / 1e9;
    let input = BusyPollInput {
        held_for_ack: true,
        server: "127.0.0.1:7000",
        file: "run/busy.pcap",
        cpu: ServerCpu::new(
            cpu_s * (1.0 - system),
            cpu_s * system,
            wall_ns as f64 / 1e9,
            exchanges,
            1,
        ),
        samples: &samples,
        exchanges,
        floor_us: 30.0,
        floor_of: "the driver's own CPU per request",
        cpu_counters: "process CPU clocks of the server's tree",
        floor_counters: "getrusage of the driver",
        mean_ms: 5.0,
        trace,
    };
    (busy_poll(&input), withheld_by_trace(&input))
}

/// Rule 5: the same timeline spent in user space (a server computing until the very end of
/// each held gap, as one does under CPU contention) is not a loop polling its socket; at a
/// CPython spinner's share of system time (26 %) it is.
#[test]
fn cpu_in_user_space_is_computing_not_polling() {
    let spin = || timeline(100, 0, 0.0, 4, |_| 0.97);
    assert!(judge_split(spin(), Some(110), 100, 0.02).is_none());
    assert!(judge_split(spin(), Some(110), 100, 0.26).is_some());
}

#[test]
fn a_server_spinning_while_it_waits_is_named_with_its_measurements() {
    // The demo's spinner: 200 req/s, 5 ms of polling after each answer, ~1 sleep per request.
    let f = judge(timeline(100, 0, 0.0, 4, |_| 0.97), Some(110), 100).expect("named");
    assert_eq!(f.kind, FindingKind::BusyPoll);
    assert_eq!(f.severity, Severity::Critical);
    assert!(
        f.verdict
            .contains("awake while it waits for nothing (97% of that time, 87% of a core"),
        "{}",
        f.verdict
    );
    let facts = f.evidence.facts.join("\n");
    for quoted in [
        "the server was awake (on a CPU or ready for one) 97% of the time — 97% in the first \
         half of that time, 97% in the second (400 ms sampled) — and used 87% of a core, \
         against 0% while it had a request in hand",
        "at least 3492 µs of it while waiting; 1.1 voluntary context switches per request, \
         3175 µs of waiting CPU per switch",
        "the driver's own CPU per request was 30 µs",
        "system time",
    ] {
        assert!(facts.contains(quoted), "{quoted:?} not in:\n{facts}");
    }
    assert_eq!(f.evidence.values["waiting_awake_share"], 0.97);
    assert_eq!(f.evidence.values["waiting_share"], 0.873);
    assert_eq!(f.evidence.counts["voluntary_switches"], 110);
    // No packet shows it: it names the counters it read instead of frames.
    assert!(f.evidence.frames.is_empty());
    assert!(f.evidence.rests_on[0].contains("every 1 ms"));
    assert!((f.time_lost_ms - 349.2).abs() < 1e-6, "{}", f.time_lost_ms);
    // The same with no switch at all (a spinner that never blocks).
    assert!(judge(timeline(100, 0, 0.0, 4, |_| 0.97), Some(0), 100).is_some());
}

#[test]
fn a_server_busy_while_it_works_is_not() {
    // 3 ms of work per request at a full core, idle between requests.
    assert!(judge(timeline(100, 3, 1.0, 4, |_| 0.0), Some(200), 100).is_none());
}

#[test]
fn a_warm_up_that_decays_is_not() {
    // JIT compiler and GC threads busy in the gaps of the first exchanges, then quiet.
    let warm = |k: u64| if k < 30 { 1.2 } else { 0.02 };
    assert!(judge(timeline(100, 1, 1.0, 4, warm), Some(300), 100).is_none());
    // The same CPU spread to the end is a spin.
    assert!(judge(timeline(100, 1, 1.0, 4, |_| 0.6), Some(150), 100).is_some());
}

#[test]
fn timer_wake_ups_are_not() {
    // A reply written row by row on 1 ms timers: ~13 sleeps per request, 5% of a core between.
    assert!(judge(timeline(100, 0, 0.0, 13, |_| 0.05), Some(1300), 100).is_none());
    // Many threads waking often can add up to a core; each wake-up is short and ends in sleep.
    assert!(judge(timeline(100, 0, 0.0, 13, |_| 0.9), Some(13_000), 100).is_none());
}

#[test]
fn too_little_to_judge_says_nothing() {
    // Exchanges back to back: no sampled interval without a request in hand.
    assert!(judge(timeline(100, 0, 0.0, 0, |_| 1.0), Some(5), 100).is_none());
    // Too few exchanges, too little waiting time, switches unknown.
    assert!(judge(timeline(10, 0, 0.0, 5, |_| 1.0), Some(5), 10).is_none());
    assert!(judge(timeline(30, 0, 0.0, 0, |_| 1.0), Some(5), 30).is_none());
    let mut short = timeline(25, 0, 0.0, 0, |_| 1.0);
    short.extend(timeline(1, 0, 0.0, 19, |_| 1.0));
    assert!(judge(short, Some(5), 25).is_none(), "19 ms of waiting");
    assert!(judge(timeline(100, 0, 0.0, 4, |_| 0.97), None, 100).is_none());
    // A spin too short to matter: 50 µs per request.
    let mut v = timeline(400, 1, 0.0, 0, |_| 0.0);
    v.extend(timeline(1, 0, 0.0, 25, |_| 0.8));
    assert!(judge(v, Some(1), 400).is_none());
}

/// Rule 7, named: a traced SIOCOUTQ spinner reads as asleep between its polls (each trapped
/// call stops it, and each stop is a voluntary switch), so its CPU alone would not name it;
/// its calls do, and the finding says which call, how often, per request.
#[test]
fn a_traced_spinner_is_named_by_its_calls() {
    let trace = siocoutq_spinner(100, 200);
    let v = verdict(&trace, 100, Duration::from_secs(2)).expect("the trace says");
    assert!(matches!(v, TraceVerdict::Polling(_)));
    let traced_cpu = || timeline(100, 0, 0.0, 4, |_| 0.3);
    assert!(
        judge_split(traced_cpu(), Some(20_000), 100, 0.5).is_none(),
        "untraced rules on a traced spinner's CPU"
    );
    let (f, withheld) = judge_traced(traced_cpu(), Some(20_000), 100, 0.5, Some(&v));
    let f = f.expect("named by the trace");
    assert!(withheld.is_none());
    assert_eq!(f.kind, FindingKind::BusyPoll);
    assert_eq!(
        f.verdict,
        "the server polls its socket instead of waiting for it: ioctl(SIOCOUTQ) 20,000 times \
         in 2 s, 200 per request, while its send queue was non-empty"
    );
    assert_eq!(f.evidence.counts["polls"], 20_000);
    assert_eq!(f.evidence.values["polls_per_request"], 200.0);
    assert!(f.evidence.rests_on[0].starts_with("system calls of the server's processes"));
    // Rule 1 still holds: too few exchanges to judge.
    let v = verdict(&trace, 10, Duration::from_secs(2)).expect("the trace says");
    assert!(judge_traced(traced_cpu(), Some(2_000), 10, 0.5, Some(&v))
        .0
        .is_none());
}

/// Rule 7, not named: the same CPU as the named spinner of the tests above, but the trace saw
/// every call and the server made three per request — it computed.
#[test]
fn a_traced_server_doing_real_work_is_not_named_whatever_its_cpu() {
    let trace = real_work_server(100, Duration::from_millis(4));
    let wall = trace.ended.since(trace.started);
    let v = verdict(&trace, 100, wall).expect("the trace covered the scenario");
    assert!(matches!(v, TraceVerdict::RealWork(_)));
    let spin = || timeline(100, 0, 0.0, 4, |_| 0.97);
    assert!(
        judge_split(spin(), Some(110), 100, 0.7).is_some(),
        "the CPU alone names it"
    );
    let (f, withheld) = judge_traced(spin(), Some(110), 100, 0.7, Some(&v));
    assert!(f.is_none());
    let why = withheld.expect("said why");
    assert!(
        why.starts_with("busy_poll not named: by its CPU alone the server looked like a spinner"),
        "{why}"
    );
    assert!(
        why.contains("the CPU did not go into polling its sockets"),
        "{why}"
    );
    // CPU that would not have named it anyway: nothing withheld.
    let idle = timeline(100, 3, 1.0, 4, |_| 0.0);
    assert_eq!(
        judge_traced(idle, Some(200), 100, 0.7, Some(&v)),
        (None, None)
    );
    // Untraced, unchanged.
    assert_eq!(
        judge_traced(spin(), Some(110), 100, 0.7, None).1,
        None,
        "nothing withheld without a trace"
    );
}
