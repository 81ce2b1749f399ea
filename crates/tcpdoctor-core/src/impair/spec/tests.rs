use std::time::Duration;

use super::*;
use crate::impair::Probability;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn pct(s: &str) -> Probability {
    Probability::parse_percent(s).unwrap()
}

fn spec(text: &str) -> PathSpec {
    PathSpec::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

#[test]
fn the_issue_examples_parse_to_what_they_say() {
    assert_eq!(spec("wan:15ms"), PathSpec::symmetric(ms(15)));
    assert_eq!(
        spec("15ms"),
        PathSpec::symmetric(ms(15)),
        "the prefix is optional"
    );

    let s = spec("wan:15ms,loss=1%");
    for d in [&s.c2s, &s.s2c] {
        assert_eq!(d.loss, LossModel::Random { rate: pct("1%") });
    }

    let s = spec("wan:c2s=40ms,s2c=5ms");
    assert_eq!(
        (s.c2s.delay, s.s2c.delay, s.base_rtt()),
        (ms(40), ms(5), ms(45))
    );

    let s = spec("wan:15ms,jitter=2ms,seed=7");
    assert_eq!((s.c2s.jitter, s.s2c.jitter, s.seed), (ms(2), ms(2), 7));
    assert!(!s.c2s.reorder);

    let s = spec("wan:15ms,rate=10mbit,queue=256k");
    let want = Some(RateSpec {
        bits_per_sec: 10_000_000,
        queue: 256_000,
    });
    assert_eq!((s.c2s.rate, s.s2c.rate), (want, want));

    let s = spec("wan:15ms,loss=1%:burst=3,mtu=1400");
    assert_eq!(
        s.c2s.loss,
        LossModel::Bursty {
            rate: pct("1%"),
            burst: 3
        }
    );
    assert_eq!(s.mtu, Some(1400));

    let s = spec("wan:15ms,loss=gemodel:1%:25%");
    let ge = LossModel::GilbertElliott {
        p: pct("1%"),
        r: pct("25%"),
        loss_bad: Probability::ONE,
        loss_good: Probability::ZERO,
    };
    assert_eq!(
        s.s2c.loss, ge,
        "netem's defaults: all lost in Bad, none in Good"
    );

    let s = spec("wan:15ms,drop=s2c:9,8,jitter=1ms");
    assert_eq!(
        (s.c2s.drop.clone(), s.s2c.drop.clone()),
        (vec![], vec![8, 9])
    );
    assert_eq!(s.s2c.jitter, ms(1), "an option after the list ends it");
}

#[test]
fn per_direction_options_apply_to_one_side() {
    let s = spec("wan:15ms,loss=c2s:2%,rate=s2c:1mbit,reorder=s2c,jitter=c2s:3ms,jitter=s2c:1ms");
    assert_eq!(s.c2s.loss, LossModel::Random { rate: pct("2%") });
    assert_eq!(s.s2c.loss, LossModel::None);
    assert_eq!(s.c2s.rate, None);
    assert_eq!(
        s.s2c.rate,
        Some(RateSpec {
            bits_per_sec: 1_000_000,
            queue: 65_536
        })
    );
    assert_eq!((s.c2s.reorder, s.s2c.reorder), (false, true));
    assert_eq!((s.c2s.jitter, s.s2c.jitter), (ms(3), ms(1)));
}

#[test]
fn a_rate_always_records_its_queue() {
    assert_eq!(
        spec("wan:15ms,rate=10mbit").to_string(),
        "wan:15ms,rate=10mbit,queue=125KB"
    );
    assert_eq!(
        spec("wan:15ms,rate=1mbit").to_string(),
        "wan:15ms,rate=1mbit,queue=64KiB"
    );
}

#[test]
fn canonical_text_round_trips() {
    for (text, canonical) in [
        ("wan:15ms", "wan:15ms"),
        ("wan: 15ms , loss=1.50% ", "wan:15ms,loss=1.5%,seed=0"),
        ("wan:s2c=5ms,c2s=40ms", "wan:c2s=40ms,s2c=5ms"),
        ("wan:c2s=15ms,s2c=15ms", "wan:15ms"),
        ("wan:1.5ms,jitter=250us,seed=7", "wan:1500us,jitter=250us,seed=7"),
        ("wan:15ms,queue=256k,rate=10mbit", "wan:15ms,rate=10mbit,queue=256KB"),
        ("wan:0,rate=c2s:1.5mbit", "wan:0ms,rate=c2s:1500kbit,queue=c2s:64KiB"),
        ("wan:15ms,drop=s2c:9,8,8", "wan:15ms,drop=s2c:8,9"),
        ("wan:15ms,drop=c2s:3,drop=s2c:3", "wan:15ms,drop=3"),
        ("wan:15ms,loss=1%:burst=4", "wan:15ms,loss=1%:burst=4,seed=0"),
        (
            "wan:15ms,loss=s2c:gemodel:0.5%:30%:90%",
            "wan:15ms,loss=s2c:gemodel:0.5%:30%:90%:0%,seed=0",
        ),
        ("wan:100ms,reorder=c2s,reorder=s2c,mtu=1400,seed=3", "wan:100ms,reorder,mtu=1400,seed=3"),
        (
            "wan:c2s=40ms,s2c=5ms,jitter=c2s:2ms,loss=2%,rate=s2c:10mbit,queue=s2c:1MiB,drop=c2s:1,mtu=9000,seed=18446744073709551615",
            "wan:c2s=40ms,s2c=5ms,jitter=c2s:2ms,loss=2%,rate=s2c:10mbit,queue=s2c:1MiB,drop=c2s:1,mtu=9000,seed=18446744073709551615",
        ),
    ] {
        let s = spec(text);
        assert_eq!(s.to_string(), canonical, "{text}");
        assert_eq!(spec(canonical), s, "{canonical} parses back to the same spec");
        assert_eq!(spec(canonical).to_string(), canonical);
    }
}

#[test]
fn errors_name_the_option_and_how_to_write_it() {
    for (text, want) in [
        ("wan:15ms,loss=1", "loss=1: give a percentage, e.g. loss=1%"),
        ("wan:", "wan:: give the one-way delay, e.g. wan:15ms"),
        ("wan:15", "15: `15` has no unit"),
        ("wan:15ms/2ms", "15ms/2ms: write jitter as jitter=2ms"),
        (
            "wan:c2s=40ms",
            "the server→client delay is missing: add s2c=DELAY",
        ),
        ("wan:loss=1%", "give the one-way delay"),
        (
            "wan:15ms,c2s=5ms",
            "c2s=5ms: the client→server delay is already set by `15ms`",
        ),
        (
            "wan:15ms,loss=1%,loss=s2c:2%",
            "loss=s2c:2%: the server→client loss is already set by `loss=1%`",
        ),
        ("wan:15ms,,loss=1%", "an empty option"),
        (
            "wan:nonsense",
            "nonsense: neither a delay (e.g. 15ms) nor an option (",
        ),
        ("wan:15ms,lossy", "lossy: neither a delay"),
        ("wan:15ms,", "an empty option"),
        (
            "wan:15ms,bogus=1",
            "bogus=1: unknown option (expected one of c2s=",
        ),
        ("wan:15ms,reorder=yes", "reorder=yes: write `reorder`"),
        ("wan:11s", "11s: at most 10s"),
        ("wan:15ms,jitter=2", "jitter=2: `2` has no unit"),
        ("wan:15ms,loss=101%", "loss=101%: `101%` is above 100%"),
        (
            "wan:15ms,loss=1%:burst=0",
            "loss=1%:burst=0: write the mean burst length",
        ),
        (
            "wan:15ms,loss=60%:burst=1",
            "bursts of 1 packets allow at most 50% loss",
        ),
        ("wan:15ms,loss=1%:bursty", "write the mean burst length"),
        ("wan:15ms,loss=gemodel:1%", "write loss=gemodel:P%:R%"),
        (
            "wan:15ms,loss=gemodel:1%:2",
            "loss=gemodel:1%:2: give a percentage, e.g. loss=gemodel:1%:25%",
        ),
        ("wan:15ms,rate=10", "rate=10: unknown unit"),
        ("wan:15ms,rate=10bit", "at least 1kbit"),
        (
            "wan:15ms,queue=256k",
            "queue=256k: the client→server side has no rate=",
        ),
        (
            "wan:15ms,rate=c2s:1mbit,queue=256k",
            "queue=256k: the server→client side has no rate=",
        ),
        (
            "wan:15ms,rate=1mbit,queue=1k",
            "queue=1k: the queue must hold 1500 bytes",
        ),
        (
            "wan:15ms,drop=0",
            "drop=0: give packet numbers counted from 1",
        ),
        (
            "wan:15ms,drop=8,x",
            "x: neither a delay (e.g. 15ms) nor an option",
        ),
        ("wan:15ms,drop=c2s", "drop=c2s: give packet numbers"),
        (
            "wan:15ms,mtu=100",
            "mtu=100: give the MTU in bytes, 576 to 65535",
        ),
        ("wan:15ms,seed=-1", "seed=-1: give a whole number"),
        (
            "wan:15ms,mtu=1400,mtu=1500",
            "mtu=1500: the mtu is already set by `mtu=1400`",
        ),
    ] {
        let e = PathSpec::parse(text).expect_err(text).to_string();
        assert!(e.contains(want), "{text}: {e}");
    }
}

#[test]
fn a_scenario_list_splits_around_path_definitions() {
    let list =
        "direct,wan:c2s=40ms,s2c=5ms,drop=s2c:8,9,reorder,proxy,wan:15ms,loss=1%,proxy-delay:15ms";
    let mut items: Vec<String> = Vec::new();
    for tok in list.split(',') {
        match items.last_mut() {
            Some(last) if last.starts_with("wan:") && PathSpec::continues(tok) => {
                last.push(',');
                last.push_str(tok);
            }
            _ => items.push(tok.to_string()),
        }
    }
    assert_eq!(
        items,
        [
            "direct",
            "wan:c2s=40ms,s2c=5ms,drop=s2c:8,9,reorder",
            "proxy",
            "wan:15ms,loss=1%",
            "proxy-delay:15ms"
        ]
    );
    assert_eq!(spec(&items[1]).s2c.drop, vec![8, 9]);
}

#[test]
fn what_needs_the_line_to_work_per_packet() {
    assert!(!spec("wan:15ms").needs_per_packet());
    assert!(!spec("wan:c2s=40ms,s2c=5ms,seed=3").needs_per_packet());
    for text in [
        "wan:15ms,mtu=1400",
        "wan:15ms,loss=s2c:1%",
        "wan:15ms,drop=c2s:4",
        "wan:0,rate=1gbit",
        "wan:1ms,jitter=1us",
    ] {
        assert!(spec(text).needs_per_packet(), "{text}");
    }
}

#[test]
fn seeds_differ_per_direction_and_per_impairment() {
    let s = spec("wan:15ms,seed=7");
    let (a, b) = (
        s.seeds(Direction::ClientToServer),
        s.seeds(Direction::ServerToClient),
    );
    let all = [a.loss, a.jitter, b.loss, b.jitter];
    for i in 0..4 {
        for j in i + 1..4 {
            assert_ne!(all[i], all[j]);
        }
    }
    assert_eq!(spec("wan:15ms,seed=7").seeds(Direction::ClientToServer), a);
    assert_ne!(spec("wan:15ms,seed=8").seeds(Direction::ClientToServer), a);
}

#[test]
fn hostile_input_never_panics() {
    let pieces = [
        "wan:",
        "15ms",
        ",",
        "=",
        ":",
        "%",
        "c2s",
        "s2c",
        "loss",
        "drop",
        "gemodel",
        "burst",
        "9",
        "é",
        "µs",
        "99999999999999999999",
        ".",
        "1%",
        "jitter=1ms",
        "rate=1mbit",
        "queue=",
        "reorder",
        "mtu=",
        "1500",
    ];
    let mut rng = crate::impair::SplitMix64::new(1);
    let mut parsed = 0;
    for _ in 0..20_000 {
        let n = (rng.next_u64() % 8) as usize;
        let text: String = (0..n)
            .map(|_| pieces[(rng.next_u64() % pieces.len() as u64) as usize])
            .collect();
        if let Ok(s) = PathSpec::parse(&text) {
            assert_eq!(spec(&s.to_string()), s, "{text} → {s}");
            parsed += 1;
        }
    }
    assert!(parsed > 100, "the round trip was exercised: {parsed}");
}

/// docs/wan.md's "Path definition" says what the parser does: its examples parse, its
/// canonical-form table is what Display prints, its error lines are what users see.
#[test]
fn the_docs_examples_hold() {
    let doc = include_str!("../../../../../docs/wan.md");
    let section = &doc[doc.find("## Path definition").unwrap()..];
    let cells = |line: &str| -> Vec<String> {
        line.split('|')
            .map(|c| c.trim().trim_matches('`').to_string())
            .collect()
    };
    let (mut examples, mut canonical, mut errors) = (0, 0, 0);
    for line in section.lines() {
        let c = cells(line);
        if line.starts_with("| `wan:") && c.len() == 4 {
            let typed = spec(&c[1]);
            if c[2].starts_with("wan:") {
                assert_eq!(typed.to_string(), c[2], "{line}");
                canonical += 1;
            } else {
                examples += 1;
            }
        }
        if let Some((text, message)) = line.split_once(" → ").filter(|_| line.starts_with("wan:"))
        {
            let e = PathSpec::parse(text.trim()).expect_err(text).to_string();
            let shown = message.trim().trim_start_matches('…').trim_end_matches('…');
            let shown = shown.trim_end_matches([',', ' ']);
            assert!(
                e.contains(shown),
                "{text}: doc says {message:?}, parser says {e:?}"
            );
            errors += 1;
        }
    }
    assert_eq!((examples, canonical, errors), (9, 6, 6));
}
