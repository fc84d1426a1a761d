//! The one seeded random stream of qport (SplitMix64): synthetic datasets
//! and generated models (weights of sweep models) draw from it, so the
//! same seed gives the same values on every machine.
//!
//! ```
//! use qport_data::rng::SplitMix;
//! let mut a = SplitMix::new(7);
//! let mut b = SplitMix::new(7);
//! assert_eq!(a.next_u64(), b.next_u64());
//! let x = a.next_signed_unit();
//! assert!((-1.0..1.0).contains(&x));
//! ```

/// SplitMix64's output function (also a good 64-bit hash of a seed).
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A SplitMix64 stream.
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    /// A stream starting from `state`.
    pub fn new(state: u64) -> SplitMix {
        SplitMix(state)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }

    /// A float in `[-1, 1)` from 24 random bits (exact in f32).
    pub fn next_signed_unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0
    }
}
