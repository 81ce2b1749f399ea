use std::time::Duration;

use super::*;

const C2S: Direction = Direction::ClientToServer;

fn us(v: u64) -> Timestamp {
    Timestamp(v * 1_000)
}

fn path(text: &str) -> OneWayPath {
    OneWayPath::new(&PathSpec::parse(text).unwrap(), C2S)
}

/// Packet `n` (from 1): `len` bytes that differ per packet and per position.
fn packet(n: u32, len: usize) -> Vec<u8> {
    let mut p: Vec<u8> = (0..len).map(|i| (i as u32 * 31 + n * 7) as u8).collect();
    p[..4].copy_from_slice(&n.to_be_bytes());
    p
}

fn number(p: &[u8]) -> u32 {
    u32::from_be_bytes([p[0], p[1], p[2], p[3]])
}

/// A shell on simulated time that wakes `late` after each instant the path asks for:
/// (due, delivered, packet) for every packet delivered.
fn drive(
    p: &mut OneWayPath,
    arrivals: &[(Timestamp, Vec<u8>)],
    late: Duration,
) -> Vec<(Timestamp, Timestamp, Vec<u8>)> {
    let (mut out, mut i, mut now) = (Vec::new(), 0, Timestamp::ZERO);
    for _ in 0..1_000_000 {
        while i < arrivals.len() && arrivals[i].0 <= now {
            p.push(arrivals[i].1.clone(), arrivals[i].0);
            i += 1;
        }
        while let Some((due, packet)) = p.pop_due(now) {
            out.push((due, now, packet));
        }
        let wake = p.next_wakeup().map(|t| t.plus(late));
        now = match (arrivals.get(i).map(|a| a.0), wake) {
            (Some(a), Some(w)) => a.min(w),
            (a, w) => match a.or(w) {
                Some(t) => t,
                None => return out,
            },
        };
    }
    panic!("the path never went idle");
}

fn numbers(out: &[(Timestamp, Timestamp, Vec<u8>)]) -> Vec<u32> {
    out.iter().map(|o| number(&o.2)).collect()
}

#[test]
fn delay_only_delivers_every_packet_bit_exact_in_order_after_the_delay() {
    let mut p = path("wan:15ms");
    let sent: Vec<_> = (1..=1_000u32)
        .map(|n| {
            (
                us(u64::from(n) * 10),
                packet(n, 40 + (n as usize * 37) % 1_400),
            )
        })
        .collect();
    let out = drive(&mut p, &sent, Duration::ZERO);
    assert_eq!(out.len(), sent.len());
    for ((at, pkt), (due, delivered, got)) in sent.iter().zip(&out) {
        assert_eq!(got, pkt, "bit-exact, in order");
        assert_eq!(
            (*due, *delivered),
            (at.plus(Duration::from_millis(15)), *due)
        );
    }
    let c = p.counters();
    assert_eq!(
        (c.packets_in, c.packets_out, c.bytes_in),
        (1_000, 1_000, c.bytes_out)
    );
    assert_eq!((c.in_flight(), p.queued()), (0, 0));
}

#[test]
fn drop_numbers_count_every_packet_even_an_oversized_one() {
    let mut p = path("wan:1ms,mtu=1400,drop=c2s:3,5");
    let sent: Vec<_> = (1..=8u32)
        .map(|n| {
            (
                us(u64::from(n)),
                packet(n, if n == 2 { 1_401 } else { 1_400 }),
            )
        })
        .collect();
    let out = drive(&mut p, &sent, Duration::ZERO);
    assert_eq!(numbers(&out), vec![1, 4, 6, 7, 8]);
    let c = p.counters();
    assert_eq!((c.dropped_mtu, c.dropped_loss, c.dropped_queue), (1, 2, 0));
    // The other direction has no drop list.
    let mut back = OneWayPath::new(
        &PathSpec::parse("wan:1ms,drop=c2s:3,5").unwrap(),
        C2S.reverse(),
    );
    assert_eq!(drive(&mut back, &sent, Duration::ZERO).len(), 8);
}

#[test]
fn the_bottleneck_serialises_before_the_delay_and_a_late_shell_moves_nothing() {
    // 1250 bytes at 10 mbit/s: 1 ms each. Ten at once: the k-th is due k ms + 15 ms.
    let sent: Vec<_> = (1..=10u32).map(|n| (us(0), packet(n, 1_250))).collect();
    let due: Vec<Timestamp> = (1..=10).map(|k| us(k * 1_000 + 15_000)).collect();
    for late in [Duration::ZERO, Duration::from_micros(700)] {
        let mut p = path("wan:15ms,rate=10mbit");
        let out = drive(&mut p, &sent, late);
        assert_eq!(numbers(&out), (1..=10).collect::<Vec<_>>());
        assert_eq!(
            out.iter().map(|o| o.0).collect::<Vec<_>>(),
            due,
            "late by {late:?}"
        );
        assert!(out.iter().all(|o| o.1.since(o.0) <= late));
    }
}

#[test]
fn a_full_queue_drops_arrivals_and_the_rest_arrive_in_order() {
    let mut p = path("wan:5ms,rate=1mbit");
    let sent: Vec<_> = (1..=100u32).map(|n| (us(0), packet(n, 1_500))).collect();
    let out = drive(&mut p, &sent, Duration::ZERO);
    assert_eq!(
        numbers(&out),
        (1..=43).collect::<Vec<_>>(),
        "64 KiB holds 43"
    );
    assert_eq!(p.counters().dropped_queue, 57);
    assert_eq!(p.counters().in_flight(), 0);
}

#[test]
fn jitter_never_reorders_unless_asked() {
    let sent: Vec<_> = (1..=2_000u32)
        .map(|n| (us(u64::from(n) * 100), packet(n, 100)))
        .collect();
    let run = |text: &str| {
        let mut p = path(text);
        drive(&mut p, &sent, Duration::ZERO)
    };
    let kept = run("wan:15ms,jitter=5ms,seed=3");
    assert_eq!(numbers(&kept), (1..=2_000).collect::<Vec<_>>());
    let mixed = run("wan:15ms,jitter=5ms,reorder,seed=3");
    let order = numbers(&mixed);
    assert!(order.windows(2).any(|w| w[1] < w[0]), "reordered");
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (1..=2_000).collect::<Vec<_>>(), "nothing lost");
    for (due, _, pkt) in &mixed {
        let waited = due.since(us(u64::from(number(pkt)) * 100));
        assert!(
            (10_000..=20_000).contains(&(waited.as_micros() as u64)),
            "{waited:?}"
        );
    }
    assert_eq!(
        run("wan:15ms,jitter=5ms,reorder,seed=3"),
        mixed,
        "same seed, same path"
    );
}

#[test]
fn random_loss_is_seeded_per_direction() {
    let sent: Vec<_> = (1..=5_000u32)
        .map(|n| (us(u64::from(n)), packet(n, 60)))
        .collect();
    let run = |text: &str, dir: Direction| {
        let mut p = OneWayPath::new(&PathSpec::parse(text).unwrap(), dir);
        numbers(&drive(&mut p, &sent, Duration::ZERO))
    };
    let a = run("wan:1ms,loss=10%,seed=7", C2S);
    assert!((4_350..=4_650).contains(&a.len()), "{}", a.len());
    assert_eq!(run("wan:1ms,loss=10%,seed=7", C2S), a);
    assert_ne!(run("wan:1ms,loss=10%,seed=8", C2S), a);
    assert_ne!(run("wan:1ms,loss=10%,seed=7", C2S.reverse()), a);
    assert_eq!(
        run("wan:1ms,jitter=1us,loss=10%,seed=7", C2S),
        a,
        "jitter moves no loss"
    );
}

#[test]
fn as_a_stage_it_waits_forward_and_goes_idle() {
    let mut p = path("wan:2ms,rate=8mbit");
    p.push(packet(1, 1_000), us(0));
    assert_eq!(Stage::poll(&mut p, us(0)), Poll::WaitUntil(us(1_000)));
    assert_eq!(Stage::poll(&mut p, us(1_000)), Poll::WaitUntil(us(3_000)));
    assert_eq!(p.queued(), 1_000);
    assert_eq!(Stage::poll(&mut p, us(3_000)), Poll::Emit(packet(1, 1_000)));
    assert_eq!(Stage::poll(&mut p, us(3_000)), Poll::Idle);
}

#[test]
fn device_framing_is_not_on_the_wire() {
    // 10 bytes of virtio_net_hdr in front of a 1500-byte packet: it fits a 1500-byte MTU, it
    // takes the airtime of 1500 bytes (1.5 ms at 8 Mbit/s) and the counters count 1500; one of
    // 1501 is over the MTU.
    let mut p = path("wan:2ms,rate=8mbit,mtu=1500").with_framing(10);
    p.push(packet(1, 1_510), us(0));
    p.push(packet(2, 1_511), us(0));
    assert_eq!(p.next_wakeup(), Some(us(1_500)));
    assert_eq!(p.pop_due(us(3_499)), None);
    assert_eq!(p.pop_due(us(3_500)), Some((us(3_500), packet(1, 1_510))));
    let c = p.counters();
    assert_eq!(
        (c.bytes_in, c.bytes_out, c.dropped_mtu),
        (1_500 + 1_501, 1_500, 1)
    );
    // Without the framing the same packet is over the MTU.
    let mut q = path("wan:2ms,rate=8mbit,mtu=1500");
    q.push(packet(1, 1_510), us(0));
    assert_eq!(q.counters().dropped_mtu, 1);
}
