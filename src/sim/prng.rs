//! SplitMix64: the seeded generator that picks the order in which ready
//! units start their next hooks. Its state is kept in the model so a
//! sequence of commands replays (wholly only under `--serial`).

pub struct Prng(pub u64);

impl Prng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform enough in `0..n` for scheduling (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let (mut a, mut b) = (Prng(7), Prng(7));
        let xs: Vec<usize> = (0..20).map(|_| a.below(5)).collect();
        let ys: Vec<usize> = (0..20).map(|_| b.below(5)).collect();
        assert_eq!(xs, ys);
        assert!(xs.iter().any(|&x| x != xs[0]));
    }
}
