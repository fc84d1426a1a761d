//! Unit tests of the float8/float4 conversion tables.

use super::*;
use half::f16;
use proptest::prelude::*;

/// Decoded value and encodings of every code of one format.
trait Fmt {
    fn dec(b: u8) -> f64;
    fn enc(x: f64, sat: bool) -> u8;
}

macro_rules! fmt_impl {
    ($t:ty) => {
        impl Fmt for $t {
            fn dec(b: u8) -> f64 {
                <$t>::from_bits(b).to_f64()
            }
            fn enc(x: f64, sat: bool) -> u8 {
                <$t>::from_f64(x, sat).to_bits()
            }
        }
    };
}
fmt_impl!(F8E4M3FN);
fmt_impl!(F8E4M3FNUZ);
fmt_impl!(F8E5M2);
fmt_impl!(F8E5M2FNUZ);
fmt_impl!(F4E2M1);

/// Every non-NaN code decodes to a value that encodes back to the same code
/// (saturating or not; infinities only without saturation), NaN codes
/// re-encode to a NaN, and the positive codes are strictly increasing.
fn round_trip<T: Fmt>(codes: u32, nans: usize) {
    let mut seen_nan = 0;
    for b in 0..codes {
        let b = b as u8;
        let v = T::dec(b);
        if v.is_nan() {
            seen_nan += 1;
            assert!(T::dec(T::enc(v, true)).is_nan(), "{b:#04x}");
            continue;
        }
        assert_eq!(T::enc(v, false), b, "{b:#04x} = {v}");
        if v.is_infinite() {
            // Saturation turns infinities into the largest finite value.
            assert_eq!(T::dec(T::enc(v, true)).abs(), 57344.0, "{b:#04x}");
            continue;
        }
        assert_eq!(T::enc(v, true), b, "{b:#04x} = {v}");
        // The value widens exactly to f32 and f16 (every format here fits).
        assert_eq!(v as f32 as f64, v);
    }
    assert_eq!(seen_nan, nans);
    let half = codes / 2;
    let pos: Vec<f64> = (0..half)
        .map(|b| T::dec(b as u8))
        .filter(|v| !v.is_nan())
        .collect();
    assert!(pos.windows(2).all(|w| w[0] < w[1]), "{pos:?}");
}

#[test]
fn all_codes_round_trip() {
    round_trip::<F8E4M3FN>(256, 2); // 0x7F, 0xFF
    round_trip::<F8E4M3FNUZ>(256, 1); // 0x80
    round_trip::<F8E5M2>(256, 6); // 0x7D-0x7F, 0xFD-0xFF
    round_trip::<F8E5M2FNUZ>(256, 1);
    round_trip::<F4E2M1>(16, 0);
    for b in 0..=255u8 {
        let v = F8E8M0(b).to_f64();
        if b == 0xFF {
            assert!(v.is_nan());
        } else {
            assert_eq!(v, 2f64.powi(b as i32 - 127));
            assert_eq!(F8E8M0::from_f64(v, true, RoundMode::Down).0, b);
            assert_eq!(F8E8M0::from_f64(v, false, RoundMode::Nearest).0, b);
        }
    }
}

#[test]
fn known_values_and_limits() {
    assert_eq!(F8E4M3FN(0x7E).to_f64(), 448.0);
    assert_eq!(F8E4M3FN(0x38).to_f64(), 1.0);
    assert_eq!(F8E4M3FN(0x01).to_f64(), 2f64.powi(-9));
    assert_eq!(F8E4M3FN(0x08).to_f64(), 2f64.powi(-6));
    assert_eq!(F8E4M3FN(0x80).to_f64().to_bits(), (-0.0f64).to_bits());
    assert_eq!(F8E4M3FNUZ(0x7F).to_f64(), 240.0);
    assert_eq!(F8E4M3FNUZ(0x40).to_f64(), 1.0);
    assert_eq!(F8E4M3FNUZ(0x01).to_f64(), 2f64.powi(-10));
    assert_eq!(F8E5M2(0x7B).to_f64(), 57344.0);
    assert_eq!(F8E5M2(0x7C).to_f64(), f64::INFINITY);
    assert_eq!(F8E5M2(0xFC).to_f64(), f64::NEG_INFINITY);
    assert_eq!(F8E5M2(0x3C).to_f64(), 1.0);
    assert_eq!(F8E5M2(0x01).to_f64(), 2f64.powi(-16));
    assert_eq!(F8E5M2FNUZ(0x7F).to_f64(), 57344.0);
    assert_eq!(F8E5M2FNUZ(0x01).to_f64(), 2f64.powi(-17));
    let f4: Vec<f64> = (0..16).map(|b| F4E2M1(b).to_f64()).collect();
    assert_eq!(
        f4,
        [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
    );
    assert_eq!(F4E2M1::from_nibble(0xF7), F4E2M1(7));
}

#[test]
fn saturate_versus_overflow_above_the_largest_value() {
    // (value, saturated, not saturated) for each format.
    let cases: [(f64, u8, u8); 6] = [
        (1e6, 0x7E, 0x7F),
        (-1e6, 0xFE, 0xFF),
        (470.0, 0x7E, 0x7F), // rounds to 480 > 448
        (464.0, 0x7E, 0x7E), // tie: rounds to even 448
        (f64::INFINITY, 0x7E, 0x7F),
        (f64::NEG_INFINITY, 0xFE, 0xFF),
    ];
    for (x, s, n) in cases {
        assert_eq!(F8E4M3FN::from_f64(x, true).0, s, "{x}");
        assert_eq!(F8E4M3FN::from_f64(x, false).0, n, "{x}");
    }
    // E5M2 overflows to infinity.
    assert_eq!(F8E5M2::from_f64(61440.0, true).0, 0x7B);
    assert_eq!(F8E5M2::from_f64(61440.0, false).0, 0x7C);
    assert_eq!(F8E5M2::from_f64(61439.0, false).0, 0x7B);
    assert_eq!(F8E5M2::from_f64(-1e9, false).0, 0xFC);
    assert_eq!(F8E5M2::from_f64(f64::NEG_INFINITY, true).0, 0xFB);
    // FNUZ formats overflow to their single NaN.
    for x in [1e6, -1e6, f64::INFINITY, f64::NEG_INFINITY] {
        assert_eq!(F8E4M3FNUZ::from_f64(x, false).0, 0x80, "{x}");
        assert_eq!(F8E5M2FNUZ::from_f64(x, false).0, 0x80, "{x}");
    }
    assert_eq!(F8E4M3FNUZ::from_f64(1e6, true).0, 0x7F);
    assert_eq!(F8E5M2FNUZ::from_f64(-1e6, true).0, 0xFF);
    // float4 has no special values: it always saturates.
    assert_eq!(F4E2M1::from_f64(9.0, false).0, 0x7);
    assert_eq!(F4E2M1::from_f64(f64::NEG_INFINITY, false).0, 0xF);
    // E8M0 saturates at 2^127 or overflows to NaN.
    let big = f32::MAX as f64;
    assert_eq!(F8E8M0::from_f64(big, true, RoundMode::Up).0, 0xFE);
    assert_eq!(F8E8M0::from_f64(big, false, RoundMode::Up).0, 0xFF);
    assert_eq!(F8E8M0::from_f64(f64::INFINITY, true, RoundMode::Up).0, 0xFF);
}

#[test]
fn nan_and_signed_zero() {
    assert_eq!(F8E4M3FN::from_f64(f64::NAN, true).0, 0x7F);
    assert_eq!(F8E4M3FN::from_f64(-f64::NAN, false).0, 0xFF);
    assert_eq!(F8E5M2::from_f64(f64::NAN, true).0, 0x7E);
    assert_eq!(F8E5M2::from_f64(-f64::NAN, true).0, 0xFE);
    assert_eq!(F8E4M3FNUZ::from_f64(-f64::NAN, true).0, 0x80);
    assert_eq!(F8E5M2FNUZ::from_f64(f64::NAN, false).0, 0x80);
    assert_eq!(F4E2M1::from_f64(f64::NAN, true).0, 0x0);
    assert_eq!(F8E8M0::from_f64(f64::NAN, true, RoundMode::Up).0, 0xFF);
    // Negative zero, and negatives that round to zero, keep their sign
    // only where the format has a negative zero.
    assert_eq!(F8E4M3FN::from_f64(-0.0, true).0, 0x80);
    assert_eq!(F8E5M2::from_f64(-1e-9, true).0, 0x80);
    assert_eq!(F4E2M1::from_f64(-0.2, true).0, 0x8);
    assert_eq!(F8E4M3FNUZ::from_f64(-0.0, true).0, 0x00);
    assert_eq!(F8E5M2FNUZ::from_f64(-1e-9, false).0, 0x00);
    // NaN never equals itself; signed zeros are equal.
    assert_ne!(F8E4M3FN(0x7F), F8E4M3FN(0x7F));
    assert_eq!(F8E4M3FN(0x00), F8E4M3FN(0x80));
    assert_ne!(F8E8M0(0xFF), F8E8M0(0xFF));
}

#[test]
fn subnormals_round_to_nearest_even() {
    let s = 2f64.powi(-9); // smallest E4M3FN subnormal
    assert_eq!(F8E4M3FN::from_f64(s, true).0, 0x01);
    assert_eq!(F8E4M3FN::from_f64(0.5 * s, true).0, 0x00); // tie to even 0
    assert_eq!(F8E4M3FN::from_f64(0.500001 * s, true).0, 0x01);
    assert_eq!(F8E4M3FN::from_f64(1.5 * s, true).0, 0x02); // tie to even 2
    assert_eq!(F8E4M3FN::from_f64(2.5 * s, true).0, 0x02);
    assert_eq!(F8E4M3FN::from_f64(-3.5 * s, true).0, 0x84);
    // The largest subnormal rounds up into the smallest normal.
    assert_eq!(F8E4M3FN::from_f64(7.5 * s, true).0, 0x08);
    assert_eq!(F8E5M2::from_f64(2f64.powi(-17), true).0, 0x00);
    assert_eq!(F8E5M2::from_f64(3.0 * 2f64.powi(-17), true).0, 0x02);
    assert_eq!(F8E5M2FNUZ::from_f64(2f64.powi(-17), true).0, 0x01);
    assert_eq!(F8E4M3FNUZ::from_f64(2f64.powi(-10), true).0, 0x01);
    assert_eq!(F4E2M1::from_f64(0.25, true).0, 0x0); // tie to even 0
    assert_eq!(F4E2M1::from_f64(0.75, true).0, 0x2); // tie to even 1.0
    assert_eq!(F4E2M1::from_f64(5.0, true).0, 0x6); // tie to even 4.0
                                                    // Normal ties.
    assert_eq!(F8E4M3FN::from_f64(1.0625, true).0, 0x38);
    assert_eq!(F8E4M3FN::from_f64(1.1875, true).0, 0x3A);
}

#[test]
fn e8m0_rounding_modes() {
    let enc = |x: f32, m| F8E8M0::from_f32(x, true, m).0;
    assert_eq!(enc(1.0, RoundMode::Up), 127);
    assert_eq!(enc(1.1, RoundMode::Up), 128);
    assert_eq!(enc(1.1, RoundMode::Down), 127);
    assert_eq!(enc(1.1, RoundMode::Nearest), 127);
    assert_eq!(enc(1.75, RoundMode::Nearest), 128);
    assert_eq!(enc(0.124, RoundMode::Up), 124);
    assert_eq!(enc(0.0, RoundMode::Up), 0);
    assert_eq!(F8E8M0(0).to_f32(), 2f32.powi(-127));
    assert_eq!(RoundMode::parse("nearest"), Some(RoundMode::Nearest));
    assert_eq!(RoundMode::parse("even"), None);
}

/// FNV-1a over the codes of every f16 bit pattern converted by `f`.
fn f16_table_hash(f: impl Fn(f64) -> u8) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in 0..=u16::MAX {
        h ^= f(f16::from_bits(b).to_f64()) as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Exhaustive check over every float16 input against the ONNX reference:
/// the hashes were computed from `onnx.numpy_helper.saturate_cast` (saturate)
/// and `ml_dtypes` `astype` (no saturation) on the same inputs, and from
/// `onnx.numpy_helper.to_float8e8m0` (NaN inputs to float4 taken as +0).
#[test]
fn every_f16_input_matches_the_onnx_reference() {
    type Encode = fn(f64, bool) -> u8;
    let encode = |name: &str| -> Encode {
        match name {
            "e4m3fn" => |x, s| F8E4M3FN::from_f64(x, s).0,
            "e4m3fnuz" => |x, s| F8E4M3FNUZ::from_f64(x, s).0,
            "e5m2" => |x, s| F8E5M2::from_f64(x, s).0,
            "e5m2fnuz" => |x, s| F8E5M2FNUZ::from_f64(x, s).0,
            "e2m1" => |x, s| F4E2M1::from_f64(x, s).0,
            other => panic!("no format {other}"),
        }
    };
    // (format, hash saturating, hash not saturating)
    let cases = [
        ("e4m3fn", 0x2d72_4a81_49ff_1225, 0xbd57_1fcb_cd35_1aa5),
        ("e4m3fnuz", 0xd671_61fa_988d_e225, 0x5baa_f26b_4d46_d9a5),
        ("e5m2", 0x1e3e_cb6c_5c7e_6f25, 0xbd84_6ad2_7363_4325),
        ("e5m2fnuz", 0xf78b_d6e1_3c6c_f725, 0xf336_d4e1_e12e_dda5),
        ("e2m1", 0x4fbf_3a0a_a82d_1d2d, 0x4fbf_3a0a_a82d_1d2d),
    ];
    for (name, sat, non) in cases {
        let f = encode(name);
        assert_eq!(f16_table_hash(|x| f(x, true)), sat, "{name} saturate");
        assert_eq!(f16_table_hash(|x| f(x, false)), non, "{name} no saturate");
    }
    let e8 = [
        (RoundMode::Up, 0x51aa_15dd_bc9b_c6d5),
        (RoundMode::Down, 0x9f05_d461_8cb3_459d),
        (RoundMode::Nearest, 0xcd50_25e4_7098_47b5),
    ];
    for (mode, want) in e8 {
        let h = f16_table_hash(|x| F8E8M0::from_f64(x, true, mode).0);
        assert_eq!(h, want, "e8m0 {mode:?}");
    }
}

/// Round to nearest, ties to even, by search: the positive finite values of
/// a 16-bit format ascend with their bit patterns (`top` is the largest),
/// so `|x|` lies between two neighbours and is compared with their
/// midpoint, which is exact in `f64`. Returns the bit pattern (`inf` beyond
/// the range).
fn nearest_by_search(x: f64, top: u16, inf: u16, dec: impl Fn(u16) -> f64) -> u16 {
    let sign = if x.is_sign_negative() { 0x8000 } else { 0 };
    let a = x.abs();
    let (mut lo, mut hi) = (0u16, top); // dec(lo) <= a < dec(hi + 1)
    if a >= dec(top) {
        lo = top;
    } else {
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if dec(mid) <= a {
                lo = mid;
            } else {
                hi = mid;
            }
        }
    }
    if dec(lo) == a {
        return sign | lo;
    }
    let (up, v_up) = if lo == top {
        // the next step past the largest value, where an infinity starts
        (inf, 2.0 * dec(top) - dec(top - 1))
    } else {
        (lo + 1, dec(lo + 1))
    };
    let mid = (dec(lo) + v_up) / 2.0;
    let pick = if a < mid {
        lo
    } else if a > mid || lo % 2 == 1 {
        up
    } else {
        lo
    };
    sign | pick
}

fn f16_ref(x: f64) -> u16 {
    nearest_by_search(x, 0x7BFF, 0x7C00, |b| f16::from_bits(b).to_f64())
}

fn bf16_ref(x: f64) -> u16 {
    nearest_by_search(x, 0x7F7F, 0x7F80, |b| half::bf16::from_bits(b).to_f64())
}

/// Values on, just past and just short of every kind of midpoint of a
/// 16-bit format (`bits` picks the lower neighbour).
fn near_midpoint(bits: u16, top: u16, dec: fn(u16) -> f64, k: u32, side: u8) -> f64 {
    let b = bits % top;
    let mid = (dec(b) + dec(b + 1)) / 2.0;
    let eps = mid.abs().max(f64::MIN_POSITIVE) * 2f64.powi(-(k as i32));
    match side % 5 {
        0 => mid,
        1 => mid + eps,
        2 => mid - eps,
        3 => mid.next_up(),
        _ => mid.next_down(),
    }
}

#[test]
fn the_cases_half_gets_wrong_round_correctly() {
    // past a tie by less than the top 32 bits of an f64 (or an f32) show
    let f = |x: f64| f16_from_f64(x).to_f64();
    assert_eq!(f(2049.0 + 2f64.powi(-30)), 2050.0);
    assert_eq!(f(-(2049.0 + 2f64.powi(-30))), -2050.0);
    assert_eq!(f(2051.0 - 2f64.powi(-30)), 2050.0);
    // the fp16 epilogue case CI found: −68754 · f32(0.3445328…) in f32 is
    // −23688.0078125, past the tie between −23680 and −23696
    assert_eq!(f(-23688.0078125), -23696.0);
    // subnormals, the largest value and overflow
    assert_eq!(f(2f64.powi(-25)), 0.0);
    assert_eq!(f(2f64.powi(-25) + 2f64.powi(-60)), 2f64.powi(-24));
    assert_eq!(f(-1e-30).to_bits(), (-0.0f64).to_bits());
    assert_eq!(f(65519.999), 65504.0);
    assert_eq!(f(65520.0), f64::INFINITY);
    assert_eq!(f(f64::NEG_INFINITY), f64::NEG_INFINITY);
    assert!(f16_from_f64(f64::NAN).is_nan());
    let g = |x: f64| bf16_from_f64(x).to_f64();
    assert_eq!(g(257.0 + 2f64.powi(-40)), 258.0);
    let max = half::bf16::MAX.to_f64(); // (2 − 2^−7)·2^127
    assert_eq!(g(-3.3960e38), -max); // below the midpoint (2 − 2^−8)·2^127
    assert_eq!(g(3.3962e38), f64::INFINITY);
    assert_eq!(g(1e300), f64::INFINITY);
    assert!(bf16_from_f64(-f64::NAN).is_nan());
}

/// `f16_round_f32` against `f16_from_f64` (the checked conversion: an
/// `f32` is exact in `f64`) on every sign, exponent and top 7 fraction
/// bits of an `f32` (all 65536 top halves of the pattern), each with the
/// low 16 bits that decide the rounding: zero, just below, at and just
/// above the tie of the 13 dropped bits with the kept bit even or odd, all
/// ones, and a few others. (All 2^32 patterns were compared once when the
/// function was written, against `half`'s F16C conversion: no difference.)
#[test]
fn f16_round_f32_is_the_nearest_float16_for_every_exponent() {
    let lows: [u32; 12] = [
        0, 1, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x2fff, 0x3000, 0x3001, 0xffff, 0x9a5c,
    ];
    let mut checked = 0u32;
    for hi in 0..=0xffffu32 {
        for &lo in &lows {
            let x = f32::from_bits(hi << 16 | lo);
            let got = f16_round_f32(x);
            if x.is_nan() {
                assert!(got.is_nan(), "{x:e}");
                continue;
            }
            let want = f16_from_f64(f64::from(x)).to_f32();
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{:#010x} ({x:e})",
                x.to_bits()
            );
            checked += 1;
        }
    }
    assert!(checked > 700_000);
}

proptest! {
    #[test]
    fn f16_and_bf16_from_f64_round_to_nearest_even(
        x in prop_oneof![
            any::<f64>(),
            -70_000f64..70_000.0,
            -1e-4f64..1e-4,
            (any::<u16>(), 12u32..60, 0u8..5)
                .prop_map(|(b, k, s)| near_midpoint(b, 0x7BFF, |b| f16::from_bits(b).to_f64(), k, s)),
            (any::<u16>(), 12u32..60, 0u8..5)
                .prop_map(|(b, k, s)| near_midpoint(b, 0x7F7F, |b| half::bf16::from_bits(b).to_f64(), k, s)),
        ],
        neg in any::<bool>(),
    ) {
        let x = if neg { -x } else { x };
        if !x.is_nan() {
            prop_assert_eq!(f16_from_f64(x).to_bits(), f16_ref(x), "f16 of {:e}", x);
            prop_assert_eq!(bf16_from_f64(x).to_bits(), bf16_ref(x), "bf16 of {:e}", x);
            // `half`'s f32 conversions are correct on every CPU, and the
            // engine relies on them: check them against the reference too
            let y = x as f32;
            prop_assert_eq!(f16::from_f32(y).to_bits(), f16_ref(f64::from(y)), "f16 of f32 {:e}", y);
            prop_assert_eq!(half::bf16::from_f32(y).to_bits(), bf16_ref(f64::from(y)), "bf16 of f32 {:e}", y);
        }
    }
}
