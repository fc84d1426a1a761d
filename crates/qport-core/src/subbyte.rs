//! ONNX's sub-byte integer element types (`INT4`, `UINT4`, `INT2`, `UINT2`)
//! and the bit packing ONNX stores sub-byte tensors in.
//!
//! In memory each value takes one byte: the signed types hold the
//! sign-extended value in an `i8`, the unsigned ones the value in a `u8`, so
//! every stored value is in range by construction. Conversions from wider
//! integers keep the low bits and reinterpret them (two's complement), as
//! the ONNX `Cast` rules say for out-of-range fixed-point values. In files,
//! values are packed `8 / bits` to a byte, the first element in the lowest
//! bits ([`pack_bits`], [`unpack_bits`]).
//!
//! The types deliberately implement no arithmetic.

use std::fmt;

macro_rules! subbyte {
    ($(#[$doc:meta])* $name:ident, $repr:ty, $bits:expr, $signed:expr, $min:expr, $max:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name($repr);

        impl $name {
            /// Width in bits.
            pub const BITS: u32 = $bits;
            /// Smallest value.
            pub const MIN: $name = $name($min);
            /// Largest value.
            pub const MAX: $name = $name($max);

            /// Keeps the low bits of `v` and reinterprets them (wraps).
            pub fn wrapping_from_i64(v: i64) -> Self {
                let low = (v as u64 & ((1u64 << $bits) - 1)) as i64;
                if $signed && low >= 1 << ($bits - 1) {
                    $name((low - (1 << $bits)) as $repr)
                } else {
                    $name(low as $repr)
                }
            }

            /// `v` when it is in range, else `None`.
            pub fn new(v: i64) -> Option<Self> {
                (Self::MIN.get() as i64..=Self::MAX.get() as i64)
                    .contains(&v)
                    .then(|| $name(v as $repr))
            }

            /// `v` clamped to the range.
            pub fn saturating_from_i64(v: i64) -> Self {
                $name(v.clamp(Self::MIN.get() as i64, Self::MAX.get() as i64) as $repr)
            }

            /// The value.
            pub const fn get(self) -> $repr {
                self.0
            }

            /// The value's `BITS`-bit two's complement code (high bits zero).
            pub const fn to_code(self) -> u8 {
                (self.0 as u8) & ((1u16 << $bits) - 1) as u8
            }

            /// The value whose code is the low `BITS` bits of `code`.
            pub fn from_code(code: u8) -> Self {
                Self::wrapping_from_i64(code as i64)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }
    };
}

subbyte!(
    /// ONNX `INT4`: a signed 4-bit integer, -8..=7.
    I4,
    i8,
    4,
    true,
    -8,
    7
);
subbyte!(
    /// ONNX `UINT4`: an unsigned 4-bit integer, 0..=15.
    U4,
    u8,
    4,
    false,
    0,
    15
);
subbyte!(
    /// ONNX `INT2`: a signed 2-bit integer, -2..=1.
    I2,
    i8,
    2,
    true,
    -2,
    1
);
subbyte!(
    /// ONNX `UINT2`: an unsigned 2-bit integer, 0..=3.
    U2,
    u8,
    2,
    false,
    0,
    3
);

/// Packs `bits`-wide codes (1, 2 or 4 bits; higher bits of each code are
/// ignored) `8 / bits` to a byte, the first in the lowest bits; a last
/// partial byte is padded with zeros.
pub fn pack_bits(codes: &[u8], bits: u32) -> Vec<u8> {
    debug_assert!(matches!(bits, 1 | 2 | 4));
    let per = (8 / bits) as usize;
    let mask = ((1u16 << bits) - 1) as u8;
    codes
        .chunks(per)
        .map(|c| {
            c.iter()
                .enumerate()
                .fold(0u8, |b, (i, &v)| b | ((v & mask) << (i as u32 * bits)))
        })
        .collect()
}

/// Unpacks `n` codes of `bits` bits (1, 2 or 4) from bytes packed as by
/// [`pack_bits`]. Returns `None` unless `bytes` has exactly the
/// `ceil(n * bits / 8)` bytes needed.
pub fn unpack_bits(bytes: &[u8], n: usize, bits: u32) -> Option<Vec<u8>> {
    debug_assert!(matches!(bits, 1 | 2 | 4));
    let per = (8 / bits) as usize;
    if bytes.len() != n.div_ceil(per) {
        return None;
    }
    let mask = ((1u16 << bits) - 1) as u8;
    Some(
        (0..n)
            .map(|i| (bytes[i / per] >> ((i % per) as u32 * bits)) & mask)
            .collect(),
    )
}

/// Number of bytes `n` values of `bits` bits (1, 2, 4 or a multiple of 8)
/// take when packed; `None` on overflow.
pub fn packed_len(n: usize, bits: u32) -> Option<usize> {
    if bits >= 8 {
        n.checked_mul(bits as usize / 8)
    } else {
        Some(n.div_ceil((8 / bits) as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_matches_twos_complement() {
        let v: Vec<i8> = (-9..16).map(|x| I4::wrapping_from_i64(x).get()).collect();
        let want = [
            7, -8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2,
            -1,
        ];
        assert_eq!(v, want);
        let u: Vec<u8> = (-9..16).map(|x| U4::wrapping_from_i64(x).get()).collect();
        assert_eq!(u[..9], [7, 8, 9, 10, 11, 12, 13, 14, 15]);
        let i2: Vec<i8> = (-3..4).map(|x| I2::wrapping_from_i64(x).get()).collect();
        assert_eq!(i2, [1, -2, -1, 0, 1, -2, -1]);
        let u2: Vec<u8> = (-3..4).map(|x| U2::wrapping_from_i64(x).get()).collect();
        assert_eq!(u2, [1, 2, 3, 0, 1, 2, 3]);
        assert_eq!(I4::wrapping_from_i64(200).get(), -8);
        assert_eq!(I4::wrapping_from_i64(i64::MIN).get(), 0);
    }

    #[test]
    fn ranges_codes_and_saturation() {
        assert_eq!((I4::MIN.get(), I4::MAX.get()), (-8, 7));
        assert_eq!((U4::MIN.get(), U4::MAX.get()), (0, 15));
        assert_eq!((I2::MIN.get(), I2::MAX.get()), (-2, 1));
        assert_eq!((U2::MIN.get(), U2::MAX.get()), (0, 3));
        assert_eq!(I4::new(-8).unwrap().to_code(), 0x8);
        assert_eq!(I4::new(-1).unwrap().to_code(), 0xF);
        assert_eq!(I2::new(-2).unwrap().to_code(), 0b10);
        assert!(I4::new(8).is_none() && U2::new(-1).is_none());
        for c in 0..16u8 {
            assert_eq!(I4::from_code(c).to_code(), c);
            assert_eq!(U4::from_code(c).to_code(), c);
        }
        for c in 0..4u8 {
            assert_eq!(I2::from_code(c).to_code(), c);
        }
        assert_eq!(I4::saturating_from_i64(-100), I4::MIN);
        assert_eq!(U2::saturating_from_i64(100), U2::MAX);
    }

    #[test]
    fn packing_is_low_bits_first_with_padding() {
        // The INT4 codes of [0, 1, 7, -4, -8] as ONNX stores them.
        let codes: Vec<u8> = [0i64, 1, 7, -4, -8]
            .iter()
            .map(|&v| I4::new(v).unwrap().to_code())
            .collect();
        let packed = pack_bits(&codes, 4);
        assert_eq!(packed, [0x10, 0xC7, 0x08]);
        assert_eq!(unpack_bits(&packed, 5, 4).unwrap(), codes);
        // The INT2 codes of [0, 1, -1, -2] in one byte.
        let codes: Vec<u8> = [0i64, 1, -1, -2]
            .iter()
            .map(|&v| I2::new(v).unwrap().to_code())
            .collect();
        assert_eq!(pack_bits(&codes, 2), [0xB4]);
        let seven = [1u8, 2, 3, 0, 1, 2, 3];
        let p = pack_bits(&seven, 2);
        assert_eq!(p.len(), 2);
        assert_eq!(unpack_bits(&p, 7, 2).unwrap(), seven);
        assert!(unpack_bits(&p, 9, 2).is_none());
        assert!(unpack_bits(&p, 4, 2).is_none());
        assert_eq!(packed_len(5, 4), Some(3));
        assert_eq!(packed_len(7, 2), Some(2));
        assert_eq!(packed_len(3, 16), Some(6));
        assert_eq!(unpack_bits(&[], 0, 4).unwrap(), Vec::<u8>::new());
    }
}
