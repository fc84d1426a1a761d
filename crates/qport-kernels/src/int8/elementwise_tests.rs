//! Every row of the dispatch table against the definitions.

use super::*;
use crate::dispatch::{supported_isas, with_isa};
use qport_core::arith::presets;

/// `x` rounded half to even, as the definitions round.
fn rne(x: f64) -> f64 {
    let r = x.round();
    if (x - x.trunc()).abs() == 0.5 {
        2.0 * (x / 2.0).round()
    } else {
        r
    }
}

fn inputs() -> Vec<f32> {
    let mut xs: Vec<f32> = (-600..600).map(|i| i as f32 * 0.37).collect();
    xs.extend([
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.5,
        1.5,
        -0.5,
        -2.5,
        1e30,
    ]);
    xs
}

fn quantize_def<T: QInt>(x: f32, scale: f32, zero: i32) -> i32 {
    let v = x / scale;
    if v.is_nan() {
        return T::MIN;
    }
    (rne(f64::from(v)) + f64::from(zero)).clamp(f64::from(T::MIN), f64::from(T::MAX)) as i32
}

/// [`quantize`] to `T` equals [`quantize_def`] on every element of `xs`.
fn quantizes_as_defined<T: QInt>(xs: &[f32], scale: f32, zero: i32, isa: crate::Isa) {
    let got: Vec<T> = quantize(xs, scale, zero);
    for (&x, &g) in xs.iter().zip(&got) {
        assert_eq!(g.widen(), quantize_def::<T>(x, scale, zero), "{isa} {x}");
    }
}

#[test]
fn quantization_equals_the_definition_on_every_row() {
    let xs = inputs();
    for isa in supported_isas() {
        with_isa(isa, || {
            for (scale, zero) in [(0.1f32, 128), (0.5, 0), (3e-5, 255), (1.0, 7)] {
                quantizes_as_defined::<u8>(&xs, scale, zero, isa);
            }
            for (scale, zero) in [(1.0f32, -3), (0.0625, 0), (0.2, 127)] {
                quantizes_as_defined::<i8>(&xs, scale, zero, isa);
            }
        });
    }
}

#[test]
fn quantization_under_every_rounding_equals_the_definition_on_every_row() {
    use qport_core::arith::{quantize_f32, Rounding};
    let mut xs = inputs();
    // ties and near-ties at every scale below, the range's edges
    xs.extend((-1100..1100).map(|i| i as f32 * 0.05));
    xs.extend([-0.0, 1e-30, -1e-30, f32::MAX, f32::MIN, 255.49, -128.51]);
    for isa in supported_isas() {
        with_isa(isa, || {
            for mode in [
                Rounding::Floor,
                Rounding::HalfUp,
                Rounding::HalfAway,
                Rounding::HalfEven,
            ] {
                for (scale, zero) in [(0.1f32, 128), (0.5, 0), (3e-5, 255), (0.05, 7)] {
                    let mut got = vec![0u8; xs.len()];
                    quantize_rounding_into(&xs, scale, zero, mode, &mut got);
                    for (&x, &g) in xs.iter().zip(&got) {
                        let want = quantize_f32(x, scale, zero, 0, 255, mode);
                        assert_eq!(i32::from(g), want, "{isa} {mode:?} {x} / {scale} + {zero}");
                    }
                }
                for (scale, zero) in [(1.0f32, -3), (0.05, 0), (0.2, 127), (0.1, -128)] {
                    let mut got = vec![0i8; xs.len()];
                    quantize_rounding_into(&xs, scale, zero, mode, &mut got);
                    for (&x, &g) in xs.iter().zip(&got) {
                        let want = quantize_f32(x, scale, zero, -128, 127, mode);
                        assert_eq!(i32::from(g), want, "{isa} {mode:?} {x} / {scale} + {zero}");
                    }
                }
            }
        });
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
    /// Random bit patterns (every class of f32), scales and zero points:
    /// every table row equals the definition under every rounding.
    #[test]
    fn random_floats_quantize_as_defined_under_every_rounding(
        bits in proptest::collection::vec(proptest::prelude::any::<u32>(), 1..80),
        near in proptest::collection::vec(-600i32..600, 1..80),
        scale_bits in 0.001f32..4.0, zero in 0i32..256,
    ) {
        use qport_core::arith::{quantize_f32, Rounding};
        let mut xs: Vec<f32> = bits.iter().map(|&b| f32::from_bits(b)).collect();
        // values near ties after the division
        xs.extend(near.iter().map(|&k| (k as f32 + 0.5) * scale_bits));
        for isa in supported_isas() {
            with_isa(isa, || {
                for mode in [Rounding::Floor, Rounding::HalfUp, Rounding::HalfAway, Rounding::HalfEven] {
                    let mut got = vec![0u8; xs.len()];
                    quantize_rounding_into(&xs, scale_bits, zero, mode, &mut got);
                    for (&x, &g) in xs.iter().zip(&got) {
                        assert_eq!(i32::from(g), quantize_f32(x, scale_bits, zero, 0, 255, mode),
                            "{} {:?} {}", isa, mode, x);
                    }
                }
            });
        }
    }
}

#[test]
fn dequantization_equals_the_definition_on_every_row() {
    let xu: Vec<u8> = (0..=255).collect();
    let xi: Vec<i8> = (-128..=127).collect();
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    for isa in supported_isas() {
        with_isa(isa, || {
            for (scale, zero) in [(0.1f32, 128), (0.003, 0), (7.5, -3), (1e-30, 255)] {
                let want_u: Vec<f32> = xu
                    .iter()
                    .map(|&v| (v as i64 - zero as i64) as f32 * scale)
                    .collect();
                let want_i: Vec<f32> = xi
                    .iter()
                    .map(|&v| (v as i64 - zero as i64) as f32 * scale)
                    .collect();
                let (mut gu, mut gi) = (vec![0f32; 256], vec![0f32; 256]);
                dequantize(&xu, scale, zero, &mut gu);
                dequantize(&xi, scale, zero, &mut gi);
                assert_eq!(bits(&gu), bits(&want_u), "{isa}");
                assert_eq!(bits(&gi), bits(&want_i), "{isa}");
            }
        });
    }
}

#[test]
fn addition_equals_onnxruntimes_loop_on_every_row() {
    let a: Vec<u8> = (0..1000).map(|i| (i * 37 % 256) as u8).collect();
    let b: Vec<u8> = (0..1000).map(|i| (i * 101 % 256) as u8).collect();
    let (ai, bi): (Vec<i8>, Vec<i8>) = (
        a.iter().map(|&v| v as i8).collect(),
        b.iter().map(|&v| v as i8).collect(),
    );
    for isa in supported_isas() {
        with_isa(isa, || {
            for (r_ac, r_bc, fixed) in [(0.7f32, 0.45, 3.25), (1.9, 0.01, -100.5), (0.5, 0.5, 0.0)]
            {
                let def = |x: i32, y: i32, lo: f32, hi: f32| {
                    let v = (x as f32).mul_add(r_ac, (y as f32).mul_add(r_bc, fixed));
                    rne(f64::from(v)).clamp(f64::from(lo), f64::from(hi)) as i32
                };
                let k = AddParams {
                    r_ac,
                    r_bc,
                    fixed,
                    lo: 0.0,
                    hi: 255.0,
                };
                let mut out = vec![0u8; a.len()];
                add(&a, &b, &k, &mut out);
                for i in 0..a.len() {
                    let want = def(i32::from(a[i]), i32::from(b[i]), 0.0, 255.0);
                    assert_eq!(i32::from(out[i]), want, "{isa} u8 {i}");
                }
                let k = AddParams {
                    lo: -128.0,
                    hi: 127.0,
                    ..k
                };
                let mut out = vec![0i8; a.len()];
                add(&ai, &bi, &k, &mut out);
                for i in 0..a.len() {
                    let want = def(i32::from(ai[i]), i32::from(bi[i]), -128.0, 127.0);
                    assert_eq!(i32::from(out[i]), want, "{isa} i8 {i}");
                }
            }
        });
    }
}

/// [`add`] on every row gives the portable loop's bytes over every pair
/// of 8-bit values (lengths 65536 and 65536 − 5, so the vector loops'
/// tails run too), for parameter sets that round, clamp at both ends and
/// produce exact halves.
#[test]
fn addition_on_every_row_equals_the_loop_on_every_pair() {
    // `add` on the active row gives `add_loop`'s values, every one written
    // (the two outputs start from different bytes)
    fn same<T: QInt + PartialEq>(a: &[T], b: &[T], k: &AddParams, at: &str) {
        let (mut got, mut want) = (vec![T::truncate(7); a.len()], vec![T::truncate(9); a.len()]);
        add(a, b, k, &mut got);
        add_loop(a, b, k, &mut want);
        assert!(got == want, "{at}");
    }
    let a: Vec<u8> = (0..65536).map(|i| (i >> 8) as u8).collect();
    let b: Vec<u8> = (0..65536).map(|i| (i & 255) as u8).collect();
    let ai: Vec<i8> = a.iter().map(|&v| v as i8).collect();
    let bi: Vec<i8> = b.iter().map(|&v| v as i8).collect();
    let ks = [
        (0.7f32, 0.45, 3.25),
        (1.9, 0.01, -100.5),
        (0.5, 0.5, 0.0),
        (0.5, 0.25, 0.5),
        (3.0, -2.0, 7.0),
        // a product of infinity and zero: NaN goes to `lo`
        (f32::INFINITY, 0.5, 0.0),
        // sums past 2^15, which the 16-bit packs saturate on the way
        (200.0, 150.0, -3.5),
        (-200.0, 150.0, 3.5),
    ];
    for isa in supported_isas() {
        with_isa(isa, || {
            for (r_ac, r_bc, fixed) in ks {
                for n in [65536, 65531] {
                    let k = AddParams {
                        r_ac,
                        r_bc,
                        fixed,
                        lo: 0.0,
                        hi: 255.0,
                    };
                    same(&a[..n], &b[..n], &k, &format!("{isa} u8 {r_ac} {n}"));
                    let k = AddParams {
                        lo: -128.0,
                        hi: 127.0,
                        ..k
                    };
                    same(&ai[..n], &bi[..n], &k, &format!("{isa} i8 {r_ac} {n}"));
                    // a clamp inside the type's range (a fused ReLU)
                    let k = AddParams { lo: 0.0, ..k };
                    same(&ai[..n], &bi[..n], &k, &format!("{isa} i8 relu {r_ac} {n}"));
                    let k = AddParams {
                        lo: 10.0,
                        hi: 200.0,
                        ..k
                    };
                    same(&a[..n], &b[..n], &k, &format!("{isa} u8 narrow {r_ac} {n}"));
                }
            }
        });
    }
}

#[test]
fn requantization_equals_the_requantizer_on_every_row() {
    let (c, os) = (3, 77);
    let acc: Vec<i32> = (0..c * os)
        .map(|i| (i as i32 * 7919) % 40_000 - 20_000)
        .collect();
    for p in presets() {
        let rq: Vec<Requantizer> = (0..c)
            .map(|ch| {
                Requantizer::new(
                    ch as f64 * 31.0 - 40.0,
                    0.001 + ch as f64 * 0.0037,
                    5,
                    -128,
                    127,
                    &p,
                )
            })
            .collect();
        let want: Vec<i8> = acc
            .chunks(os)
            .zip(&rq)
            .flat_map(|(a, r)| {
                a.iter()
                    .map(|&v| r.apply(i64::from(v)) as i8)
                    .collect::<Vec<_>>()
            })
            .collect();
        for isa in supported_isas() {
            let mut got = vec![0i8; c * os];
            with_isa(isa, || requantize(&rq, &acc, os, &mut got));
            assert_eq!(got, want, "{isa} {}", p.name);
        }
    }
}

/// Accumulators for the float requantization kernels: ordinary sums, the
/// i32 extremes and values whose sum with a large bias leaves i32.
fn requant_acc() -> impl proptest::strategy::Strategy<Value = i32> {
    use proptest::prelude::*;
    prop_oneof![
        -40_000i32..40_000,
        // the products of multipliers near 1/2 inside the 8-bit range
        -600i32..600,
        Just(i32::MIN),
        Just(i32::MAX),
        any::<i32>(),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
    /// The SIMD float requantization ([`qport_core::arith::FloatRequant`]
    /// in 16 and 8 lanes, masked tails, the blocks where the i32 bias sum
    /// overflows) equals `Requantizer::apply` on every row of the table,
    /// for both float policies, u8 and i8 outputs, ties and NaN
    /// multipliers included.
    #[test]
    fn float_requantization_equals_the_requantizer(
        acc in proptest::collection::vec(requant_acc(), 0..80),
        bias in proptest::prop_oneof![
            -5000i32..5000,
            -300i32..300,
            proptest::prelude::Just(i32::MAX),
            proptest::prelude::Just(i32::MIN + 1),
            proptest::prelude::any::<i32>(),
        ],
        multiplier in proptest::prop_oneof![
            1e-5f64..0.05,
            proptest::prelude::Just(0.5),
            proptest::prelude::Just(0.25),
            proptest::prelude::Just(f64::NAN),
            -0.01f64..0.01,
            // f64 products just off a half-integer, which the f32
            // multiplier puts on it (or on the other side)
            proptest::prelude::Just(0.5 + 1e-9),
            proptest::prelude::Just(0.5 - 1e-9),
            proptest::prelude::Just(0.0),
            // multipliers f32 cannot hold as normal numbers
            1e-45f64..1e-29,
            1e29f64..1e45,
        ],
        zero in -20i32..300,
        signed in proptest::prelude::any::<bool>(),
    ) {
        for name in ["f32-rne", "exact"] {
            let p = qport_core::arith::ArithProfile::preset(name).unwrap();
            let (lo, hi) = if signed { (-128, 127) } else { (0, 255) };
            let z = zero.clamp(lo, hi);
            let r = Requantizer::new(f64::from(bias), multiplier, z, lo, hi, &p);
            proptest::prop_assert!(r.float_form().is_some(), "{name}: a float form");
            let want: Vec<i32> = acc.iter().map(|&v| r.apply(i64::from(v))).collect();
            // one channel of the whole slice, and two channels of half each
            let os = acc.len() / 2;
            for isa in supported_isas() {
                if signed {
                    let mut got = vec![0i8; acc.len()];
                    with_isa(isa, || requantize(std::slice::from_ref(&r), &acc, acc.len(), &mut got));
                    let got: Vec<i32> = got.iter().map(|&v| i32::from(v)).collect();
                    proptest::prop_assert_eq!(&got, &want, "{} {} i8", isa, name);
                } else {
                    let mut got = vec![0u8; acc.len()];
                    with_isa(isa, || requantize(std::slice::from_ref(&r), &acc, acc.len(), &mut got));
                    let got: Vec<i32> = got.iter().map(|&v| i32::from(v)).collect();
                    proptest::prop_assert_eq!(&got, &want, "{} {} u8", isa, name);
                }
                if os > 0 {
                    let two = [r.clone(), r.clone()];
                    let mut got = vec![0u8; 2 * os];
                    with_isa(isa, || requantize(&two, &acc[..2 * os], os, &mut got));
                    let got: Vec<i32> = got.iter().map(|&v| i32::from(v as i8 as u8)).collect();
                    let want: Vec<i32> = want[..2 * os].iter().map(|&v| v & 0xff).collect();
                    proptest::prop_assert_eq!(&got, &want, "{} {} two rows", isa, name);
                }
            }
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// Every row of the dispatch table (the VBMI byte permutes where the
    /// CPU has them, AVX2 gathers on the other x86 rows) looks each
    /// element up in its channel's row, for u8
    /// and i8 inputs and outputs, over planes shorter and longer than a
    /// vector, every byte value and several images.
    #[test]
    fn lookups_equal_the_table_on_every_row(
        channels in 1usize..5, inner in 1usize..150, images in 1usize..3,
        seed in proptest::prelude::any::<u64>(),
    ) {
        let n = images * channels * inner;
        let mut s = seed | 1;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        // every byte value among the inputs (then random ones)
        let xu: Vec<u8> = (0..n).map(|i| if i < 256 { i as u8 } else { next() as u8 }).collect();
        let xi: Vec<i8> = xu.iter().map(|&v| v as i8).collect();
        let table: Vec<u8> = (0..channels * 256).map(|_| next() as u8).collect();
        let ti: Vec<i8> = table.iter().map(|&v| v as i8).collect();
        let want_u: Vec<u8> = (0..n)
            .map(|j| table[(j / inner % channels) * 256 + usize::from(xu[j])])
            .collect();
        // an i8 input indexes its value + 128
        let want_i: Vec<u8> = (0..n)
            .map(|j| table[(j / inner % channels) * 256 + (i32::from(xi[j]) + 128) as usize])
            .collect();
        for isa in supported_isas() {
            let mut got = vec![0u8; n];
            with_isa(isa, || lookup_planes(&xu, &table, channels, inner, &mut got));
            proptest::prop_assert_eq!(&got, &want_u, "{} u8 -> u8", isa);
            let mut got = vec![0i8; n];
            with_isa(isa, || lookup_planes(&xi, &ti, channels, inner, &mut got));
            let got: Vec<u8> = got.iter().map(|&v| v as u8).collect();
            proptest::prop_assert_eq!(&got, &want_i, "{} i8 -> i8", isa);
        }
    }
}

/// The lookup split over 1, 2 and 3 intra-op threads writes the same
/// bytes.
#[test]
fn lookups_are_the_same_on_any_thread_count() {
    let _g = crate::test_lock();
    let (channels, inner) = (37, 3001);
    let x: Vec<u8> = (0..channels * inner)
        .map(|i| (i * 31 % 256) as u8)
        .collect();
    let table: Vec<u8> = (0..channels * 256).map(|i| (i * 7 % 251) as u8).collect();
    let want: Vec<u8> = (0..x.len())
        .map(|j| table[(j / inner) * 256 + usize::from(x[j])])
        .collect();
    for t in [1, 2, 3] {
        crate::par::set_threads(t);
        let mut got = vec![0u8; x.len()];
        lookup_planes(&x, &table, channels, inner, &mut got);
        crate::par::set_threads(1);
        assert_eq!(got, want, "{t} threads");
    }
}

/// Every table row splits the pairs as the definition does, for u8 and i8,
/// over lengths around the 32-pair step, with halves of unequal length.
#[test]
fn split_pairs_on_every_row_is_the_definition() {
    let src: Vec<u8> = (0..301u32).map(|i| (i * 37 % 256) as u8).collect();
    for isa in supported_isas() {
        for len in [0usize, 1, 2, 31, 63, 64, 65, 127, 129, 200, 301] {
            for (ne, no) in [(len / 2, len / 2), (len / 2 + 1, len / 2), (len, 3)] {
                let s = &src[..len];
                let (mut e, mut o) = (vec![0xaau8; ne], vec![0x55u8; no]);
                with_isa(isa, || split_pairs(s, &mut e, &mut o));
                let n = ne.min(no).min(len / 2);
                for i in 0..ne {
                    let want = if i < n { s[2 * i] } else { 0xaa };
                    assert_eq!(e[i], want, "{isa:?} len {len} even {i}");
                }
                for i in 0..no {
                    let want = if i < n { s[2 * i + 1] } else { 0x55 };
                    assert_eq!(o[i], want, "{isa:?} len {len} odd {i}");
                }
                let si: Vec<i8> = s.iter().map(|&v| v as i8).collect();
                let (mut ei, mut oi) = (vec![0i8; n], vec![0i8; n]);
                with_isa(isa, || split_pairs(&si, &mut ei, &mut oi));
                assert!(ei.iter().zip(&e).all(|(a, b)| *a as u8 == *b), "{isa:?} i8");
                assert!(oi.iter().zip(&o).all(|(a, b)| *a as u8 == *b), "{isa:?} i8");
            }
        }
    }
}

/// Every table row folds the maxima as the definition does, for u8 and
/// i8 (values spanning the sign bit, where the two orders differ), over
/// lengths around the 16-, 32- and 64-byte steps, with `acc` longer and shorter than
/// `src`: nothing past the shorter written.
#[test]
fn max_assign_on_every_row_is_the_definition() {
    let a: Vec<u8> = (0..200u32).map(|i| (i * 73 % 256) as u8).collect();
    let b: Vec<u8> = (0..200u32).map(|i| (i * 151 % 256) as u8).collect();
    for isa in supported_isas() {
        for len in [
            0usize, 1, 15, 16, 17, 31, 32, 33, 56, 63, 64, 65, 112, 127, 128, 130,
        ] {
            for (na, nb) in [(len, len), (len + 3, len), (len, len + 5)] {
                let mut got = a[..na].to_vec();
                with_isa(isa, || max_assign(&mut got, &b[..nb]));
                for i in 0..na {
                    let want = if i < nb { a[i].max(b[i]) } else { a[i] };
                    assert_eq!(got[i], want, "{isa:?} u8 len {len} at {i}");
                }
                let mut gi: Vec<i8> = a[..na].iter().map(|&v| v as i8).collect();
                let bi: Vec<i8> = b[..nb].iter().map(|&v| v as i8).collect();
                with_isa(isa, || max_assign(&mut gi, &bi));
                for i in 0..na {
                    let want = if i < nb {
                        (a[i] as i8).max(bi[i])
                    } else {
                        a[i] as i8
                    };
                    assert_eq!(gi[i], want, "{isa:?} i8 len {len} at {i}");
                }
            }
        }
    }
}

/// Where a row runs the window maxima (AVX2 and AVX-512 rows, stride 1 or
/// 2) they
/// are the definition's, for u8 and i8 (values across the sign bit), any
/// kernel width 1 to 7, outputs around the 32- and 64-lane steps, rows
/// exactly as long as the windows read and longer; nothing past the
/// outputs is written. Elsewhere nothing is written at all.
#[test]
fn window_max_on_every_row_is_the_definition() {
    let src: Vec<u8> = (0..440u32).map(|i| (i * 89 % 256) as u8).collect();
    let mut ran = false;
    for isa in supported_isas() {
        for s in 1..=3usize {
            for k in 1..=7usize {
                for n in [1usize, 2, 31, 32, 33, 56, 63, 64, 65, 112, 130] {
                    for extra in [0usize, 1, 40] {
                        let row = &src[..s * (n - 1) + k + extra];
                        let mut got = vec![0xa5u8; n + 3];
                        let did = with_isa(isa, || window_max(row, (k, s), &mut got[..n]));
                        let ri: Vec<i8> = row.iter().map(|&v| v as i8).collect();
                        let mut gi = vec![0x5ai8; n + 3];
                        let did_i = with_isa(isa, || window_max(&ri, (k, s), &mut gi[..n]));
                        assert_eq!(did, did_i, "{isa:?} s {s}");
                        assert!(got[n..].iter().all(|&v| v == 0xa5), "{isa:?} past n");
                        assert!(gi[n..].iter().all(|&v| v == 0x5a), "{isa:?} past n, i8");
                        if !did {
                            assert!(got[..n].iter().all(|&v| v == 0xa5), "{isa:?} wrote");
                            continue;
                        }
                        ran = true;
                        for o in 0..n {
                            let w = &row[s * o..s * o + k];
                            let want = *w.iter().max().unwrap();
                            assert_eq!(got[o], want, "{isa:?} u8 s {s} k {k} n {n} at {o}");
                            let want = w.iter().map(|&v| v as i8).max().unwrap();
                            assert_eq!(gi[o], want, "{isa:?} i8 s {s} k {k} n {n} at {o}");
                        }
                    }
                }
            }
        }
    }
    if crate::isa().avx2() {
        assert!(ran, "the vector bodies never ran");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
    /// The per-column requantization equals `Requantizer::apply` element by
    /// element on every dispatch row: runs of 16 columns and masked tails,
    /// several rows, a different form per column (f32, f64, or the two
    /// mixed in one run), sums whose bias addition overflows i32.
    #[test]
    fn column_requantization_equals_the_requantizer(
        cols in proptest::collection::vec(
            (-5000i32..5000, 1e-5f64..0.05, -20i32..300, 0usize..3),
            0..40,
        ),
        rows in 1usize..4,
        seed in proptest::prelude::any::<u64>(),
        big_bias in proptest::prelude::any::<bool>(),
        signed in proptest::prelude::any::<bool>(),
    ) {
        let presets = ["f32-rne", "exact"].map(|n| qport_core::arith::ArithProfile::preset(n).unwrap());
        let (lo, hi) = if signed { (-128, 127) } else { (0, 255) };
        let rq: Vec<Requantizer> = cols
            .iter()
            .enumerate()
            .map(|(j, &(bias, m, z, which))| {
                // form 2: f32 on odd columns and f64 on even ones (runs of both)
                let p = &presets[if which == 2 { j % 2 } else { which }];
                let bias = if big_bias && j % 3 == 0 { i32::MAX - 7 } else { bias };
                Requantizer::new(f64::from(bias), m, z.clamp(lo, hi), lo, hi, p)
            })
            .collect();
        let forms: Vec<_> = rq.iter().map(|r| r.float_form().expect("a float form")).collect();
        let n = forms.len();
        let mut x = seed;
        let acc: Vec<i32> = (0..rows * n)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                match x >> 62 {
                    0 => (x >> 33) as i32,
                    _ => ((x >> 40) % 80_000) as i32 - 40_000,
                }
            })
            .collect();
        let want: Vec<i32> = acc
            .iter()
            .enumerate()
            .map(|(i, &v)| rq[i % n.max(1)].apply(i64::from(v)))
            .collect();
        for isa in supported_isas() {
            let got: Vec<i32> = if signed {
                let mut o = vec![0i8; acc.len()];
                with_isa(isa, || requantize_columns(&forms, &acc, &mut o));
                o.iter().map(|&v| i32::from(v)).collect()
            } else {
                let mut o = vec![0u8; acc.len()];
                with_isa(isa, || requantize_columns(&forms, &acc, &mut o));
                o.iter().map(|&v| i32::from(v)).collect()
            };
            proptest::prop_assert_eq!(&got, &want, "{}", isa);
        }
    }
}
