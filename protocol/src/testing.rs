//! Deterministic random messages for property tests (feature `testing`).
//!
//! Each wire struct implements [`Random`]: it fills exactly the fields present in a
//! given version, so `decode(encode(m, v), v) == m` must hold for every generated `m`.

use bytes::Bytes;

use crate::primitives::Uuid;

/// A small seeded generator (SplitMix64); the seed is all a failing test needs to print.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}

/// Types that can be generated at random for a message version.
pub trait Random {
    /// A random value valid in `version`.
    fn random(rng: &mut Rng, version: i16) -> Self;
}

macro_rules! random_int {
    ($($t:ty),*) => {$(
        impl Random for $t {
            fn random(rng: &mut Rng, _: i16) -> Self {
                // Favour small values and the edges.
                match rng.below(4) {
                    0 => 0,
                    1 => -1i64 as $t,
                    2 => rng.below(100) as $t,
                    _ => rng.next_u64() as $t,
                }
            }
        }
    )*};
}
random_int!(i8, i16, i32, i64, u16, u32);

impl Random for f64 {
    fn random(rng: &mut Rng, _: i16) -> Self {
        rng.below(1000) as f64 / 8.0
    }
}

impl Random for bool {
    fn random(rng: &mut Rng, _: i16) -> Self {
        rng.below(2) == 1
    }
}

impl Random for Uuid {
    fn random(rng: &mut Rng, _: i16) -> Self {
        Uuid::from_u64_pair(rng.next_u64(), rng.next_u64())
    }
}

impl Random for String {
    fn random(rng: &mut Rng, _: i16) -> Self {
        let n = rng.below(12) as usize;
        (0..n)
            .map(|_| {
                let c = rng.below(40) as u8;
                if c < 36 {
                    (b'a' + c % 26) as char
                } else {
                    ['é', '-', '.', 'ü'][(c - 36) as usize]
                }
            })
            .collect()
    }
}

impl Random for Bytes {
    fn random(rng: &mut Rng, _: i16) -> Self {
        let n = rng.below(24) as usize;
        (0..n)
            .map(|_| rng.next_u64() as u8)
            .collect::<Vec<u8>>()
            .into()
    }
}

/// Random bytes cut at a random point, so that round trips also check that the
/// wire form does not depend on the cuts.
impl Random for crate::record::BatchSegments {
    fn random(rng: &mut Rng, version: i16) -> Self {
        let whole = Bytes::random(rng, version);
        let cut = rng.below(whole.len() as u64 + 1) as usize;
        Self::from_segments(vec![whole.slice(..cut), whole.slice(cut..)])
    }
}

impl<T: Random> Random for Vec<T> {
    fn random(rng: &mut Rng, version: i16) -> Self {
        let n = rng.below(4) as usize;
        (0..n).map(|_| T::random(rng, version)).collect()
    }
}

impl<T: Random> Random for Option<T> {
    fn random(rng: &mut Rng, version: i16) -> Self {
        if rng.below(5) == 0 {
            None
        } else {
            Some(T::random(rng, version))
        }
    }
}
