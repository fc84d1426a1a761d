//! Calibrators: from [`Observer`] statistics to a clipping range, and from a
//! range to scales and zero points.
//!
//! # Ranges ([`range`])
//!
//! - **max**: the observed `[min, max]`.
//! - **ema**: the moving averages of per-batch minima and maxima.
//! - **percentile**: symmetric: `T` = the `max_percentile` quantile of `|x|`;
//!   asymmetric: the `1 - max_percentile` and `max_percentile` quantiles of
//!   `x`. Quantiles read the observer's histogram assuming values spread
//!   uniformly inside a bin (bins clipped to the observed `[min, max]`), so
//!   they are exact to within one bin width; `max_percentile = 1` gives
//!   exactly `[min, max]`. 8-bit grids only, as `kl` below: on 16- and
//!   32-bit grids the observed `[min, max]` (clipping the rare values a
//!   16-bit grid resolves anyway cost EfficientNet-Lite0 every-node-int16
//!   3 of 500 top-1 agreements against FP32: 99.4% against 100%).
//! - **kl** (entropy, the TensorRT algorithm): the `|x|` histogram (exact
//!   zeros in the first bin) is re-binned to `num_bin` bins over
//!   `[0, max|x|]`. With `L = 128` quantization levels (half of an 8-bit grid),
//!   for each candidate `i = L..=num_bin` the reference `P` is the first `i`
//!   bins with all mass beyond them added to bin `i-1`, and the candidate `Q`
//!   merges those `i` bins (without the outliers) into `L` buckets, spreading
//!   each bucket's mass evenly over its non-empty bins. `KL(P‖Q)` is computed
//!   with empty `Q` bins smoothed to `1e-4`; the `i` with the least divergence
//!   gives `T = i · max|x| / num_bin`. Candidates that would clip more than
//!   0.1% of the mass are skipped: TensorRT's search assumes a distribution
//!   peaked at zero, and for one away from zero (a gate's sigmoid between
//!   0.4 and 0.7) a threshold below the bulk folds nearly all of it into
//!   the last bin, where `P` and `Q` agree, so the divergence is ~0 and the
//!   whole distribution was clipped (PP-OCR's SE gates to a fifth of their
//!   range: cosine 0.78 against FP32 with `kl`, 0.99 with this bound). For 16- and 32-bit grids a clipping
//!   threshold buys nothing measurable, so `kl` falls back to `max`.
//! - **8-bit pixels**: a model input whose values are at most 256 evenly
//!   spaced levels with 0 among the grid points ([`lattice_range`]; 8-bit
//!   pixels after `(x - 127) / 128`) takes, on a uint8 grid and whatever the
//!   calibrator, the range that represents every level exactly.
//!   EfficientNet-Lite0's stem input was rounded by the percentile range: it
//!   alone added a fifth of the whole int8 model's output error.
//! - **mse**: `T` is searched over 128 fractions `k/128` of `max|x|`, then 32
//!   finer points around the best; each candidate is scored by [`quant_error`]
//!   of the parameters [`params_from_range`] would give (rounding and clipping
//!   error, for the given grid and symmetry). `T = max|x|` is a candidate, so
//!   the result never does worse than `max` by that measure.
//!
//! A threshold `T` becomes the range `[max(min, -T), min(max, T)]`.
//!
//! Sentinels (values of magnitude ≥ [`crate::observer::SENTINEL`], e.g. an
//! attention mask of float32's lowest, `-3.4e38`, standing for minus
//! infinity) stay out of the statistics: the range is the method's range of
//! the ordinary values, widened on a sentinel's side to at least
//! [`SENTINEL_MARGIN`] beyond them, so the sentinels saturate at the grid's
//! end, `32` below the largest score (`exp(-32) ≈ 1e-14` after a softmax),
//! instead of stretching the grid to `3.4e38` and rounding every ordinary
//! value to zero (the text encoder's masked scores: cosine 0.28 before).
//!
//! # Parameters ([`params_from_range`])
//!
//! The range is first extended to include 0, so 0 is always exactly
//! representable. Symmetric on a signed grid: zero point 0 and
//! `s = max(|lo|, |hi|) / qmax` with `qmax` = 127 / 32767 / 2^31-1, the
//! restricted symmetric range `[-qmax, qmax]` onnxruntime uses (the grid's
//! most negative code stays legal but is never needed). Symmetric on an
//! unsigned grid has no meaning (zero point 0 would waste half the range or
//! clip all negatives), so it is treated as asymmetric. Asymmetric:
//! `s = (hi - lo) / (qmax - qmin)`, `zp = clamp(round(qmin - lo / s))`.
//! A zero-width range gets `s = 1` and `zp = 0`: any scale represents a
//! constant 0 exactly. Power-of-two scales round `log2 s` up (`Ceil`) or to
//! nearest (`Nearest`); the zero point is recomputed from the new scale.
//! Scales are always finite, positive, normal `f32`.
//!
//! # Error estimate ([`quant_error`])
//!
//! The expected squared error of fake-quantizing the observed values, with
//! the values of each histogram bin taken as uniformly spread over the bin
//! (clipped to `[min, max]`): the error integral over each bin is computed in
//! closed form (a sawtooth inside the grid, a parabola where clipped), and
//! exact zeros contribute their exact error (0). Unlike sampling bin centres,
//! this stays meaningful when a bin is wider than the scale (16-bit grids).

use thiserror::Error;

use crate::observer::{check_shape, ChannelObserver, NonFinite, Observer, ShapeError, SENTINEL};
use crate::types::{CalibMethod, Grid, PowerOfTwo, QParams};

/// Options of the histogram calibrators, named as in the vendor config.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CalibOptions {
    /// Bins of the KL histogram over `[0, max|x|]`, at least 129 and at most
    /// `max_num_bin`. Default 1024. The observer's histogram has about
    /// `hist_bins/2 … hist_bins` bins over that span; more KL bins than that
    /// only interpolate.
    pub num_bin: usize,
    /// Upper bound accepted for `num_bin` (the search costs `O(num_bin²)`),
    /// at most 65536. Default 16384.
    pub max_num_bin: usize,
    /// Percentile of the `percentile` calibrator, in `[0.5, 1]`. Default 0.99995.
    pub max_percentile: f64,
}

impl Default for CalibOptions {
    fn default() -> Self {
        CalibOptions {
            num_bin: 1024,
            max_num_bin: 16384,
            max_percentile: 0.99995,
        }
    }
}

/// Largest accepted `max_num_bin`.
const MAX_NUM_BIN_LIMIT: usize = 65536;

impl CalibOptions {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), CalibError> {
        let bad = |field, reason: String| Err(CalibError::BadOption { field, reason });
        if self.max_num_bin > MAX_NUM_BIN_LIMIT {
            return bad(
                "max_num_bin",
                format!("{} exceeds {MAX_NUM_BIN_LIMIT}", self.max_num_bin),
            );
        }
        if self.num_bin < 129 {
            return bad("num_bin", format!("{} is below 129", self.num_bin));
        }
        if self.num_bin > self.max_num_bin {
            return bad(
                "num_bin",
                format!("{} exceeds max_num_bin {}", self.num_bin, self.max_num_bin),
            );
        }
        if !(0.5..=1.0).contains(&self.max_percentile) {
            return bad(
                "max_percentile",
                format!("{} is not in [0.5, 1]", self.max_percentile),
            );
        }
        Ok(())
    }
}

/// Errors of the calibrators.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum CalibError {
    /// The observer saw no values.
    #[error("no calibration data was observed")]
    Empty,
    /// One channel of a per-channel observer saw no values.
    #[error("channel {channel} observed no calibration data")]
    EmptyChannel {
        /// Index of the channel.
        channel: usize,
    },
    /// An option is out of range.
    #[error("invalid calibration option `{field}`: {reason}")]
    BadOption {
        /// Field name.
        field: &'static str,
        /// What is wrong with its value.
        reason: String,
    },
    /// The method cannot compute a range here.
    #[error("calibration method `{method}` is not supported here: {reason}")]
    Unsupported {
        /// The method asked for.
        method: CalibMethod,
        /// Why, and where it is handled instead.
        reason: &'static str,
    },
    /// The shape does not fit the values or the axis.
    #[error(transparent)]
    Shape(#[from] ShapeError),
    /// NaN or infinity among weight values.
    #[error(transparent)]
    NonFinite(#[from] NonFinite),
}

/// Clipping range `[lo, hi]` of the values `obs` has seen, by `method` (see
/// the module docs). `grid` and `symmetric` matter for `kl` and `mse`.
pub fn range(
    obs: &Observer,
    method: CalibMethod,
    grid: Grid,
    symmetric: bool,
    opts: &CalibOptions,
) -> Result<(f32, f32), CalibError> {
    opts.validate()?;
    let (below, above) = obs.sentinels();
    if (below, above) != (0, 0) {
        // the method's range of the ordinary values, widened so that the
        // sentinels saturate at least SENTINEL_MARGIN beyond them
        let (lo, hi) = if obs.count() > 0 {
            range_of_ordinary(obs, method, grid, symmetric, opts)?
        } else {
            (0.0, 0.0)
        };
        return Ok(widen_for_sentinels(lo, hi, below > 0, above > 0));
    }
    range_of_ordinary(obs, method, grid, symmetric, opts)
}

/// `[lo, hi]` widened to at least [`SENTINEL_MARGIN`] beyond the ordinary
/// values on the side of the sentinels seen (`below`, `above`).
fn widen_for_sentinels(lo: f32, hi: f32, below: bool, above: bool) -> (f32, f32) {
    let lo = if below {
        lo.min(hi - SENTINEL_MARGIN)
    } else {
        lo
    };
    let hi = if above {
        hi.max(lo + SENTINEL_MARGIN)
    } else {
        hi
    };
    (lo, hi)
}

/// How far beyond the ordinary values a sentinel saturates (see
/// [`range`]): `exp(-32) ≈ 1.3e-14`, nothing after a softmax.
pub const SENTINEL_MARGIN: f32 = 32.0;

/// [`range`] of an observer's ordinary values.
fn range_of_ordinary(
    obs: &Observer,
    method: CalibMethod,
    grid: Grid,
    symmetric: bool,
    opts: &CalibOptions,
) -> Result<(f32, f32), CalibError> {
    let (Some(mn), Some(mx)) = (obs.min(), obs.max()) else {
        return Err(CalibError::Empty);
    };
    if grid == Grid::Uint8 && method != CalibMethod::Load {
        if let Some(exact) = obs.levels().and_then(lattice_range) {
            return Ok(exact);
        }
    }
    let clip = |t: f64| {
        let t = t as f32;
        (mn.max(-t), mx.min(t))
    };
    // percentile and kl clip for 8-bit grids only
    let eight_bit = matches!(grid, Grid::Int8 | Grid::Uint8);
    Ok(match method {
        CalibMethod::Max => (mn, mx),
        CalibMethod::Ema => (obs.ema_min().unwrap_or(mn), obs.ema_max().unwrap_or(mx)),
        CalibMethod::Percentile | CalibMethod::Kl if !eight_bit => (mn, mx),
        CalibMethod::Percentile => percentile_range(obs, symmetric, opts.max_percentile),
        CalibMethod::Kl => clip(kl_threshold(obs, opts.num_bin, 128)),
        CalibMethod::Mse => clip(mse_threshold(obs, grid, symmetric)),
        CalibMethod::Load => {
            return Err(CalibError::Unsupported {
                method,
                reason: "`load` reads scales from the model's QDQ nodes, not from data",
            })
        }
    })
}

/// The uint8 range on which every value of `levels` (sorted, distinct)
/// and 0 are grid points: `levels` evenly spaced by a step `s` (their
/// smallest gap; each a multiple of it from 0, to 1e-3 of a step) spanning
/// at most 255 steps with 0. `None` otherwise. 8-bit pixels after an
/// affine normalization (`(x - 127) / 128`) are such levels: on this range
/// they are represented exactly, where a clipping calibrator would round
/// every one of them.
pub fn lattice_range(levels: &[f32]) -> Option<(f32, f32)> {
    let [first, .., last] = levels else {
        return None;
    };
    let step = levels
        .windows(2)
        .map(|w| f64::from(w[1]) - f64::from(w[0]))
        .fold(f64::INFINITY, f64::min);
    if !(step > 0.0 && step.is_finite()) {
        return None;
    }
    let index = |v: f32| {
        let k = f64::from(v) / step;
        ((k - k.round()).abs() <= 1e-3).then_some(k.round() as i64)
    };
    let lo = index(*first)?.min(0);
    let hi = index(*last)?.max(0);
    if hi - lo > 255 || levels.iter().any(|&v| index(v).is_none()) {
        return None;
    }
    // 255 steps from the lowest grid point: scale = step, zero point -lo
    Some(((lo as f64 * step) as f32, ((lo + 255) as f64 * step) as f32))
}

/// Largest magnitude seen (0 for an empty observer).
fn abs_max(obs: &Observer) -> f64 {
    let mn = f64::from(obs.min().unwrap_or(0.0));
    let mx = f64::from(obs.max().unwrap_or(0.0));
    mn.abs().max(mx.abs())
}

/// Non-empty histogram bins as `(a, b, count)` value intervals in ascending
/// order, clipped to `[min, max]`; exact zeros are the interval `(0, 0)`.
fn signed_segments(obs: &Observer) -> Vec<(f64, f64, u64)> {
    let h = obs.histogram();
    let w = h.bin_width();
    let mn = f64::from(obs.min().unwrap_or(0.0));
    let mx = f64::from(obs.max().unwrap_or(0.0));
    let mut out = Vec::new();
    for (j, &c) in h.negative().iter().enumerate().rev() {
        if c > 0 {
            let b = (-(j as f64) * w).min(mx);
            out.push(((-(j as f64 + 1.0) * w).max(mn).min(b), b, c));
        }
    }
    if h.zeros() > 0 {
        out.push((0.0, 0.0, h.zeros()));
    }
    for (j, &c) in h.positive().iter().enumerate() {
        if c > 0 {
            let b = ((j as f64 + 1.0) * w).min(mx);
            out.push(((j as f64 * w).max(mn).min(b), b, c));
        }
    }
    out
}

/// Non-empty `|x|` intervals in ascending order, clipped to `[0, max|x|]`.
fn abs_segments(obs: &Observer) -> Vec<(f64, f64, u64)> {
    let h = obs.histogram();
    let (w, a) = (h.bin_width(), abs_max(obs));
    let mut out = Vec::new();
    if h.zeros() > 0 {
        out.push((0.0, 0.0, h.zeros()));
    }
    for (j, c) in h.abs_counts().into_iter().enumerate() {
        if c > 0 {
            let b = ((j as f64 + 1.0) * w).min(a);
            out.push(((j as f64 * w).min(b), b, c));
        }
    }
    out
}

/// The value below which `rank` of the counted values lie, interpolating
/// linearly inside a segment.
fn quantile(segs: &[(f64, f64, u64)], rank: f64) -> f64 {
    let mut cum = 0.0;
    for &(a, b, c) in segs {
        let c = c as f64;
        if cum + c >= rank {
            let f = ((rank - cum) / c).clamp(0.0, 1.0);
            return a + (b - a) * f;
        }
        cum += c;
    }
    segs.last().map_or(0.0, |s| s.1)
}

fn percentile_range(obs: &Observer, symmetric: bool, q: f64) -> (f32, f32) {
    let (mn, mx) = (obs.min().unwrap_or(0.0), obs.max().unwrap_or(0.0));
    if q >= 1.0 {
        return (mn, mx);
    }
    let n = obs.count() as f64;
    if symmetric {
        let t = quantile(&abs_segments(obs), q * n).min(abs_max(obs)) as f32;
        (mn.max(-t), mx.min(t))
    } else {
        let segs = signed_segments(obs);
        let lo = (quantile(&segs, (1.0 - q) * n) as f32).clamp(mn, mx);
        let hi = (quantile(&segs, q * n) as f32).clamp(mn, mx);
        (lo, hi.max(lo))
    }
}

/// The observer's `|x|` histogram re-binned to `nb` bins over `[0, max|x|]`,
/// spreading each source bin's count over the bins it overlaps.
fn kl_histogram(obs: &Observer, nb: usize) -> Vec<f64> {
    let a = abs_max(obs);
    let v = a / nb as f64;
    let mut hist = vec![0.0; nb];
    let bin_of = |x: f64| ((x / v) as usize).min(nb - 1);
    // Exact zeros are left out: every grid represents 0 exactly, so they
    // carry no quantization error, and a ReLU's spike of zeros would
    // otherwise dominate the divergence and drive the threshold down.
    for (lo, hi, c) in abs_segments(obs).into_iter().filter(|s| s.1 > 0.0) {
        let c = c as f64;
        if hi <= lo {
            hist[bin_of(lo)] += c;
            continue;
        }
        for (k, h) in hist
            .iter_mut()
            .enumerate()
            .take(bin_of(hi) + 1)
            .skip(bin_of(lo))
        {
            let top = if k + 1 == nb {
                hi
            } else {
                (k as f64 + 1.0) * v
            };
            let overlap = top.min(hi) - (k as f64 * v).max(lo);
            if overlap > 0.0 {
                *h += c * overlap / (hi - lo);
            }
        }
    }
    hist
}

/// The largest share of the (non-zero) mass a `kl` threshold may clip
/// (module docs).
const MAX_CLIPPED: f64 = 1e-3;

/// The KL-optimal threshold on `|x|` (module docs).
fn kl_threshold(obs: &Observer, nb: usize, levels: usize) -> f64 {
    let a = abs_max(obs);
    if a == 0.0 {
        return 0.0;
    }
    let hist = kl_histogram(obs, nb);
    let total: f64 = hist.iter().sum();

    // suffix[i] = mass of bins i.. (the outliers of candidate i).
    let mut suffix = vec![0.0; nb + 1];
    for i in (0..nb).rev() {
        suffix[i] = suffix[i + 1] + hist[i];
    }
    const EPS: f64 = 1e-4;
    let mut q = vec![0.0; nb];
    let (mut best_i, mut best_kl) = (nb, f64::INFINITY);
    for (i, &outliers) in suffix.iter().enumerate().skip(levels) {
        if outliers > MAX_CLIPPED * total {
            // folding this much mass into the last bin makes P and Q alike
            // whatever the threshold (a distribution away from zero, e.g.
            // a gate's sigmoid, scores ~0 when clipped to a fraction of it)
            continue;
        }
        let inside = total - outliers;
        for bucket in 0..levels {
            let (s0, s1) = (bucket * i / levels, (bucket + 1) * i / levels);
            let part = &hist[s0..s1];
            let nonzero = part.iter().filter(|&&x| x > 0.0).count();
            let mass: f64 = part.iter().sum();
            for (qk, &hk) in q[s0..s1].iter_mut().zip(part) {
                *qk = if hk > 0.0 { mass / nonzero as f64 } else { 0.0 };
            }
        }
        let mut kl = 0.0;
        for k in 0..i {
            let pk = if k + 1 == i {
                hist[k] + outliers
            } else {
                hist[k]
            } / total;
            if pk <= 0.0 {
                continue;
            }
            let qk = if inside > 0.0 { q[k] / inside } else { 0.0 };
            kl += pk * (pk / if qk > 0.0 { qk } else { EPS }).ln();
        }
        if kl < best_kl {
            (best_i, best_kl) = (i, kl);
        }
    }
    (best_i as f64 * a / nb as f64).min(a)
}

/// The threshold on `|x|` minimising [`quant_error`] (module docs).
fn mse_threshold(obs: &Observer, grid: Grid, symmetric: bool) -> f64 {
    let a = abs_max(obs);
    if a == 0.0 {
        return 0.0;
    }
    let (mn, mx) = (obs.min().unwrap_or(0.0), obs.max().unwrap_or(0.0));
    let segs = signed_segments(obs);
    let score = |t: f64| {
        let tf = t as f32;
        let p = params_from_range(mn.max(-tf), mx.min(tf), grid, symmetric, None);
        segments_error(&segs, obs.count(), &p)
    };
    const COARSE: usize = 128;
    const FINE: usize = 32;
    let (mut best_t, mut best_e) = (a, score(a));
    for k in (1..COARSE).rev() {
        let t = a * k as f64 / COARSE as f64;
        let e = score(t);
        if e < best_e {
            (best_t, best_e) = (t, e);
        }
    }
    let step = a / COARSE as f64;
    let (lo, hi) = ((best_t - step).max(0.0), (best_t + step).min(a));
    for k in 1..=FINE {
        let t = lo + (hi - lo) * k as f64 / (FINE + 1) as f64;
        let e = score(t);
        if t > 0.0 && e < best_e {
            (best_t, best_e) = (t, e);
        }
    }
    best_t
}

/// Power-of-two rounding of a positive normal `f32` scale.
fn pow2_scale(s: f32, mode: PowerOfTwo) -> f32 {
    let bits = s.to_bits();
    let (e, m) = ((bits >> 23) & 0xff, bits & 0x7f_ffff);
    let down = f32::from_bits(e << 23);
    let up = if e >= 254 {
        down
    } else {
        f32::from_bits((e + 1) << 23)
    };
    let round_up = match mode {
        PowerOfTwo::Ceil => m != 0,
        PowerOfTwo::Nearest => {
            1.0 + f64::from(m) / f64::from(1u32 << 23) >= std::f64::consts::SQRT_2
        }
    };
    if round_up {
        up
    } else {
        down
    }
}

/// Per-tensor parameters for the range `[lo, hi]` (module docs). Never
/// panics: NaN bounds count as 0, infinite ones as `±f32::MAX`.
pub fn params_from_range(
    lo: f32,
    hi: f32,
    grid: Grid,
    symmetric: bool,
    pot: Option<PowerOfTwo>,
) -> QParams {
    let clean = |v: f32| {
        f64::from(if v.is_nan() {
            0.0
        } else {
            v.clamp(-f32::MAX, f32::MAX)
        })
    };
    let (lo, hi) = (clean(lo).min(0.0), clean(hi).max(0.0));
    let (qmin, qmax) = grid.bounds();
    let (qmin, qmax) = (qmin as f64, qmax as f64);
    let finish = |s: f64| {
        let s = (s as f32).clamp(f32::MIN_POSITIVE, f32::MAX);
        pot.map_or(s, |m| pow2_scale(s, m))
    };
    if symmetric && grid.is_signed() {
        let amax = lo.abs().max(hi);
        let s = if amax == 0.0 {
            1.0
        } else {
            finish(amax / qmax)
        };
        return QParams::per_tensor(grid, s, 0);
    }
    if hi - lo == 0.0 {
        return QParams::per_tensor(grid, 1.0, 0);
    }
    let s = finish((hi - lo) / (qmax - qmin));
    let zp = (qmin - lo / f64::from(s)).round().clamp(qmin, qmax);
    QParams::per_tensor(grid, s, zp as i32)
}

/// MinMax parameters of a weight tensor of `shape` (row-major): one scale per
/// slice along `axis`, or one for the whole tensor when `axis` is `None`.
pub fn weight_params(
    values: &[f32],
    shape: &[usize],
    axis: Option<usize>,
    grid: Grid,
    symmetric: bool,
    pot: Option<PowerOfTwo>,
) -> Result<QParams, CalibError> {
    check_shape(values.len(), shape, axis)?;
    let bad = values.iter().filter(|v| !v.is_finite()).count();
    if bad > 0 {
        return Err(NonFinite { count: bad }.into());
    }
    // sentinels (|v| >= SENTINEL, a mask constant of float32's lowest) are
    // left out and saturate, as in [`range`]: scaling the grid to 3.4e38
    // dequantizes them to an infinity (0 × -inf = NaN downstream)
    let minmax = |it: &mut dyn Iterator<Item = f32>| {
        let (mut lo, mut hi, mut below, mut above) = (0.0f32, 0.0f32, false, false);
        for v in it {
            if v <= -SENTINEL {
                below = true;
            } else if v >= SENTINEL {
                above = true;
            } else {
                (lo, hi) = (lo.min(v), hi.max(v));
            }
        }
        widen_for_sentinels(lo, hi, below, above)
    };
    let Some(axis) = axis else {
        let (lo, hi) = minmax(&mut values.iter().copied());
        return Ok(params_from_range(lo, hi, grid, symmetric, pot));
    };
    let c = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let outer = values.len().checked_div(c * inner).unwrap_or(0);
    let mut p = QParams {
        grid,
        scales: Vec::with_capacity(c),
        zero_points: Vec::with_capacity(c),
        axis: Some(axis),
    };
    for ch in 0..c {
        let mut it = (0..outer).flat_map(|o| {
            let start = (o * c + ch) * inner;
            values[start..start + inner].iter().copied()
        });
        let (lo, hi) = minmax(&mut it);
        let q = params_from_range(lo, hi, grid, symmetric, pot);
        p.scales.push(q.scales[0]);
        p.zero_points.push(q.zero_points[0]);
    }
    Ok(p)
}

/// Per-channel activation parameters: [`range`] then [`params_from_range`]
/// for every channel of `obs`, with `axis` set to the observer's axis.
pub fn channel_params(
    obs: &ChannelObserver,
    method: CalibMethod,
    grid: Grid,
    symmetric: bool,
    pot: Option<PowerOfTwo>,
    opts: &CalibOptions,
) -> Result<QParams, CalibError> {
    let axis = obs.axis().ok_or(CalibError::Empty)?;
    let mut p = QParams {
        grid,
        scales: Vec::with_capacity(obs.channels().len()),
        zero_points: Vec::with_capacity(obs.channels().len()),
        axis: Some(axis),
    };
    for (channel, o) in obs.channels().iter().enumerate() {
        if o.count() == 0 && o.sentinels() == (0, 0) {
            return Err(CalibError::EmptyChannel { channel });
        }
        let (lo, hi) = range(o, method, grid, symmetric, opts)?;
        let q = params_from_range(lo, hi, grid, symmetric, pot);
        p.scales.push(q.scales[0]);
        p.zero_points.push(q.zero_points[0]);
    }
    Ok(p)
}

/// Expected squared error of fake-quantizing the values `obs` has seen with
/// the first (or only) scale and zero point of `p` (module docs). 0 for an
/// empty observer; infinity if `p` has no valid scale.
pub fn quant_error(obs: &Observer, p: &QParams) -> f64 {
    segments_error(&signed_segments(obs), obs.count(), p)
}

fn segments_error(segs: &[(f64, f64, u64)], count: u64, p: &QParams) -> f64 {
    let Some(&s) = p.scales.first() else {
        return f64::INFINITY;
    };
    if !(s.is_finite() && s > 0.0) {
        return f64::INFINITY;
    }
    if count == 0 {
        return 0.0;
    }
    let s = f64::from(s);
    let zp = f64::from(p.zero_points.first().copied().unwrap_or(0));
    let (qmin, qmax) = p.grid.bounds();
    let (lo_q, hi_q) = ((qmin as f64 - zp) * s, (qmax as f64 - zp) * s);
    let point = |x: f64| {
        let q = ((x / s).round_ties_even() + zp).clamp(qmin as f64, qmax as f64);
        let e = x - (q - zp) * s;
        e * e
    };
    // ∫ (x - s·round(x/s))² over [x0, x1], in units shifted to x0's period.
    let saw = |x0: f64, x1: f64| {
        let k0 = (x0 / s + 0.5).floor();
        let g = |u: f64| {
            let f = u - u.floor();
            u.floor() / 12.0 + ((f - 0.5).powi(3) + 0.125) / 3.0
        };
        s.powi(3) * (g(x1 / s + 0.5 - k0) - g(x0 / s + 0.5 - k0))
    };
    let mut sum = 0.0;
    for &(a, b, c) in segs {
        let mean = if b > a {
            let mut integral = 0.0;
            if a < lo_q {
                integral += ((b.min(lo_q) - lo_q).powi(3) - (a - lo_q).powi(3)) / 3.0;
            }
            if b > hi_q {
                integral += ((b - hi_q).powi(3) - (a.max(hi_q) - hi_q).powi(3)) / 3.0;
            }
            let (x0, x1) = (a.max(lo_q), b.min(hi_q));
            if x1 > x0 {
                integral += saw(x0, x1);
            }
            integral / (b - a)
        } else {
            point(a)
        };
        sum += c as f64 * mean;
    }
    sum / count as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pow2_rounding() {
        assert_eq!(pow2_scale(0.3, PowerOfTwo::Ceil), 0.5);
        assert_eq!(pow2_scale(0.3, PowerOfTwo::Nearest), 0.25);
        assert_eq!(pow2_scale(0.36, PowerOfTwo::Nearest), 0.5);
        assert_eq!(pow2_scale(0.25, PowerOfTwo::Ceil), 0.25);
        assert_eq!(pow2_scale(f32::MAX, PowerOfTwo::Ceil), 2f32.powi(127));
    }

    #[test]
    fn sawtooth_integral_matches_uniform_rounding_error() {
        // Values spread over many steps: mean error s²/12.
        let mut o = Observer::default();
        let v: Vec<f32> = (0..100_000).map(|i| i as f32 * 1e-5).collect();
        o.observe(&v).unwrap();
        let p = QParams::per_tensor(Grid::Int16, 0.01, 0);
        let e = quant_error(&o, &p);
        assert!((e / (1e-4 / 12.0) - 1.0).abs() < 0.02, "{e}");
    }

    #[test]
    fn options_validate_names_field() {
        let bad = [
            (
                CalibOptions {
                    num_bin: 100,
                    ..Default::default()
                },
                "num_bin",
            ),
            (
                CalibOptions {
                    max_percentile: 0.2,
                    ..Default::default()
                },
                "max_percentile",
            ),
        ];
        for (o, name) in bad {
            assert!(
                matches!(o.validate(), Err(CalibError::BadOption { field, .. }) if field == name),
                "{name}"
            );
        }
    }
}
