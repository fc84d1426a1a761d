//! Calibrators and parameter derivation on known distributions.

use proptest::prelude::*;
use qport_quant::calib::{
    channel_params, params_from_range, quant_error, range, weight_params, CalibError, CalibOptions,
};
use qport_quant::observer::{ChannelObserver, Observer, ObserverOptions, ShapeError};
use qport_quant::{CalibMethod, Grid, PowerOfTwo, QParams};

/// splitmix64 stream.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in (0, 1).
    fn unit(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    /// Standard normal (Box-Muller).
    fn normal(&mut self) -> f32 {
        let (u, v) = (self.unit(), self.unit());
        ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
    }
}

fn gaussian_with_outliers() -> Vec<f32> {
    let mut r = Rng(7);
    let mut v: Vec<f32> = (0..100_000).map(|_| r.normal()).collect();
    v.extend_from_slice(&[60.0, -55.0, 48.0, -61.0, 58.5]);
    v
}

fn uniform(n: usize) -> Vec<f32> {
    let mut r = Rng(11);
    (0..n).map(|_| (2.0 * r.unit() - 1.0) as f32).collect()
}

fn observe_batches(values: &[f32]) -> Observer {
    let mut o = Observer::default();
    for b in values.chunks(4096) {
        o.observe(b).unwrap();
    }
    o
}

fn mse_on(values: &[f32], p: &QParams) -> f64 {
    values
        .iter()
        .map(|&x| (f64::from(p.fake_quant(x, 0)) - f64::from(x)).powi(2))
        .sum::<f64>()
        / values.len() as f64
}

fn opts() -> CalibOptions {
    CalibOptions::default()
}

#[test]
fn max_is_exact_and_empty_or_load_fail() {
    let o = observe_batches(&[0.25, -3.125, 7.5]);
    assert_eq!(
        range(&o, CalibMethod::Max, Grid::Int8, true, &opts()),
        Ok((-3.125, 7.5))
    );
    let e = Observer::default();
    for m in CalibMethod::CALIBRATORS {
        assert_eq!(
            range(&e, m, Grid::Int8, true, &opts()),
            Err(CalibError::Empty)
        );
    }
    assert!(matches!(
        range(&o, CalibMethod::Load, Grid::Int8, true, &opts()),
        Err(CalibError::Unsupported { .. })
    ));
    let bad = CalibOptions {
        max_num_bin: 200,
        ..opts()
    };
    assert!(matches!(
        range(&o, CalibMethod::Max, Grid::Int8, true, &bad),
        Err(CalibError::BadOption {
            field: "num_bin",
            ..
        })
    ));
}

#[test]
fn ema_range() {
    let mut o = Observer::default();
    o.observe(&[-1.0, 1.0]).unwrap();
    o.observe(&[-11.0, 11.0]).unwrap();
    let (lo, hi) = range(&o, CalibMethod::Ema, Grid::Int8, false, &opts()).unwrap();
    assert!((lo + 2.0).abs() < 1e-6 && (hi - 2.0).abs() < 1e-6);
}

#[test]
fn percentile_of_uniform_integers_within_one_bin() {
    let n = 10_000;
    let v: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let o = observe_batches(&v);
    let w = o.histogram().bin_width();
    for q in [0.5, 0.9, 0.99, 0.99995] {
        let c = CalibOptions {
            max_percentile: q,
            ..opts()
        };
        let (lo, hi) = range(&o, CalibMethod::Percentile, Grid::Int8, true, &c).unwrap();
        let expect = q * (n - 1) as f64;
        assert_eq!(lo, 0.0);
        assert!(
            (f64::from(hi) - expect).abs() <= w,
            "q={q}: {hi} vs {expect}"
        );
        // Asymmetric on the shifted data: both tails.
        let s: Vec<f32> = v.iter().map(|x| x - 5000.0).collect();
        let os = observe_batches(&s);
        let ws = os.histogram().bin_width();
        let (lo, hi) = range(&os, CalibMethod::Percentile, Grid::Uint8, false, &c).unwrap();
        assert!(
            (f64::from(hi) - (expect - 5000.0)).abs() <= ws,
            "q={q}: hi {hi}"
        );
        assert!(
            (f64::from(lo) - ((1.0 - q) * (n - 1) as f64 - 5000.0)).abs() <= ws,
            "lo {lo}"
        );
    }
    let all = CalibOptions {
        max_percentile: 1.0,
        ..opts()
    };
    assert_eq!(
        range(&o, CalibMethod::Percentile, Grid::Int8, true, &all),
        Ok((0.0, 9999.0))
    );
    // 16-bit grids keep the observed range, as kl does
    let c = CalibOptions {
        max_percentile: 0.9,
        ..opts()
    };
    for (grid, sym) in [(Grid::Int16, true), (Grid::Uint16, false)] {
        assert_eq!(
            range(&o, CalibMethod::Percentile, grid, sym, &c),
            Ok((0.0, 9999.0)),
            "{grid:?}"
        );
    }
}

#[test]
fn kl_clips_outliers_of_gaussian() {
    let v = gaussian_with_outliers();
    let o = observe_batches(&v);
    let (lo, hi) = range(&o, CalibMethod::Kl, Grid::Int8, true, &opts()).unwrap();
    let t = lo.abs().max(hi);
    assert!(t > 3.0 && t < 0.25 * 61.0, "threshold {t}");
    let normal: Vec<f32> = v.iter().copied().filter(|x| x.abs() < 4.0).collect();
    let kl = params_from_range(lo, hi, Grid::Int8, true, None);
    let max = params_from_range(-61.0, 60.0, Grid::Int8, true, None);
    assert!(mse_on(&normal, &kl) < 0.1 * mse_on(&normal, &max));
    // Asymmetric: T applied to both sides within [min, max].
    let (alo, ahi) = range(&o, CalibMethod::Kl, Grid::Uint8, false, &opts()).unwrap();
    assert!(alo < 0.0 && alo > -61.0 && ahi < 60.0);
    // 16-bit grids fall back to max.
    assert_eq!(
        range(&o, CalibMethod::Kl, Grid::Int16, true, &opts()),
        Ok((-61.0, 60.0))
    );
}

#[test]
fn kl_keeps_uniform_near_max() {
    let o = observe_batches(&uniform(200_000));
    let (lo, hi) = range(&o, CalibMethod::Kl, Grid::Int8, true, &opts()).unwrap();
    assert!(lo.abs().max(hi) > 0.9, "{lo} {hi}");
}

/// A gate's output (a hard sigmoid): values between 0.4 and 0.7, a few
/// at exactly 1.0, none near 0. Unconstrained, the TensorRT search folds
/// the whole distribution into the last bin of a tiny threshold, where
/// `P` and `Q` agree, and clipped every gate to ~0.2 (PP-OCR's SE gates:
/// cosine 0.78 with `kl`, 0.96 with `max`); a threshold may clip at most
/// 0.1% of the mass now.
#[test]
fn kl_does_not_fold_a_distribution_away_from_zero_into_one_bin() {
    let mut v: Vec<f32> = (0..100_000)
        .map(|i| 0.4 + 0.3 * (i as f32 * 0.618_034).fract())
        .collect();
    v.extend([1.0f32; 50]);
    let o = observe_batches(&v);
    let (lo, hi) = range(&o, CalibMethod::Kl, Grid::Int8, true, &opts()).unwrap();
    assert!(hi >= 0.7, "threshold {hi} clips the bulk of the values");
    let clipped = v.iter().filter(|&&x| x > hi).count() as f64 / v.len() as f64;
    assert!(clipped <= 1e-3, "{clipped} of the mass clipped at {hi}");
    assert_eq!(lo, 0.4);
}

#[test]
fn mse_beats_max_and_every_coarse_candidate() {
    for (v, grid, sym) in [
        (gaussian_with_outliers(), Grid::Int8, true),
        (gaussian_with_outliers(), Grid::Uint8, false),
        (uniform(50_000), Grid::Int8, true),
        (gaussian_with_outliers(), Grid::Int16, true),
    ] {
        let o = observe_batches(&v);
        let (lo, hi) = range(&o, CalibMethod::Mse, grid, sym, &opts()).unwrap();
        let best = quant_error(&o, &params_from_range(lo, hi, grid, sym, None));
        let (mn, mx) = (o.min().unwrap(), o.max().unwrap());
        let a = mn.abs().max(mx);
        for k in 1..=128 {
            let t = a * k as f32 / 128.0;
            let p = params_from_range(mn.max(-t), mx.min(t), grid, sym, None);
            assert!(best <= quant_error(&o, &p) * (1.0 + 1e-9), "{grid:?} k={k}");
        }
    }
    let o = observe_batches(&uniform(50_000));
    let (lo, hi) = range(&o, CalibMethod::Mse, Grid::Int8, true, &opts()).unwrap();
    assert!(lo.abs().max(hi) > 0.9);
    let o = observe_batches(&gaussian_with_outliers());
    let (lo, hi) = range(&o, CalibMethod::Mse, Grid::Int8, true, &opts()).unwrap();
    // Squared error weighs the few outliers heavily: MSE clips only a little.
    let t = lo.abs().max(hi);
    assert!(t > 40.0 && t < 60.0, "mse threshold {t}");
}

#[test]
fn quant_error_matches_sampled_error() {
    let v = gaussian_with_outliers();
    let o = observe_batches(&v);
    for p in [
        params_from_range(-4.0, 4.0, Grid::Int8, true, None),
        params_from_range(-61.0, 60.0, Grid::Uint8, false, None),
    ] {
        let (est, exact) = (quant_error(&o, &p), mse_on(&v, &p));
        assert!((est / exact - 1.0).abs() < 0.05, "{est} vs {exact}");
    }
    assert_eq!(
        quant_error(
            &Observer::default(),
            &params_from_range(0.0, 1.0, Grid::Int8, true, None)
        ),
        0.0
    );
}

fn close(a: f32, b: f32) -> bool {
    (a - b).abs() <= 1e-6 * b.abs()
}

#[test]
fn params_known_cases() {
    let p = params_from_range(-1.0, 2.54, Grid::Int8, true, None);
    assert!(close(p.scales[0], 2.54 / 127.0) && p.zero_points[0] == 0);
    let p = params_from_range(-1.0, 2.54, Grid::Uint8, false, None);
    assert!(close(p.scales[0], 3.54 / 255.0));
    assert_eq!(p.zero_points[0], 72);
    // Symmetric on an unsigned grid is asymmetric.
    assert_eq!(params_from_range(-1.0, 2.54, Grid::Uint8, true, None), p);
    let p = params_from_range(-3.0, 1.0, Grid::Int16, true, None);
    assert!(close(p.scales[0], 3.0 / 32767.0) && p.zero_points[0] == 0);
    let p = params_from_range(-3.0, 1.0, Grid::Int16, false, None);
    assert!(close(p.scales[0], 4.0 / 65535.0));
    assert_eq!(
        p.zero_points[0],
        (-32768.0f64 + 3.0 / (4.0 / 65535.0)).round() as i32
    );
    // Range extended to include 0.
    let p = params_from_range(2.0, 5.0, Grid::Uint8, false, None);
    assert!(close(p.scales[0], 5.0 / 255.0) && p.zero_points[0] == 0);
    for g in [Grid::Int8, Grid::Uint8, Grid::Int16, Grid::Uint16] {
        for sym in [true, false] {
            assert_eq!(
                params_from_range(0.0, 0.0, g, sym, None),
                QParams::per_tensor(g, 1.0, 0)
            );
        }
    }
    // Power of two: 2.54/127 = 0.02 → ceil 2^-5, nearest 2^-6.
    let p = params_from_range(-1.0, 2.54, Grid::Int8, true, Some(PowerOfTwo::Ceil));
    assert_eq!(p.scales[0], 0.03125);
    let p = params_from_range(-1.0, 2.54, Grid::Int8, true, Some(PowerOfTwo::Nearest));
    assert_eq!(p.scales[0], 0.015625);
    // 3.54/255 = 0.01388 → ceil 2^-6 with zp recomputed: round(1 / 2^-6) = 64.
    let p = params_from_range(-1.0, 2.54, Grid::Uint8, false, Some(PowerOfTwo::Ceil));
    assert_eq!((p.scales[0], p.zero_points[0]), (0.015625, 64));
    // Non-finite and absurd inputs never give bad scales.
    for (lo, hi) in [
        (f32::NAN, 1.0),
        (f32::NEG_INFINITY, f32::INFINITY),
        (-1e-45, 1e-45),
    ] {
        let p = params_from_range(lo, hi, Grid::Uint8, false, Some(PowerOfTwo::Ceil));
        assert!(p.scales[0].is_finite() && p.scales[0] > 0.0);
    }
}

proptest! {
    #[test]
    fn params_cover_their_range(
        lo in -1e4f32..0.0, hi in 0.0f32..1e4,
        grid in prop_oneof![Just(Grid::Int8), Just(Grid::Uint8), Just(Grid::Int16), Just(Grid::Uint16)],
        sym in any::<bool>(),
        ceil in any::<bool>(),
    ) {
        let pot = ceil.then_some(PowerOfTwo::Ceil);
        let p = params_from_range(lo, hi, grid, sym, pot);
        let (s, zp) = (p.scales[0], p.zero_points[0]);
        let (qmin, qmax) = grid.bounds();
        prop_assert!(s.is_finite() && s > 0.0);
        prop_assert!((qmin..=qmax).contains(&i64::from(zp)));
        prop_assert_eq!(p.fake_quant(0.0, 0), 0.0);
        for x in [lo, hi] {
            prop_assert!((p.fake_quant(x, 0) - x).abs() <= 0.5 * s * (1.0 + 1e-4) + 1e-6 * x.abs());
        }
    }
}

#[test]
fn weight_params_per_channel_and_per_tensor() {
    let w = [1.0, -2.0, 0.5, 10.0, 0.0, -4.0];
    let p = weight_params(&w, &[2, 3], Some(0), Grid::Int8, true, None).unwrap();
    assert_eq!(p.axis, Some(0));
    assert!(close(p.scales[0], 2.0 / 127.0) && close(p.scales[1], 10.0 / 127.0));
    let p = weight_params(&w, &[2, 3], Some(1), Grid::Int8, true, None).unwrap();
    assert_eq!(p.scales.len(), 3);
    assert!(close(p.scales[0], 10.0 / 127.0) && close(p.scales[1], 2.0 / 127.0));
    assert!(close(p.scales[2], 4.0 / 127.0));
    let t = weight_params(&w, &[2, 3], None, Grid::Int8, true, None).unwrap();
    assert_eq!(t, params_from_range(-4.0, 10.0, Grid::Int8, true, None));
    let a = weight_params(&w, &[2, 3], Some(0), Grid::Uint8, false, None).unwrap();
    assert_eq!(a.zero_points, vec![170, 73]);
    assert!(matches!(
        weight_params(&w, &[4, 2], None, Grid::Int8, true, None),
        Err(CalibError::Shape(ShapeError::Count { .. }))
    ));
    assert!(matches!(
        weight_params(&w, &[2, 3], Some(2), Grid::Int8, true, None),
        Err(CalibError::Shape(ShapeError::Axis { axis: 2, rank: 2 }))
    ));
    assert!(matches!(
        weight_params(&[f32::NAN], &[1], None, Grid::Int8, true, None),
        Err(CalibError::NonFinite(_))
    ));
}

#[test]
fn channel_params_per_channel_activations() {
    let mut c = ChannelObserver::new(ObserverOptions::default());
    c.observe(&[1.0, -8.0, 2.0, 4.0], &[2, 2], 1).unwrap();
    let p = channel_params(&c, CalibMethod::Max, Grid::Int8, true, None, &opts()).unwrap();
    assert_eq!(p.axis, Some(1));
    assert!(close(p.scales[0], 2.0 / 127.0) && close(p.scales[1], 8.0 / 127.0));
    let empty = ChannelObserver::new(ObserverOptions::default());
    assert_eq!(
        channel_params(&empty, CalibMethod::Max, Grid::Int8, true, None, &opts()),
        Err(CalibError::Empty)
    );
}

/// An additive attention mask: scores in [-6, 6] and, at padded positions,
/// float32's lowest standing for minus infinity. The sentinels stay out of
/// min / max / count and the histogram (`extremes` keeps them, for the
/// float16 guard), every calibrator ranges over the scores and the range
/// reaches 32 below the largest score, so the masked positions saturate
/// there instead of stretching the grid to 3.4e38 (every score rounded to
/// 0). A constant holding the sentinel (the mask's multiplier) gets the
/// same treatment and dequantizes to a finite value.
#[test]
fn sentinels_saturate_instead_of_stretching_the_range() {
    let mut v: Vec<f32> = (0..10_000)
        .map(|i| 12.0 * (i as f32 / 9999.0) - 6.0)
        .collect();
    v.extend([f32::MIN; 2_000]);
    let o = observe_batches(&v);
    assert_eq!(o.sentinels(), (2_000, 0));
    assert_eq!(
        (o.min(), o.max(), o.count()),
        (Some(-6.0), Some(6.0), 10_000)
    );
    assert_eq!(o.extremes(), Some((f32::MIN, 6.0)));
    let mut merged = observe_batches(&v[..5_000]);
    merged.merge(&observe_batches(&v[5_000..]));
    assert_eq!(merged.sentinels(), (2_000, 0));
    assert_eq!(merged.extremes(), o.extremes());
    for m in [
        CalibMethod::Max,
        CalibMethod::Percentile,
        CalibMethod::Kl,
        CalibMethod::Mse,
    ] {
        for (grid, sym) in [
            (Grid::Int8, true),
            (Grid::Uint8, false),
            (Grid::Int16, true),
        ] {
            let (lo, hi) = range(&o, m, grid, sym, &opts()).unwrap();
            assert!(hi <= 6.0 && hi > 5.0, "{m:?} {grid:?}: hi {hi}");
            assert!((lo - (hi - 32.0)).abs() < 1e-4, "{m:?} {grid:?}: lo {lo}");
        }
    }
    // only sentinels (a mask tensor of a fully padded row): [-32, 0]
    let only = observe_batches(&[f32::MIN; 16]);
    assert_eq!(
        range(&only, CalibMethod::Max, Grid::Int8, true, &opts()),
        Ok((-32.0, 0.0))
    );
    // the constant -3.4e38: a finite scale, and it dequantizes to a finite value
    let p = weight_params(&[f32::MIN], &[1], None, Grid::Int8, true, None).unwrap();
    let s = p.scales[0];
    assert!(
        s.is_finite() && s > 0.0 && (-128.0 * s).is_finite(),
        "scale {s}"
    );
}

/// 8-bit pixels after `(x - 127) / 128`, tracked as a model input's
/// levels, are represented exactly on uint8 whatever the calibrator; levels
/// without 0 on their lattice (`x / 127.5 - 1`), too many levels, or a
/// signed grid keep the calibrator's range.
#[test]
fn pixel_levels_are_exact_on_uint8() {
    use qport_quant::calib::{lattice_range, params_from_range};
    let pixels: Vec<f32> = (0..=255u32)
        .flat_map(|p| [(p as f32 - 127.0) / 128.0; 3])
        .collect();
    let mut o = qport_quant::observer::Observer::default();
    o.track_levels();
    o.observe(&pixels[..300]).unwrap();
    let mut rest = qport_quant::observer::Observer::default();
    rest.track_levels();
    rest.observe(&pixels[300..]).unwrap();
    o.merge(&rest);
    assert_eq!(o.levels().map(<[f32]>::len), Some(256));
    for m in [
        CalibMethod::Max,
        CalibMethod::Percentile,
        CalibMethod::Kl,
        CalibMethod::Mse,
        CalibMethod::Ema,
    ] {
        let (lo, hi) = range(&o, m, Grid::Uint8, false, &opts()).unwrap();
        assert_eq!((lo, hi), (-127.0 / 128.0, 1.0), "{m:?}");
    }
    let p = params_from_range(-127.0 / 128.0, 1.0, Grid::Uint8, false, None);
    assert_eq!((p.scales[0], p.zero_points[0]), (1.0 / 128.0, 127));
    // a subset of the pixels still spans its 255 steps from 0's grid point
    assert_eq!(
        lattice_range(&[-0.5, -0.25, 0.25, 0.5]),
        Some((-0.5, 63.25))
    );
    // x / 127.5 - 1: 0 is not a grid point of the levels
    let ocr: Vec<f32> = (0..=255).map(|p| p as f32 / 127.5 - 1.0).collect();
    assert_eq!(lattice_range(&ocr), None);
    // more than 256 levels are not tracked
    let mut many = qport_quant::observer::Observer::default();
    many.track_levels();
    let v: Vec<f32> = (0..300).map(|i| i as f32).collect();
    many.observe(&v).unwrap();
    assert_eq!(many.levels(), None);
    // an untracked observer has no levels; the symmetric grid keeps the
    // calibrator's range either way
    let mut plain = qport_quant::observer::Observer::default();
    plain.observe(&pixels).unwrap();
    assert_eq!(plain.levels(), None);
    for m in [CalibMethod::Percentile, CalibMethod::Kl, CalibMethod::Mse] {
        assert_eq!(
            range(&o, m, Grid::Int8, true, &opts()),
            range(&plain, m, Grid::Int8, true, &opts()),
            "{m:?}"
        );
    }
    let c = CalibOptions {
        max_percentile: 0.9,
        ..opts()
    };
    let clipped = range(&plain, CalibMethod::Percentile, Grid::Uint8, false, &c).unwrap();
    assert!(clipped.1 < 1.0, "{clipped:?}");
    assert_eq!(
        range(&o, CalibMethod::Percentile, Grid::Uint8, false, &c),
        Ok((-127.0 / 128.0, 1.0))
    );
}
