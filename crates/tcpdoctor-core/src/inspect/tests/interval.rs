use super::builder::*;
use crate::inspect::interval::{wrap32, SocketInterval};

#[test]
fn a_32_bit_counter_that_wraps_counts_on_and_one_that_goes_back_counts_zero() {
    assert_eq!(wrap32(10, 25), 15);
    assert_eq!(wrap32(u32::MAX - 4, 5), 10, "wrapped past 2^32");
    assert_eq!(
        wrap32(100, 90),
        0,
        "backwards: a new socket, not 4.29e9 segments"
    );
    let s = SocketBuilder::accepted(5, 40000)
        .traffic(3, 10, 1, 14, 1, |i, s| {
            if i == 0 {
                s.data_segs_out = 1000;
                s.segs_out = 1000;
            }
            if i == 2 {
                // The inode reused by a new socket: its counters restarted.
                s.data_segs_out = 1;
                s.segs_out = 1;
            }
        })
        .build();
    let iv = SocketInterval::of(&s).expect("sampled");
    assert_eq!((iv.data_segs_out, iv.segs_out), (0, 0));
}
