//! One run: start every connection, watch them, stop them, hand the measurements over.
//!
//! The watcher wakes every 100 ms: it draws the progress line and declares the run hung when
//! no exchange has completed for `--hang-after` — it then stops and aborts the connections
//! instead of waiting for them, so a wedged server costs `--hang-after`, not forever.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tcpdoctor_core::bench::{Outcome, RunMeasurements};
use tcpdoctor_core::units::fmt_duration;
use tcpdoctor_core::Timestamp;
use tokio::task::JoinSet;

use super::conn::Stream;
use super::cpu::{helpers_cpu, CpuTimes};
use super::progress::Progress;
use super::recorder::{Clock, Recorder};
use super::{conn, BenchConfig, Bound, Unreachable};

const TICK: Duration = Duration::from_millis(100);

/// Run number `run_no`; `first` is an already made connection for connection 0. Ctrl-C ends
/// the run at once with what was measured (outcome `interrupted`). A setup (a login) that
/// fails [`super::recorder::MAX_SETUP_FAILURES`] times in a row ends it with that error (the command exits 2).
pub async fn one(
    cfg: Arc<BenchConfig>,
    run_no: u64,
    mut first: Option<Stream>,
) -> Result<RunMeasurements, Unreachable> {
    let clock = Clock::start();
    let measure_from = Timestamp::ZERO.plus(cfg.warmup);
    let (requests, stop_at) = match cfg.bound {
        Bound::Requests(n) => (Some(n), None),
        Bound::Duration(d) => (None, Some(measure_from.plus(d))),
    };
    let rec = Arc::new(Recorder::new(
        clock,
        measure_from,
        stop_at,
        requests,
        cfg.script.step_names().len(),
        cfg.threads * 2,
    ));
    // Spin marks left by an earlier run's tasks are not this run's (`crate::spin` rule 4).
    crate::spin::new_epoch();
    let cpu_before = CpuTimes::now();
    let helpers_before = helpers_cpu();
    let mut tasks = JoinSet::new();
    for id in 0..cfg.connections {
        let sink = rec.clone();
        tasks.spawn(crate::spin::settled(
            conn::run(cfg.clone(), rec.clone(), id, first.take()),
            move |d| {
                sink.spin_ns
                    .fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
            },
        ));
    }
    let label = if cfg.repeat > 1 {
        format!("run {run_no}/{}", cfg.repeat)
    } else {
        "bench".to_string()
    };
    let mut progress = Progress::new(cfg.progress);
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // An open loop slower than --hang-after between a connection's slots is not a hang.
    let hang_after = match cfg.rate {
        Some(r) => cfg
            .hang_after
            .max(Duration::from_secs_f64(2.0 * cfg.connections as f64 / r)),
        None => cfg.hang_after,
    };
    let (mut seen, mut seen_at) = (0u64, clock.now());
    let mut hung = false;
    let mut gone = false;
    let mut interrupted = false;
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        tokio::select! {
            _ = &mut ctrl_c, if !interrupted && !hung => {
                interrupted = true;
                rec.stop();
                tasks.abort_all();
            }
            r = tasks.join_next() => {
                if r.is_none() {
                    break;
                }
            }
            _ = tick.tick() => {
                let now = clock.now();
                if rec.is_stopped() && rec.refused().is_some() {
                    tasks.abort_all();
                }
                let done = rec.completed.load(Ordering::Relaxed);
                if done != seen {
                    (seen, seen_at) = (done, now);
                } else if !hung && now.since(seen_at) >= hang_after {
                    hung = true;
                    rec.stop();
                    tasks.abort_all();
                }
                // A stop signal that came before `ctrl_c` above was listening (`run` and
                // `demo` install their handler first, and it kills `run`'s server).
                if !interrupted && !hung && crate::capture::stop::interrupted() {
                    interrupted = true;
                    rec.stop();
                    tasks.abort_all();
                }
                if !interrupted && !hung && cfg.watch_pid.is_some_and(crate::procfs::process_gone) {
                    (hung, gone) = (true, true);
                    rec.stop();
                    tasks.abort_all();
                }
                let fraction = match (requests, rec.budget_left(), stop_at) {
                    (Some(n), Some(left), _) if n > 0 => Some((n - left) as f64 / n as f64),
                    (_, _, Some(s)) => Some(now.0 as f64 / s.0.max(1) as f64),
                    _ => None,
                };
                progress.draw(&label, now.since(Timestamp::ZERO), done, fraction);
            }
        }
    }
    progress.clear();
    if let Some(why) = rec.refused() {
        return Err(Unreachable(why));
    }
    // The helpers' window lies inside getrusage's (read after it at the start, before it
    // at the end), so their CPU is not taken over a longer time than the process's.
    let helpers = helpers_cpu().saturating_sub(helpers_before);
    let cpu = CpuTimes::now().since(cpu_before);
    let end = clock.now();
    let last = rec.last_finish();
    let window_end = if hung || interrupted {
        end
    } else {
        match stop_at {
            Some(s) => s.max(last).min(end),
            None => last,
        }
    };
    let (overall, per_step) = rec.histograms();
    let errors = rec.errors().clone();
    let note = if interrupted {
        Some(format!(
            "interrupted (Ctrl-C) after {}",
            fmt_duration(end.since(Timestamp::ZERO))
        ))
    } else if gone {
        Some("the target's process exited: abandoned".to_string())
    } else if hung {
        let mut n = format!(
            "no exchange completed for {}: abandoned",
            fmt_duration(hang_after)
        );
        if let Some(e) = errors.examples.last() {
            n.push_str(&format!(" (last error: {e})"));
        } else if let Some(c) = errors.connect_reasons.first() {
            n.push_str(&format!(" (connect: {})", c.reason));
        }
        Some(n)
    } else if overall.is_empty() {
        Some(match errors.connect_reasons.first() {
            Some(c) => format!("no exchange was measured; connect: {}", c.reason),
            None => "no exchange was measured".to_string(),
        })
    } else {
        None
    };
    Ok(RunMeasurements {
        outcome: if interrupted {
            Some(Outcome::Interrupted)
        } else {
            hung.then_some(Outcome::Hung)
        },
        elapsed: end.since(Timestamp::ZERO),
        measured: window_end.since(measure_from),
        overall,
        per_step,
        errors,
        bytes_sent: rec.bytes_sent.load(Ordering::Relaxed),
        bytes_received: rec.bytes_received.load(Ordering::Relaxed),
        connections_opened: rec.connections_opened.load(Ordering::Relaxed),
        cpu_user: cpu.user,
        cpu_system: cpu.system,
        cpu_spin: Duration::from_nanos(rec.spin_ns.load(Ordering::Relaxed)),
        cpu_helpers: helpers,
        send_lateness: rec.send_lateness(),
        reconnects: rec.reconnects.load(Ordering::Relaxed),
        note,
        port: match &cfg.target {
            crate::proxy::Addr::Tcp(a) => Some(a.port()),
            crate::proxy::Addr::Unix(_) => None,
        },
    })
}
