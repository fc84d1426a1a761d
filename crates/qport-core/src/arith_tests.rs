//! Tests of the arithmetic profiles: hand-computed rounding and
//! requantization cases for every policy, the gemmlowp primitives against
//! their published definitions, the AVX2 saturation example of
//! `shared/reference/fixtures.md`, and the profile file format.

use super::*;
use proptest::prelude::*;

const I32: (i32, i32) = (i32::MIN, i32::MAX);

fn p(name: &str) -> ArithProfile {
    ArithProfile::preset(name).unwrap()
}

/// Every preset, then the integer and fp16 ones again under each rounding
/// mode (each mode has a loop of its own in `apply_slice_into`).
fn presets_with_every_rounding() -> Vec<ArithProfile> {
    let mut all = presets();
    for base in ["pot-shift", "gemmlowp", "fp16-epilogue", "float-bias"] {
        for r in [
            Rounding::HalfEven,
            Rounding::HalfAway,
            Rounding::HalfUp,
            Rounding::Floor,
        ] {
            let mut v = p(base);
            v.name = format!("{base}.{}", format!("{r:?}").to_lowercase());
            v.rounding = r;
            all.push(v);
        }
    }
    all
}

/// `requantize` with zero point 0 over the whole i32 range.
fn rq(acc: i64, m: f64, profile: &ArithProfile) -> i32 {
    requantize(acc, m, 0, I32.0, I32.1, profile)
}

#[test]
fn every_rounding_mode_on_ties() {
    use Rounding::*;
    let xs = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5];
    for (mode, want) in [
        (HalfEven, [-2.0, -2.0, -0.0, 0.0, 2.0, 2.0]),
        (HalfAway, [-3.0, -2.0, -1.0, 1.0, 2.0, 3.0]),
        (HalfUp, [-2.0, -1.0, 0.0, 1.0, 2.0, 3.0]),
        (Floor, [-3.0, -2.0, -1.0, 0.0, 1.0, 2.0]),
    ] {
        for (x, w) in xs.iter().zip(want) {
            assert_eq!(round(*x, mode), w, "{mode:?} {x}");
        }
        assert_eq!(round(1.25, mode), 1.0, "{mode:?}");
        assert_eq!(round(-1.75, mode), -2.0, "{mode:?}");
        assert!(round(f64::NAN, mode).is_nan());
    }
    // The largest double below 0.5: adding 0.5 first would round it to 1.
    assert_eq!(round(0.49999999999999994, HalfUp), 0.0);
    assert_eq!(round(-0.49999999999999994, HalfUp), 0.0);
}

#[test]
fn rounding_shift_matches_round_on_ties() {
    use Rounding::*;
    for mode in [HalfEven, HalfAway, HalfUp, Floor] {
        for x in [-5i64, -3, -1, 1, 3, 5] {
            // x / 2 is a tie: ±0.5, ±1.5, ±2.5.
            assert_eq!(
                rounding_shift_right(x, 1, mode) as f64,
                round(x as f64 / 2.0, mode),
                "{mode:?} {x}"
            );
        }
    }
    assert_eq!(rounding_shift_right(i64::MIN, 200, HalfEven), 0);
    assert_eq!(rounding_shift_right(i64::MIN, 200, Floor), -1);
    assert_eq!(rounding_shift_right(i64::MAX, 0, HalfUp), i64::MAX);
}

/// gemmlowp's RoundingDivideByPOT as published: mask, remainder, threshold.
fn rdbpot_published(x: i32, e: u32) -> i32 {
    let mask = ((1i64 << e) - 1) as i32;
    let remainder = x & mask;
    let threshold = (mask >> 1) + i32::from(x < 0);
    (x >> e) + i32::from(remainder > threshold)
}

#[test]
fn gemmlowp_primitives_hand_cases() {
    let srdhm = saturating_rounding_doubling_high_mul;
    assert_eq!(srdhm(i32::MIN, i32::MIN), i32::MAX);
    assert_eq!(srdhm(1 << 30, 1 << 30), 1 << 29);
    assert_eq!(srdhm(i32::MIN, 1 << 30), -(1 << 30));
    // a·b / 2^31 = ±0.5: the published nudge rounds both ties up.
    assert_eq!(srdhm(1 << 15, 1 << 15), 1);
    assert_eq!(srdhm(-(1 << 15), 1 << 15), 0);
    // ±1.5
    assert_eq!(srdhm(3 << 15, 1 << 15), 2);
    assert_eq!(srdhm(-(3 << 15), 1 << 15), -1);
    for (x, e, want) in [
        (5, 1, 3),
        (-5, 1, -3),
        (3, 1, 2),
        (-3, 1, -2),
        (1, 1, 1),
        (-1, 1, -1),
    ] {
        assert_eq!(rounding_divide_by_pot(x, e), want, "{x} >> {e}");
    }
}

#[test]
fn q31_decomposition_known_cases() {
    let q = |m| Q31Multiplier::from_real(m).unwrap();
    let mq = |multiplier, exponent| Q31Multiplier {
        multiplier,
        exponent,
    };
    assert_eq!(q(0.5), mq(1 << 30, 0));
    assert_eq!(q(1.0), mq(1 << 30, 1));
    assert_eq!(q(0.75), mq(3 << 29, 0));
    assert_eq!(q(3.0), mq(3 << 29, 2));
    assert_eq!(q(2f64.powi(-32)), mq(1 << 30, -31));
    // Mantissa rounding up to 2^31 renormalizes.
    assert_eq!(q(1.0 - 2f64.powi(-40)), mq(1 << 30, 1));
    // Flushed to zero below 2^-32 (exponent < -31), and zero itself.
    assert_eq!(q(2f64.powi(-33)), mq(0, 0));
    assert_eq!(q(0.0), mq(0, 0));
    assert_eq!(q(f64::MIN_POSITIVE / 4.0), mq(0, 0));
    for bad in [-0.5, f64::NAN, f64::INFINITY] {
        assert_eq!(Q31Multiplier::from_real(bad), None);
    }
    // 1/255: mantissa round(0.50196... · 2^31), exponent -7.
    let m = 1.0 / 255.0;
    let d = q(m);
    assert_eq!(d.exponent, -7);
    assert_eq!(d.multiplier, (m * 2f64.powi(38)).round() as i32);
    assert!((d.to_real() - m).abs() <= m * 2f64.powi(-31));
}

#[test]
fn q31_requant_exact_on_known_cases() {
    let g = p("gemmlowp");
    // Hand-computed with the published semantics: SRDHM rounds a·m/2^31
    // with ties toward +inf, then the shift by -exponent rounds half away.
    for (acc, m, want) in [
        (1000, 0.5, 500),  // (2^30, 0): exact
        (3, 0.5, 2),       // SRDHM 1.5 -> 2
        (-3, 0.5, -1),     // SRDHM -1.5 -> -1 (tie toward +inf)
        (5, 0.5, 3),       // 2.5 -> 3
        (-5, 0.5, -2),     // -2.5 -> -2
        (-6, 0.25, -2),    // (2^30, -1): SRDHM -3, then -1.5 -> -2
        (5, 0.25, 2),      // SRDHM 2.5 -> 3, then 1.5 -> 2: double rounding (exact 1.25)
        (7, 0.75, 5),      // (3·2^29, 0): 5.25 -> 5
        (100, 3.0, 300),   // (3·2^29, 2): left shift 2, exact
        (-100, 1.0, -100), // (2^30, 1)
        (0, 0.3, 0),
    ] {
        assert_eq!(rq(acc, m, &g), want, "{acc} * {m}");
    }
    // Saturation and zero point.
    assert_eq!(requantize(1000, 0.5, 10, -128, 127, &g), 127);
    assert_eq!(requantize(-1000, 0.5, 10, -128, 127, &g), -128);
    assert_eq!(requantize(20, 0.5, -3, -128, 127, &g), 7);
    // The profile's rounding applies to the final shift.
    let even = ArithProfile {
        rounding: Rounding::HalfEven,
        ..g.clone()
    };
    assert_eq!(rq(10, 0.25, &g), 3); // SRDHM 5, 2.5 -> 3
    assert_eq!(rq(10, 0.25, &even), 2); // 2.5 -> 2
    assert_eq!(rq(-6, 0.25, &even), -2); // -1.5 -> -2
                                         // Accumulators beyond i32 (int16 activations): one exact rounding.
    let big = 3i64 << 40;
    assert_eq!(rq(big + (1 << 20), 2f64.powi(-21), &g), (3 << 19) + 1); // +0.5 -> away
    assert_eq!(rq(-big - (1 << 20), 2f64.powi(-21), &g), -(3 << 19) - 1);
}

/// The rounding modes written with `std`'s functions (the definition
/// [`round`] is an inlined rewrite of).
fn round_std(x: f64, mode: Rounding) -> f64 {
    match mode {
        Rounding::HalfEven => x.round_ties_even(),
        Rounding::HalfAway => x.round(),
        Rounding::HalfUp => {
            let f = x.floor();
            if x - f >= 0.5 {
                f + 1.0
            } else {
                f
            }
        }
        Rounding::Floor => x.floor(),
    }
}

proptest! {
    #[test]
    fn fast_round_matches_std(
        x in prop_oneof![
            any::<f64>(),
            (-1e6f64..1e6),
            (-4096i64..4096).prop_map(|k| k as f64 / 2.0),
            Just(0.49999999999999994), Just(-0.49999999999999994),
            Just(4_503_599_627_370_495.5), Just(-2.5), Just(f64::NAN),
        ],
    ) {
        for mode in [Rounding::HalfEven, Rounding::HalfAway, Rounding::HalfUp, Rounding::Floor] {
            let (a, b) = (round(x, mode), round_std(x, mode));
            prop_assert!(a == b || (a.is_nan() && b.is_nan()), "{x} {mode:?}: {a} vs {b}");
        }
    }

    #[test]
    fn q31_requant_within_one_lsb_of_f64(acc in -(1i64 << 31)..(1i64 << 31), m in 1e-6f64..4.0) {
        let g = p("gemmlowp");
        let exact = (acc as f64 * m).round();
        let got = requantize(acc, m, 0, i32::MIN, i32::MAX, &g) as f64;
        let exact = exact.clamp(i32::MIN as f64, i32::MAX as f64);
        prop_assert!((got - exact).abs() <= 1.0, "{acc} * {m}: {got} vs {exact}");
    }

    #[test]
    fn wide_accumulators_within_one_lsb(acc in -(1i64 << 46)..(1i64 << 46), m in 1e-9f64..1e-4) {
        for name in ["gemmlowp", "exact", "f32-rne"] {
            let got = rq(acc, m, &p(name)) as f64;
            let exact = (acc as f64 * m).round().clamp(i32::MIN as f64, i32::MAX as f64);
            // f32 loses bits of a 46-bit accumulator; allow its relative error.
            let tol = if name == "f32-rne" { 1.0 + exact.abs() * 4e-7 } else { 1.0 };
            prop_assert!((got - exact).abs() <= tol, "{name}: {acc} * {m}: {got} vs {exact}");
        }
    }

    #[test]
    fn rdbpot_matches_published_definition(x in any::<i32>(), e in 0u32..=31) {
        prop_assert_eq!(rounding_divide_by_pot(x, e), rdbpot_published(x, e));
    }

    #[test]
    fn prepared_requantizer_matches_the_definition(
        acc in prop_oneof![any::<i64>(), -(1i64 << 24)..(1i64 << 24)],
        m in prop_oneof![any::<f64>(), 1e-7f64..1.0, -1.0f64..1.0, Just(0.0), Just(0.25)],
        zp in -300i32..300,
        bias in prop_oneof![any::<f64>(), -1e5f64..1e5, (-1000i32..1000).prop_map(f64::from)],
    ) {
        for profile in presets() {
            let want = requantize_biased(acc, bias, m, zp, -128, 127, &profile);
            let rq = Requantizer::new(bias, m, zp, -128, 127, &profile);
            prop_assert_eq!(rq.apply(acc), want, "{}: acc {} bias {} m {}", profile.name, acc, bias, m);
            let a32 = acc.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32;
            let mut out = [0i32; 1];
            rq.apply_slice(&[a32], &mut out);
            let want32 = requantize_biased(i64::from(a32), bias, m, zp, -128, 127, &profile);
            prop_assert_eq!(out[0], want32, "{} slice: acc {}", profile.name, a32);
        }
    }

    #[test]
    fn vectorized_slice_requantization_matches_apply(
        accs in proptest::collection::vec(
            prop_oneof![any::<i32>(), -70_000i32..70_000, -600i32..600], 1..40),
        m in prop_oneof![
            any::<f64>(), 1e-7f64..1.0, -1.0f64..1.0, Just(0.0), Just(0.5), Just(0.25),
            Just(f64::NAN), Just(f64::INFINITY), Just(-f64::INFINITY), Just(1.0),
        ],
        zp in -70_000i32..70_000,
        bias in prop_oneof![any::<f64>(), -1e5f64..1e5, (-1000i32..1000).prop_map(f64::from)],
        range in 0usize..5,
    ) {
        let (lo, hi) = [(0, 255), (-128, 127), (0, 65535), (-32768, 32767), (-100_000, 5_000_000)][range];
        let zp = if range < 2 { zp.rem_euclid(256) + lo } else { zp };
        for profile in presets_with_every_rounding() {
            let rq = Requantizer::new(bias, m, zp, lo, hi, &profile);
            let mut got = vec![0i64; accs.len()];
            rq.apply_slice_into(&accs, &mut got, i64::from);
            let mut slice = vec![0i32; accs.len()];
            rq.apply_slice(&accs, &mut slice);
            for (i, &a) in accs.iter().enumerate() {
                let want = rq.apply(i64::from(a));
                prop_assert_eq!(got[i], i64::from(want), "{}: acc {} bias {} m {} zp {}", profile.name, a, bias, m, zp);
                prop_assert_eq!(slice[i], want, "{} apply_slice: acc {}", profile.name, a);
            }
        }
    }

    #[test]
    fn prepared_fixed_point_add_matches_the_definition(
        qa in -128i32..256, qb in -128i32..256, za in -128i32..256, zb in -128i32..256,
        m_a in prop_oneof![1e-4f64..8.0, Just(0.0), Just(f64::NAN), Just(f64::INFINITY), -2.0f64..2.0],
        m_b in prop_oneof![1e-4f64..8.0, Just(0.0), Just(1.0), -2.0f64..2.0],
        zc in -128i32..256,
        signed in any::<bool>(),
    ) {
        let (lo, hi) = if signed { (-128, 127) } else { (0, 255) };
        for profile in presets() {
            let want = add_fixed_point(qa, za, m_a, qb, zb, m_b, zc, lo, hi, &profile);
            let got = FixedPointAdd::new(m_a, m_b, zc, lo, hi, &profile).apply(qa, za, qb, zb);
            prop_assert_eq!(got, want, "{}: {} {} {} {}", profile.name, qa, qb, m_a, m_b);
        }
    }

    #[test]
    fn no_profile_panics_or_leaves_the_range(
        acc in any::<i64>(), m in any::<f64>(), zp in -300i32..300, bias in any::<f64>(),
        q in any::<i32>(),
    ) {
        for profile in presets() {
            for v in [
                requantize(acc, m, zp, -128, 127, &profile),
                requantize_biased(acc, bias, m, zp, -128, 127, &profile),
                rescale(q, zp, m, zp, -128, 127, &profile),
            ] {
                prop_assert!((-128..=127).contains(&v), "{}: {v}", profile.name);
            }
        }
    }

    #[test]
    fn weights_within_63_never_saturate(
        pairs in proptest::collection::vec((any::<u8>(), -63i8..=63), 0..300)
    ) {
        let (a, b): (Vec<u8>, Vec<i8>) = pairs.into_iter().unzip();
        prop_assert_eq!(i64::from(saturating_pair_dot(&a, &b)), exact_dot(&a, &b));
    }
}

#[test]
fn float_requant_modes_differ_where_expected() {
    // 2^24 + 3 is not an f32: f32(acc) rounds to 2^24 + 4.
    let acc = (1 << 24) + 3;
    assert_eq!(rq(acc, 1.0, &p("exact")), acc as i32);
    assert_eq!(rq(acc, 1.0, &p("f32-rne")), acc as i32 + 1);
    // 2049 is not an f16: held in f16 it becomes 2048 (tie to even).
    assert_eq!(rq(2049, 1.0, &p("f32-rne")), 2049);
    assert_eq!(rq(2049, 1.0, &p("fp16-epilogue")), 2048);
    // Ties follow each profile's rounding.
    assert_eq!(rq(5, 0.5, &p("f32-rne")), 2);
    assert_eq!(rq(-5, 0.5, &p("exact")), -2);
    // NaN gives qmin; an infinite multiplier saturates; a negative one
    // scales exactly.
    assert_eq!(requantize(10, f64::NAN, 0, -128, 127, &p("gemmlowp")), -128);
    assert_eq!(
        requantize(10, f64::INFINITY, 0, -128, 127, &p("pot-shift")),
        127
    );
    assert_eq!(rq(10, -0.25, &p("gemmlowp")), -3);
    assert_eq!(rq(10, -0.25, &p("pot-shift")), -2);
    assert_eq!(rq(i64::MAX, 1e30, &p("gemmlowp")), i32::MAX);
}

#[test]
fn pot_shift_rounds_multiplier_then_shifts_half_up() {
    assert_eq!(pot_exponent(0.3), Some(-2));
    assert_eq!(pot_exponent(0.25), Some(-2));
    assert_eq!(pot_exponent(0.36), Some(-1)); // log2 0.36 = -1.47
    assert_eq!(pot_exponent(8.0), Some(3));
    assert_eq!(pot_exponent(0.0), None);
    let pot = p("pot-shift");
    // m = 0.3 -> 0.25: ±6 -> ±1.5, ±2 -> ±0.5, ties up.
    for (acc, want) in [
        (6, 2),
        (-6, -1),
        (2, 1),
        (-2, 0),
        (10, 3),
        (-10, -2),
        (7, 2),
    ] {
        assert_eq!(rq(acc, 0.3, &pot), want, "{acc}");
    }
    assert_eq!(rq(3, 5.0, &pot), 12);
}

#[test]
fn bias_placement() {
    let int_bias = p("f32-rne");
    let float_bias = p("float-bias");
    assert_eq!(quantize_bias(0.5), 0);
    assert_eq!(quantize_bias(1.5), 2);
    assert_eq!(quantize_bias(-2.5), -2);
    assert_eq!(quantize_bias(1e12), i32::MAX);
    assert_eq!(quantize_bias(f64::NAN), 0);
    // bias 0.4 accumulator units, multiplier 2.5: int32 bias rounds it to 0
    // first; float bias adds 1.0 after scaling.
    assert_eq!(requantize_biased(0, 0.4, 2.5, 0, -128, 127, &int_bias), 0);
    assert_eq!(requantize_biased(0, 0.4, 2.5, 0, -128, 127, &float_bias), 1);
    // Integer requantization always folds the bias into the accumulator.
    assert_eq!(
        requantize_biased(4, 3.6, 0.5, 0, -128, 127, &p("gemmlowp")),
        4
    );
    // f16 epilogue: 2048 + 1 (bias) is held in f16 as 2048.
    assert_eq!(
        requantize_biased(2048, 1.0, 1.0, 0, I32.0, I32.1, &float_bias),
        2049
    );
    let fp16 = p("fp16-epilogue");
    assert_eq!(
        requantize_biased(2048, 1.0, 1.0, 0, I32.0, I32.1, &fp16),
        2048
    );
}

#[test]
fn rescale_float_and_fixed_point() {
    let float = p("f32-rne");
    let fixed = p("gemmlowp");
    assert_eq!(rescale(13, 3, 0.25, 1, -128, 127, &float), 3); // 2.5 -> 2, +1
    assert_eq!(rescale(13, 3, 0.25, 1, -128, 127, &fixed), 4); // 2.5 -> 3, +1
    assert_eq!(rescale(-7, 3, 0.25, 0, -128, 127, &fixed), -3); // -2.5 -> -3
    assert_eq!(rescale(-7, 3, 0.25, 0, -128, 127, &float), -2);
    assert_eq!(rescale(100, 0, 0.3, 0, -128, 127, &p("pot-shift")), 25);
    assert_eq!(quantize_f32(1.25, 0.5, 0, -128, 127, Rounding::HalfEven), 2);
    assert_eq!(quantize_f32(1.25, 0.5, 0, -128, 127, Rounding::HalfAway), 3);
    assert_eq!(
        quantize_f32(f32::NAN, 0.1, 5, 0, 255, Rounding::HalfEven),
        0
    );
}

#[test]
fn avx2_saturation_example_from_fixtures() {
    let a = [255u8; 64];
    let b = [127i8; 64];
    assert_eq!(saturating_pair_dot(&a, &b), 1_048_544); // 32 pairs × 32,767
    assert_eq!(exact_dot(&a, &b), 2_072_640);
    assert_eq!(p("avx2-u8s8").dot_u8_i8(&a, &b), 1_048_544);
    assert_eq!(p("f32-rne").dot_u8_i8(&a, &b), 2_072_640);
    // Negative saturation, odd tail paired with zero, common prefix.
    assert_eq!(
        saturating_pair_dot(&[255, 255, 255], &[-128, -128, -128]),
        -32768 - 32640
    );
    assert_eq!(saturating_pair_dot(&[1, 2, 3], &[4, 5]), 14);
    assert_eq!(saturating_pair_dot(&[], &[]), 0);
}

#[test]
fn exact_int16_accumulation() {
    let a = [i16::MIN; 4];
    let b = [i16::MIN; 4];
    assert_eq!(exact_dot(&a, &b), 4 * (1i64 << 30));
    let w = [i8::MIN; 600];
    let x = [i16::MIN; 600];
    assert_eq!(exact_dot(&x, &w), 600 * (1i64 << 22));
    use AccumulatorWidth::{I32 as N, I64 as W};
    use Operand::*;
    for (k, a, b, want) in [
        (65793, U8, I8, N),
        (65794, U8, I8, W),
        (131071, I8, I8, N),
        (131072, I8, I8, W),
        (511, I16, I8, N),
        (512, I16, I8, W),
        (1, I16, I16, N),
        (2, I16, I16, W),
    ] {
        assert_eq!(accumulator_width(k, a, b), want, "{k} {a:?}x{b:?}");
    }
}

#[test]
fn presets_are_valid_and_named() {
    let all = presets();
    let names: Vec<&str> = all.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, PRESET_NAMES);
    for p in &all {
        p.validate("builtin").unwrap();
        assert!(
            !p.description.is_empty() && !p.sources.is_empty(),
            "{}",
            p.name
        );
    }
    assert_eq!(ArithProfile::preset(" F32-RNE ").unwrap().name, "f32-rne");
    let e = ArithProfile::preset("vnni").unwrap_err().to_string();
    assert!(e.contains("vnni") && e.contains("avx2-u8s8"), "{e}");
    assert_eq!(wire(&Requant::Q31Shift), "q31-shift");
    assert_eq!(wire(&Accumulator::I16SatPairs), "i16-sat-pairs");
    assert_eq!(wire(&Lowering::Onnxruntime), "onnxruntime");
}

/// The presets that model onnxruntime's kernels lower what it fuses, the
/// integer-target archetypes every group, `ort-unfused` none; only the
/// latter is float execution.
#[test]
fn presets_lower_by_what_they_model() {
    for p in presets() {
        let want = match p.name.as_str() {
            "f32-rne" | "avx2-u8s8" => Lowering::Onnxruntime,
            "ort-unfused" => Lowering::None,
            _ => Lowering::All,
        };
        assert_eq!(p.lowering, want, "{}", p.name);
        assert_eq!(p.is_float_execution(), want == Lowering::None, "{}", p.name);
    }
    // ort-unfused is f32-rne's arithmetic without any fusion
    let (unfused, ort) = (p("ort-unfused"), ArithProfile::onnxruntime().clone());
    assert_eq!(
        ArithProfile {
            name: ort.name.clone(),
            description: ort.description.clone(),
            lowering: ort.lowering,
            sources: ort.sources.clone(),
            ..unfused
        },
        ort
    );
    // a profile without the field (written before it existed) keeps
    // onnxruntime's rules
    let mut v = serde_json::to_value(p("gemmlowp")).unwrap();
    v.as_object_mut().unwrap().remove("lowering");
    let old: ArithProfile = serde_json::from_value(v).unwrap();
    assert_eq!(old.lowering, Lowering::Onnxruntime);
}

/// A case CI found on a CPU without F16C, where `half::f16::from_f64` rounds
/// on the top 32 bits of the f64 alone: f32(−68754 · m) = −23688.0078125 is
/// just past the tie between −23680 and −23696, so the fp16 epilogue holds
/// −23696; plus the held bias term 32384 that is 8688, on every CPU.
#[test]
fn fp16_epilogue_rounds_just_past_a_tie_on_every_cpu() {
    let profile = p("fp16-epilogue");
    let rq = Requantizer::new(
        94008.91855177573,
        0.34453280918790363,
        0,
        0,
        65535,
        &profile,
    );
    assert_eq!(rq.apply(-68754), 8688);
    let mut slice = [0i32; 1];
    rq.apply_slice(&[-68754], &mut slice);
    assert_eq!(slice[0], 8688);
}

/// A seeded stream of f64 forms like those of 8-bit layers: multipliers
/// log-uniform in `[1e-5, 0.5]`, int32 biases, u8 or i8 output ranges
/// with a zero point inside, and an accumulator bound (at most
/// `max_bound`).
fn f64_forms(n: usize, max_bound: i64) -> Vec<(FloatRequant, i64)> {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    (0..n)
        .map(|_| {
            let u = (next() >> 11) as f64 / (1u64 << 53) as f64;
            let multiplier = 10f64.powf(-5.0 + u * (0.5f64.log10() + 5.0));
            let bias = (next() % 100_001) as i32 - 50_000;
            let (qmin, qmax) = if next() % 2 == 0 {
                (0, 255)
            } else {
                (-128, 127)
            };
            let zero = qmin + (next() % 256) as i32;
            // the sums reach 16 to 1024 output steps from zero (mostly
            // all the levels), within `max_bound`
            let reach = (16u64 << (next() % 7)) as f64;
            let bound = ((reach / multiplier) as i64).clamp(1, max_bound);
            let form = FloatRequant::F64 {
                bias,
                multiplier,
                lo: f64::from(qmin - zero),
                hi: f64::from(qmax - zero),
                zero,
            };
            (form, bound)
        })
        .collect()
}

#[test]
fn narrowed_forms_agree_on_every_accumulator_of_their_range() {
    let forms = f64_forms(160, 400_000);
    let mut narrowed = 0;
    for (wide, bound) in forms {
        let narrow = wide.narrowed(bound);
        if narrow == wide {
            continue;
        }
        assert!(matches!(narrow, FloatRequant::F32 { .. }), "{narrow:?}");
        narrowed += 1;
        // every accumulator of the range, through the slice loops the
        // kernels are checked against
        let acc: Vec<i32> = (-bound as i32..=bound as i32).collect();
        let (mut a, mut b) = (vec![0i32; acc.len()], vec![0i32; acc.len()]);
        wide.apply_slice_into(&acc, &mut a, |v| v);
        narrow.apply_slice_into(&acc, &mut b, |v| v);
        if let Some(i) = (0..acc.len()).find(|&i| a[i] != b[i]) {
            panic!(
                "{wide:?} as {narrow:?}: acc {} gives {} vs {}",
                acc[i], a[i], b[i]
            );
        }
    }
    // most forms narrow (the check is not refusing everything)
    assert!(narrowed >= 100, "{narrowed} of 160 narrowed");
}

#[test]
fn narrowing_keeps_the_forms_it_cannot_prove() {
    let wide = |multiplier: f64| FloatRequant::F64 {
        bias: 5,
        multiplier,
        lo: -128.0,
        hi: 127.0,
        zero: 0,
    };
    // not an f64 form, a multiplier that is not positive or underflows f32,
    // a bound outside i32, 16-bit outputs beyond the checked levels
    let f32_form = FloatRequant::F32 {
        bias: 5,
        multiplier: 0.01,
        lo: -128.0,
        hi: 127.0,
        zero: 0,
    };
    assert_eq!(f32_form.narrowed(1000), f32_form);
    for m in [0.0, -0.01, 1e-50, f64::NAN] {
        let w = wide(m);
        assert!(matches!(w.narrowed(1000), FloatRequant::F64 { .. }), "{m}");
    }
    for b in [-1, i64::from(i32::MAX) + 1] {
        assert!(matches!(wide(0.01).narrowed(b), FloatRequant::F64 { .. }));
    }
    let wide16 = FloatRequant::F64 {
        bias: 0,
        multiplier: 0.01,
        lo: -32768.0,
        hi: 32767.0,
        zero: 0,
    };
    assert_eq!(wide16.narrowed(1000), wide16);
    for (lo, hi) in [(-127.5, 127.0), (10.0, -10.0), (f64::NAN, 127.0)] {
        let odd = FloatRequant::F64 {
            bias: 0,
            multiplier: 0.01,
            lo,
            hi,
            zero: 0,
        };
        assert!(
            matches!(odd.narrowed(1000), FloatRequant::F64 { .. }),
            "{lo} {hi}"
        );
    }
    // a power-of-two multiplier is the same in f32: ties included (every
    // odd accumulator is one at 0.5), the nearest f32 form is taken
    let half = wide(0.5).narrowed(300);
    assert!(
        matches!(half, FloatRequant::F32 { multiplier, .. } if multiplier == 0.5),
        "{half:?}"
    );
    assert!((-300..=300).all(|a| half.apply(a) == wide(0.5).apply(a)));
}

#[test]
fn some_f64_forms_have_no_f32_twin_and_keep_their_form() {
    // a form whose f64 value at some accumulator lies closer to a
    // half-integer than the nearest f32 product can tell: the check must
    // find the accumulator where the nearest f32 form differs, so
    // narrowing either refuses or picks another multiplier that agrees
    let mut refused = 0;
    for (wide, bound) in f64_forms(160, 400_000) {
        let FloatRequant::F64 {
            bias,
            multiplier,
            lo,
            hi,
            zero,
        } = wide
        else {
            unreachable!()
        };
        let nearest = FloatRequant::F32 {
            bias,
            multiplier: multiplier as f32,
            lo: lo as f32,
            hi: hi as f32,
            zero,
        };
        let b = bound as i32;
        let differs = (-b..=b).any(|a| nearest.apply(a) != wide.apply(a));
        let narrow = wide.narrowed(bound);
        if differs {
            assert_ne!(narrow, nearest, "{wide:?}: the nearest f32 form differs");
        }
        refused += usize::from(narrow == wide);
    }
    // the stream has forms the check must refuse (it is not vacuous)
    assert!(refused > 0);
}

#[test]
fn narrowing_checks_the_low_end_of_the_range() {
    // forms whose nearest f32 twin differs from them at one accumulator
    // only, the lowest: there the f64 value is -11.5 and a bit more (rounds
    // to -11) while the f32 one is -11.5 exactly (rounds to -12, even), one
    // level below the lowest the f64 form reaches, so no level's threshold
    // sees it; the sums (bias included) run from -n to n - 1000, short of
    // +11.5
    let mut found = 0;
    for n in 5_000..40_000i32 {
        let multiplier = 11.5 / f64::from(n) * (1.0 - 1e-12);
        let bound = n - 500;
        let form = |multiplier| FloatRequant::F64 {
            bias: -500,
            multiplier,
            lo: -128.0,
            hi: 127.0,
            zero: 0,
        };
        let (wide, nearest) = (form(multiplier), form(multiplier).narrowed(0));
        // (a bound of 0 checks one accumulator: the nearest f32 form or none)
        let FloatRequant::F32 { .. } = nearest else {
            continue;
        };
        if (wide.apply(-bound), nearest.apply(-bound)) != (-11, -12)
            || (-bound + 1..=bound).any(|a| wide.apply(a) != nearest.apply(a))
        {
            continue;
        }
        found += 1;
        let narrow = wide.narrowed(i64::from(bound));
        assert_ne!(narrow, nearest);
        assert!(
            (-bound..=bound).all(|a| narrow.apply(a) == wide.apply(a)),
            "{narrow:?}"
        );
        if found == 3 {
            return;
        }
    }
    panic!("{found} forms of the kind found");
}
