use std::collections::BTreeMap;

use super::*;

fn run(round: u32, side: Side, v: Option<f64>) -> RunRecord {
    let mut figures = BTreeMap::new();
    if let Some(v) = v {
        figures.insert("wall".to_string(), v);
    }
    RunRecord {
        round,
        side,
        warmup: false,
        outcome: if v.is_some() {
            Outcome::Ok
        } else {
            Outcome::Hang {
                after_s: 5.0,
                sockets: Vec::new(),
            }
        },
        wall_s: v.unwrap_or(5.0),
        figures,
    }
}

fn spec(better: Better) -> FigureSpec {
    FigureSpec {
        name: "wall".into(),
        better,
        unit: Some("s".into()),
    }
}

/// Rounds with A = a[i], B = b[i].
fn rounds(a: &[f64], b: &[f64]) -> Vec<RunRecord> {
    let mut out = Vec::new();
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        out.push(run(i as u32 + 1, Side::A, Some(*x)));
        out.push(run(i as u32 + 1, Side::B, Some(*y)));
    }
    out
}

#[test]
fn the_order_alternates_which_side_goes_first() {
    let o = order(4, 1);
    let letters: Vec<&str> = o.iter().map(|s| s.side.letter()).collect();
    assert_eq!(letters, ["A", "B", "A", "B", "B", "A", "A", "B", "B", "A"]);
    assert!(o[0].warmup && o[1].warmup && !o[2].warmup);
    assert_eq!(describe_order(&o), "warm-up A B · A B B A A B B A");
}

#[test]
fn t_quantiles_match_the_tables() {
    // Two-sided 95 % and 99 % (p = 0.975, 0.995), from published t tables.
    for (p, df, want, tol) in [
        (0.975, 1, 12.706, 0.001),
        (0.975, 2, 4.303, 0.001),
        (0.975, 5, 2.571, 0.01),
        (0.975, 9, 2.262, 0.005),
        (0.995, 9, 3.250, 0.02),
        (0.995, 29, 2.756, 0.005),
        (0.975, 1000, 1.962, 0.002),
    ] {
        let t = student_t_quantile(p, df);
        assert!(
            (t - want).abs() <= tol * want.max(1.0),
            "t({p}, {df}) = {t}, want {want}"
        );
        assert!(
            t >= want - 1e-3,
            "never narrower than the table: t({p}, {df}) = {t}"
        );
    }
}

#[test]
fn identical_sides_are_no_difference_and_a_real_factor_is_a_verdict_both_ways() {
    let a = [1.00, 1.04, 0.97, 1.02, 0.99, 1.03, 0.98, 1.01];
    let same = [1.01, 1.02, 0.99, 1.03, 0.98, 1.02, 0.99, 1.00];
    let f = compare_figure(&spec(Better::Lower), &rounds(&a, &same), 0.99, 0.05);
    assert_eq!(f.verdict, Verdict::NoDifference, "{f:?}");
    let [lo, hi] = f.ci.expect("an interval");
    assert!(lo < 1.0 && hi > 1.0);
    assert_eq!(f.pairs, 8);

    let slow: Vec<f64> = a
        .iter()
        .zip(same)
        .map(|(x, y)| 1.3 * (x + y) / 2.0)
        .collect();
    let f = compare_figure(&spec(Better::Lower), &rounds(&a, &slow), 0.99, 0.05);
    assert_eq!(f.verdict, Verdict::Slower, "{f:?}");
    let [lo, hi] = f.ci.expect("an interval");
    let r = f.ratio.expect("a ratio");
    assert!(
        lo > 1.0 && lo <= r && r <= hi && (r - 1.3).abs() < 0.05,
        "{f:?}"
    );
    // The same numbers as a rate: B higher is B faster.
    let f = compare_figure(&spec(Better::Higher), &rounds(&a, &slow), 0.99, 0.05);
    assert_eq!(f.verdict, Verdict::Faster);
    // Swapping the sides gives the reciprocal interval.
    let g = compare_figure(&spec(Better::Lower), &rounds(&slow, &a), 0.99, 0.05);
    let [glo, ghi] = g.ci.expect("an interval");
    assert!((glo * hi - 1.0).abs() < 1e-9 && (ghi * lo - 1.0).abs() < 1e-9);
    assert_eq!(g.verdict, Verdict::Faster);
}

#[test]
fn hung_runs_drop_their_round_and_too_few_rounds_are_not_compared() {
    let mut runs = rounds(&[1.0, 1.0, 1.0], &[1.1, 1.1, 1.1]);
    runs[3] = run(2, Side::B, None);
    let f = compare_figure(&spec(Better::Lower), &runs, 0.99, 0.05);
    assert_eq!(f.pairs, 2);
    assert_eq!(f.verdict, Verdict::NotCompared);
    assert!(f.ci.is_none() && f.notes[0].contains("needs 3"));
    assert_eq!(count_hangs(&runs), Hangs { a: 0, b: 1 });
    let (result, reasons) = gate(&[f], &runs, Some(1.0), 0.99);
    assert_eq!(result, GateResult::Failed);
    assert!(reasons.iter().any(|r| r.contains("not compared")));
    assert!(
        reasons
            .iter()
            .any(|r| r == "B hung in 1 of 3 measured run(s)"),
        "{reasons:?}"
    );
}

#[test]
fn a_wide_spread_says_how_many_rounds_would_do() {
    let a = [1.0, 1.0, 1.0, 1.0];
    let b = [0.8, 1.25, 0.9, 1.15];
    let f = compare_figure(&spec(Better::Lower), &rounds(&a, &b), 0.99, 0.05);
    assert_eq!(f.verdict, Verdict::NoDifference);
    let n = f.rounds_needed.expect("rounds needed");
    assert!(n > 4, "{f:?}");
    assert!(f.notes.iter().any(|x| x.contains("rounds would show")));
}

#[test]
fn the_gate_passes_only_what_it_measured_and_fails_a_slowdown_beyond_its_ratio() {
    let a = [1.00, 1.04, 0.97, 1.02, 0.99];
    let b: Vec<f64> = a.iter().map(|x| x * 1.2).collect();
    let f = compare_figure(&spec(Better::Lower), &rounds(&a, &b), 0.99, 0.05);
    assert_eq!(f.verdict, Verdict::Slower);
    let (r, _) = gate(std::slice::from_ref(&f), &[], Some(1.0), 0.99);
    assert_eq!(r, GateResult::Failed);
    let (r, why) = gate(std::slice::from_ref(&f), &[], Some(1.5), 0.99);
    assert_eq!(r, GateResult::Passed, "{why:?}");
    let (r, _) = gate(&[f], &[], None, 0.99);
    assert_eq!(r, GateResult::NotGated);
}

#[test]
fn the_gate_fails_when_a_side_failed_a_measured_run_even_with_enough_pairs() {
    let a = [1.00, 1.04, 0.97, 1.02, 0.99];
    let mut runs = rounds(&a, &a);
    runs.push(RunRecord {
        round: 6,
        side: Side::B,
        warmup: false,
        outcome: Outcome::Failed {
            reason: "exit status: 1".into(),
        },
        wall_s: 0.1,
        figures: BTreeMap::new(),
    });
    runs.push(run(6, Side::A, Some(1.0)));
    let f = compare_figure(&spec(Better::Lower), &runs, 0.99, 0.05);
    assert_eq!(f.verdict, Verdict::NoDifference);
    let (r, reasons) = gate(&[f], &runs, Some(1.0), 0.99);
    assert_eq!(r, GateResult::Failed);
    assert_eq!(reasons, ["B failed in 1 of 6 measured run(s)"]);
}

#[test]
fn a_side_with_no_analysed_run_differs_in_nothing_and_says_so() {
    let mut a = SideFindings::new(Side::A, "request");
    a.add("a.pcap", &[], 1, 10, 28);
    let b = SideFindings::new(Side::B, "request");
    let why = Why::of(Some("direct".into()), a, b);
    assert!(why.differences.is_empty());
    let report = AbReport {
        schema_version: AB_SCHEMA_VERSION,
        tool: crate::report::ToolInfo::current(),
        command: "ab".into(),
        settings: AbSettings {
            mode: "server".into(),
            a: "a".into(),
            b: "b".into(),
            rounds: 1,
            warmup: 0,
            order: "A B".into(),
            confidence: 0.99,
            resolution: 0.05,
            hang_after_s: 3.0,
            method: "m".into(),
        },
        figures: Vec::new(),
        hangs: Hangs { a: 0, b: 1 },
        runs: Vec::new(),
        why: vec![why],
        stream: None,
        result: GateResult::NotGated,
        reasons: Vec::new(),
        warnings: Vec::new(),
    };
    let text = render_text(&report);
    assert!(text.contains("  B: not analysed\n"), "{text}");
    assert!(
        text.contains("not compared: no run of B was analysed"),
        "{text}"
    );
    assert!(!text.contains("no difference in the findings"), "{text}");
}
