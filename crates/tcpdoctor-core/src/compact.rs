//! Growth for per-flow vectors: a server's capture holds hundreds of thousands of open flows,
//! most of which push one or two items into each of their vectors, where `Vec`'s first
//! allocation already holds four.

/// Pushes `x`, growing `v` to exactly twice its capacity (1, 2, 4, …) when it is full:
/// amortised O(1), like `Vec::push`, without the room for four that `Vec` allocates first.
#[inline]
pub(crate) fn push<T>(v: &mut Vec<T>, x: T) {
    if v.len() == v.capacity() {
        v.reserve_exact(v.capacity().max(1));
    }
    v.push(x);
}

#[cfg(test)]
mod tests {
    #[test]
    fn grows_by_doubling_from_one() {
        let mut v = Vec::new();
        let mut caps = Vec::new();
        for i in 0..9 {
            super::push(&mut v, i);
            caps.push(v.capacity());
        }
        assert_eq!(v, (0..9).collect::<Vec<_>>());
        assert_eq!(caps, [1, 2, 4, 4, 8, 8, 8, 8, 16]);
    }
}
