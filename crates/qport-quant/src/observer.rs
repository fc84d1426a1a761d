//! Streaming statistics of one tensor (or one channel) during calibration.
//!
//! An [`Observer`] sees the values of a tensor batch by batch and keeps, in
//! memory independent of the number of samples:
//!
//! - the exact minimum, maximum and value count;
//! - an exponential moving average (EMA) of the per-batch minimum and maximum:
//!   the first batch initialises it, later batches update
//!   `ema = (1 - m)·ema + m·batch` with momentum `m`;
//! - a growing histogram that needs no first pass over the data.
//!
//! # The histogram
//!
//! Values are split by sign into two half-histograms of `hist_bins` bins each,
//! one for positive values and one for the magnitudes of negative values, both
//! over `[0, R)` with bin `j` holding magnitudes in `[j·w, (j+1)·w)`,
//! `w = R / hist_bins`. Exact zeros (ReLU outputs, padding) are counted apart:
//! they are common, they quantize exactly, and keeping them out of the bins
//! lets the calibrators place them at exactly `0` (percentile ranks, the KL
//! reference distribution's first bin, zero error in the MSE estimate).
//!
//! `R` is always a power of two, the smallest one strictly above the largest
//! magnitude seen so far. When a value reaches `R`, `R` doubles (as often as
//! needed) and each half-histogram merges adjacent bin pairs `2j, 2j+1` into
//! bin `j`: the new bin covers exactly the union of the two old ones, so the
//! re-binning loses nothing. Bin indices are computed in `f64`, where
//! `|x| · hist_bins / R` is exact for every `f32`, so a value lands in the same
//! bin whether it was binned directly at the final `R` or binned earlier and
//! then merged.
//!
//! Guarantees:
//!
//! - **Order independence.** The final histogram (and min, max, count) is a
//!   function of the multiset of observed values only: any order, any batching
//!   and any per-thread split followed by [`Observer::merge`] give the
//!   bit-identical histogram. Only the EMA depends on batching.
//! - **Resolution.** With `A = max|x|`, `A < R ≤ 2A`, so the bin width is
//!   `w ≤ 2A / hist_bins`: at least `hist_bins / 2` bins cover `[0, A]` on each
//!   side (1024 with the default 2048).
//! - **Memory.** `2 · hist_bins` counters (`16 · hist_bins` bytes) plus a few
//!   scalars, whatever the number of samples.
//!
//! [`ChannelObserver`] keeps one [`Observer`] per slice along an axis, for
//! per-channel activation ranges.

use qport_core::exact::f32_json;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Options of an [`Observer`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ObserverOptions {
    /// EMA momentum `m` in `[0, 1]`: weight of the newest batch. Default 0.1.
    #[serde(with = "f32_json")]
    pub ema_momentum: f32,
    /// Bins per half-histogram (positive values, negative magnitudes), in
    /// `[2, 2^24]`. Default 2048.
    pub hist_bins: usize,
}

impl Default for ObserverOptions {
    fn default() -> Self {
        ObserverOptions {
            ema_momentum: 0.1,
            hist_bins: 2048,
        }
    }
}

/// Largest accepted `hist_bins`.
const MAX_HIST_BINS: usize = 1 << 24;

impl ObserverOptions {
    /// Checks the options; the error names the offending field.
    pub fn validate(&self) -> Result<(), BadObserverOption> {
        if !(0.0..=1.0).contains(&self.ema_momentum) {
            return Err(BadObserverOption {
                field: "ema_momentum",
                reason: format!("{} is not in [0, 1]", self.ema_momentum),
            });
        }
        if !(2..=MAX_HIST_BINS).contains(&self.hist_bins) {
            return Err(BadObserverOption {
                field: "hist_bins",
                reason: format!("{} is not in [2, {MAX_HIST_BINS}]", self.hist_bins),
            });
        }
        Ok(())
    }
}

/// An invalid [`ObserverOptions`] field.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid observer option `{field}`: {reason}")]
pub struct BadObserverOption {
    /// Field name.
    pub field: &'static str,
    /// What is wrong with its value.
    pub reason: String,
}

/// A batch held NaN or infinite values; it was rejected as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("{count} non-finite value(s) (NaN or infinity) in calibration data")]
pub struct NonFinite {
    /// Number of NaN / ±infinity values in the batch.
    pub count: usize,
}

/// Magnitudes from which a value is a sentinel, not data: an attention
/// mask written as float32's lowest (`-3.4e38`) or `-1e30` stands for
/// minus infinity. Sentinels are counted and their extremes kept, but they
/// stay out of the statistics ranges are computed from (see
/// `qport_quant::calib::range`).
pub const SENTINEL: f32 = 1e30;

/// Float16's smallest positive normal number, `2^-14`.
pub const F16_MIN_NORMAL: f32 = 6.103_515_6e-5;

/// Streaming statistics of one tensor or channel (see the module docs).
/// It serialises (serde, every value exactly) so that observers of a
/// calibration split into shards travel to the merge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observer {
    #[serde(with = "f32_json")]
    momentum: f32,
    #[serde(with = "f32_json")]
    min: f32,
    #[serde(with = "f32_json")]
    max: f32,
    count: u64,
    batches: u64,
    #[serde(with = "f32_json")]
    ema_min: f32,
    #[serde(with = "f32_json")]
    ema_max: f32,
    zeros: u64,
    /// Nonzero values of magnitude below [`F16_MIN_NORMAL`].
    tiny: u64,
    /// `R = 2^exp`; `None` until the first nonzero value.
    exp: Option<i32>,
    pos: Vec<u64>,
    neg: Vec<u64>,
    /// Sentinels seen below `-SENTINEL` and above `SENTINEL`, and their
    /// extremes (see [`SENTINEL`]).
    sentinels: (u64, u64),
    #[serde(with = "f32_json")]
    sentinel_min: f32,
    #[serde(with = "f32_json")]
    sentinel_max: f32,
    /// The distinct ordinary values seen, sorted, while there are at most
    /// [`MAX_LEVELS`]; `None` when not tracked ([`Observer::track_levels`])
    /// or when more were seen.
    #[serde(with = "levels_json")]
    levels: Option<Vec<f32>>,
}

/// [`Observer`]'s levels in JSON, each value exact.
mod levels_json {
    use qport_core::exact::f32_vec_json;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<Vec<f32>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => f32_vec_json::serialize(v, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<f32>>, D::Error> {
        let v: Option<Vec<Option<f64>>> = Option::deserialize(d)?;
        Ok(v.map(|v| {
            v.into_iter()
                .map(|x| x.map_or(f32::NAN, |x| x as f32))
                .collect()
        }))
    }
}

/// Most distinct values [`Observer::levels`] keeps: one 8-bit grid.
pub const MAX_LEVELS: usize = 256;

impl Default for Observer {
    fn default() -> Self {
        Observer::new(ObserverOptions::default())
    }
}

/// Smallest `e` with `2^e > a`, for finite `a > 0`.
fn exp_above(a: f32) -> i32 {
    // Every f32, subnormals included, is a normal f64.
    let biased = ((f64::from(a).to_bits() >> 52) & 0x7ff) as i32;
    biased - 1023 + 1
}

/// `2^e` as f64, for `e` in the normal f64 range.
fn pow2(e: i32) -> f64 {
    f64::from_bits(((e + 1023) as u64) << 52)
}

/// Merges adjacent bin pairs `k` times in place (doubling the range each time).
fn halve_resolution(bins: &mut [u64], k: u32) {
    let n = bins.len();
    // After ceil(log2 n) + 1 merges every count is in bin 0.
    for _ in 0..k.min(usize::BITS + 1) {
        for j in 0..n {
            let a = bins.get(2 * j).copied().unwrap_or(0);
            let b = bins.get(2 * j + 1).copied().unwrap_or(0);
            bins[j] = a + b;
        }
    }
}

impl Observer {
    /// An empty observer. Out-of-range options are clamped (`hist_bins` into
    /// `[2, 2^24]`, `ema_momentum` into `[0, 1]`, NaN momentum to 0.1); use
    /// [`ObserverOptions::validate`] to reject them instead.
    pub fn new(opts: ObserverOptions) -> Observer {
        let n = opts.hist_bins.clamp(2, MAX_HIST_BINS);
        let momentum = if opts.ema_momentum.is_nan() {
            0.1
        } else {
            opts.ema_momentum.clamp(0.0, 1.0)
        };
        Observer {
            momentum,
            min: 0.0,
            max: 0.0,
            count: 0,
            batches: 0,
            ema_min: 0.0,
            ema_max: 0.0,
            zeros: 0,
            tiny: 0,
            exp: None,
            pos: vec![0; n],
            neg: vec![0; n],
            sentinels: (0, 0),
            sentinel_min: 0.0,
            sentinel_max: 0.0,
            levels: None,
        }
    }

    /// Keeps the distinct values seen while there are at most
    /// [`MAX_LEVELS`] (a model input fed 8-bit pixels through an affine
    /// normalization has at most 256): [`Observer::levels`]. Call before
    /// the first batch; later it does nothing.
    pub fn track_levels(&mut self) {
        if self.count == 0 && self.sentinels == (0, 0) {
            self.levels = Some(Vec::new());
        }
    }

    /// The distinct ordinary values seen, sorted, when tracked
    /// ([`Observer::track_levels`]) and at most [`MAX_LEVELS`] of them.
    pub fn levels(&self) -> Option<&[f32]> {
        self.levels.as_deref().filter(|l| !l.is_empty())
    }

    /// Adds `values` to the tracked levels, dropping them past MAX_LEVELS.
    fn add_levels(&mut self, values: &[f32]) {
        let Some(l) = &mut self.levels else { return };
        for &v in values {
            // -0.0 and 0.0 are one level
            let v = if v == 0.0 { 0.0 } else { v };
            if let Err(i) = l.binary_search_by(|x| x.total_cmp(&v)) {
                if l.len() == MAX_LEVELS {
                    self.levels = None;
                    return;
                }
                l.insert(i, v);
            }
        }
    }

    /// Adds one batch. NaN and ±infinity reject the whole batch (the observer
    /// is left unchanged) with their count. An empty batch changes nothing,
    /// not even the EMA.
    pub fn observe(&mut self, values: &[f32]) -> Result<(), NonFinite> {
        let bad = values.iter().filter(|v| !v.is_finite()).count();
        if bad > 0 {
            return Err(NonFinite { count: bad });
        }
        if values.is_empty() {
            return Ok(());
        }
        let (mut bmin, mut bmax) = (f32::INFINITY, f32::NEG_INFINITY);
        for &v in values {
            bmin = bmin.min(v);
            bmax = bmax.max(v);
        }
        if bmin <= -SENTINEL || bmax >= SENTINEL {
            let ordinary: Vec<f32> = values
                .iter()
                .copied()
                .filter(|v| v.abs() < SENTINEL)
                .collect();
            for &v in values.iter().filter(|v| v.abs() >= SENTINEL) {
                let first = self.sentinels == (0, 0);
                if v < 0.0 {
                    self.sentinels.0 += 1;
                } else {
                    self.sentinels.1 += 1;
                }
                self.sentinel_min = if first { v } else { self.sentinel_min.min(v) };
                self.sentinel_max = if first { v } else { self.sentinel_max.max(v) };
            }
            return self.observe(&ordinary);
        }
        self.add_levels(values);
        let amax = bmax.abs().max(bmin.abs());
        if amax > 0.0 {
            self.cover(exp_above(amax));
        }
        if let Some(e) = self.exp {
            let n = self.pos.len();
            let per_unit = n as f64 / pow2(e);
            for &v in values {
                if v == 0.0 {
                    self.zeros += 1;
                    continue;
                }
                self.tiny += u64::from(v.abs() < F16_MIN_NORMAL);
                // Exact: a 24-bit mantissa times an integer scaled by 2^-e.
                let j = ((f64::from(v.abs()) * per_unit) as usize).min(n - 1);
                if v > 0.0 {
                    self.pos[j] += 1;
                } else {
                    self.neg[j] += 1;
                }
            }
        } else {
            self.zeros += values.len() as u64;
        }
        if self.count == 0 {
            (self.min, self.max) = (bmin, bmax);
        } else {
            self.min = self.min.min(bmin);
            self.max = self.max.max(bmax);
        }
        self.count += values.len() as u64;
        if self.batches == 0 {
            (self.ema_min, self.ema_max) = (bmin, bmax);
        } else {
            let m = self.momentum;
            self.ema_min = (1.0 - m) * self.ema_min + m * bmin;
            self.ema_max = (1.0 - m) * self.ema_max + m * bmax;
        }
        self.batches += 1;
        Ok(())
    }

    /// Grows `R` to at least `2^e`, re-binning exactly.
    fn cover(&mut self, e: i32) {
        match self.exp {
            None => self.exp = Some(e),
            Some(cur) if e > cur => {
                let k = (e - cur) as u32;
                halve_resolution(&mut self.pos, k);
                halve_resolution(&mut self.neg, k);
                self.exp = Some(e);
            }
            Some(_) => {}
        }
    }

    /// Folds `other` into `self`, as if `self` had also observed all of
    /// `other`'s values. Min, max, count and the histogram are exact (the
    /// histogram is bit-identical to observing everything in one observer)
    /// when both use the same `hist_bins`; otherwise `other`'s bins are
    /// re-binned by their centres (approximate). The EMA is approximate: the
    /// batch-count-weighted mean of the two EMAs.
    pub fn merge(&mut self, other: &Observer) {
        if other.sentinels != (0, 0) {
            let first = self.sentinels == (0, 0);
            self.sentinels.0 += other.sentinels.0;
            self.sentinels.1 += other.sentinels.1;
            self.sentinel_min = if first {
                other.sentinel_min
            } else {
                self.sentinel_min.min(other.sentinel_min)
            };
            self.sentinel_max = if first {
                other.sentinel_max
            } else {
                self.sentinel_max.max(other.sentinel_max)
            };
        }
        if other.count == 0 {
            return;
        }
        match (&self.levels, &other.levels) {
            _ if self.count == 0 => self.levels = other.levels.clone(),
            (Some(_), Some(o)) => {
                let o = o.clone();
                self.add_levels(&o);
            }
            _ => self.levels = None,
        }
        if self.count == 0 {
            (self.min, self.max) = (other.min, other.max);
        } else {
            self.min = self.min.min(other.min);
            self.max = self.max.max(other.max);
        }
        self.count += other.count;
        self.zeros += other.zeros;
        self.tiny += other.tiny;
        if self.batches == 0 {
            (self.ema_min, self.ema_max) = (other.ema_min, other.ema_max);
        } else if other.batches > 0 {
            let (a, b) = (self.batches as f64, other.batches as f64);
            let mix = |x: f32, y: f32| ((a * f64::from(x) + b * f64::from(y)) / (a + b)) as f32;
            self.ema_min = mix(self.ema_min, other.ema_min);
            self.ema_max = mix(self.ema_max, other.ema_max);
        }
        self.batches += other.batches;
        let Some(eo) = other.exp else { return };
        self.cover(eo);
        let e = self.exp.unwrap_or(eo);
        let n = self.pos.len();
        if other.pos.len() == n {
            let (mut p, mut q) = (other.pos.clone(), other.neg.clone());
            halve_resolution(&mut p, (e - eo) as u32);
            halve_resolution(&mut q, (e - eo) as u32);
            for j in 0..n {
                self.pos[j] += p[j];
                self.neg[j] += q[j];
            }
        } else {
            let wo = pow2(eo) / other.pos.len() as f64;
            let per_unit = n as f64 / pow2(e);
            for (j, (&p, &q)) in other.pos.iter().zip(&other.neg).enumerate() {
                let k = (((j as f64 + 0.5) * wo * per_unit) as usize).min(n - 1);
                self.pos[k] += p;
                self.neg[k] += q;
            }
        }
    }

    /// How many nonzero values of magnitude below [`F16_MIN_NORMAL`] (float16's
    /// smallest normal number) were seen: values float16 holds only as
    /// subnormals, with fewer significant bits, or flushes to zero.
    pub fn below_f16_normal(&self) -> u64 {
        self.tiny
    }

    /// How many nonzero values were seen.
    pub fn nonzero(&self) -> u64 {
        self.count - self.zeros
    }

    /// Sentinels seen (see [`SENTINEL`]): `(below -SENTINEL, above
    /// SENTINEL)`. They are not in [`Observer::min`], [`Observer::max`],
    /// [`Observer::count`] or the histogram.
    pub fn sentinels(&self) -> (u64, u64) {
        self.sentinels
    }

    /// Smallest and largest value seen, sentinels included; `None` before
    /// the first value.
    pub fn extremes(&self) -> Option<(f32, f32)> {
        let ordinary = (self.count > 0).then_some((self.min, self.max));
        if self.sentinels == (0, 0) {
            return ordinary;
        }
        let (smin, smax) = (self.sentinel_min, self.sentinel_max);
        Some(match ordinary {
            Some((a, b)) => (a.min(smin), b.max(smax)),
            None => (smin, smax),
        })
    }

    /// Smallest ordinary value seen (sentinels left out); `None` before the
    /// first one.
    pub fn min(&self) -> Option<f32> {
        (self.count > 0).then_some(self.min)
    }

    /// Largest ordinary value seen (sentinels left out); `None` before the
    /// first one.
    pub fn max(&self) -> Option<f32> {
        (self.count > 0).then_some(self.max)
    }

    /// Number of values seen.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Number of non-empty batches seen.
    pub fn batches(&self) -> u64 {
        self.batches
    }

    /// Moving average of per-batch minima; `None` before the first value.
    pub fn ema_min(&self) -> Option<f32> {
        (self.batches > 0).then_some(self.ema_min)
    }

    /// Moving average of per-batch maxima; `None` before the first value.
    pub fn ema_max(&self) -> Option<f32> {
        (self.batches > 0).then_some(self.ema_max)
    }

    /// EMA momentum in use (after clamping).
    pub fn momentum(&self) -> f32 {
        self.momentum
    }

    /// Read access to the histogram.
    pub fn histogram(&self) -> HistogramView<'_> {
        HistogramView {
            positive: &self.pos,
            negative: &self.neg,
            zeros: self.zeros,
            range: self.exp.map_or(0.0, pow2),
        }
    }
}

/// Borrowed view of an [`Observer`]'s histogram (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistogramView<'a> {
    positive: &'a [u64],
    negative: &'a [u64],
    zeros: u64,
    range: f64,
}

impl<'a> HistogramView<'a> {
    /// Bins per half-histogram.
    pub fn bins(&self) -> usize {
        self.positive.len()
    }

    /// `R`: the half-histograms cover magnitudes in `[0, R)`. A power of two,
    /// or 0 while only zeros have been seen.
    pub fn range(&self) -> f64 {
        self.range
    }

    /// Bin width `R / bins`.
    pub fn bin_width(&self) -> f64 {
        self.range / self.bins() as f64
    }

    /// Counts of positive values: bin `j` holds `x` in `[j·w, (j+1)·w)`, `x > 0`.
    pub fn positive(&self) -> &'a [u64] {
        self.positive
    }

    /// Counts of negative values: bin `j` holds `x` with `|x|` in
    /// `[j·w, (j+1)·w)`, `x < 0`.
    pub fn negative(&self) -> &'a [u64] {
        self.negative
    }

    /// Number of exact zeros (not in any bin).
    pub fn zeros(&self) -> u64 {
        self.zeros
    }

    /// Magnitude bin edges `j·w`, `j = 0..=bins` (shared by both halves).
    pub fn edges(&self) -> Vec<f64> {
        let w = self.bin_width();
        (0..=self.bins()).map(|j| j as f64 * w).collect()
    }

    /// Histogram of `|x|` for nonzero `x`: `positive[j] + negative[j]`.
    pub fn abs_counts(&self) -> Vec<u64> {
        self.positive
            .iter()
            .zip(self.negative)
            .map(|(p, n)| p + n)
            .collect()
    }

    /// All values counted: bins plus zeros (equals [`Observer::count`]).
    pub fn total(&self) -> u64 {
        self.zeros + self.positive.iter().sum::<u64>() + self.negative.iter().sum::<u64>()
    }
}

/// Errors of [`ChannelObserver::observe`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ChannelObserveError {
    /// NaN or infinity in the batch; nothing was recorded.
    #[error(transparent)]
    NonFinite(#[from] NonFinite),
    /// The shape does not fit the values or the axis.
    #[error(transparent)]
    Shape(#[from] ShapeError),
    /// The axis or channel count differs from earlier batches.
    #[error("channel layout changed: axis {axis} with {channels} channels, earlier axis {prev_axis} with {prev_channels}")]
    Layout {
        /// Axis of this batch.
        axis: usize,
        /// Channels of this batch.
        channels: usize,
        /// Axis of earlier batches.
        prev_axis: usize,
        /// Channels of earlier batches.
        prev_channels: usize,
    },
}

/// A tensor shape that does not fit its values or the axis asked for
/// (`check_shape`); part of [`ChannelObserveError`] and
/// [`crate::calib::CalibError`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ShapeError {
    /// The shape's element count differs from the number of values.
    #[error("shape {shape:?} has {expected:?} elements but {len} values were given")]
    Count {
        /// The shape given.
        shape: Vec<usize>,
        /// Its element count (`None` on overflow).
        expected: Option<usize>,
        /// The number of values.
        len: usize,
    },
    /// The axis is not below the rank.
    #[error("axis {axis} is out of range for rank {rank}")]
    Axis {
        /// The axis given.
        axis: usize,
        /// The rank of the shape.
        rank: usize,
    },
}

/// Checks that `shape` (row-major) describes `len` values and `axis` (if any)
/// is below its rank.
pub(crate) fn check_shape(
    len: usize,
    shape: &[usize],
    axis: Option<usize>,
) -> Result<(), ShapeError> {
    let expected = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    if expected != Some(len) {
        let shape = shape.to_vec();
        return Err(ShapeError::Count {
            shape,
            expected,
            len,
        });
    }
    match axis {
        Some(axis) if axis >= shape.len() => Err(ShapeError::Axis {
            axis,
            rank: shape.len(),
        }),
        _ => Ok(()),
    }
}

/// One [`Observer`] per slice along an axis (per-channel statistics).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelObserver {
    opts: ObserverOptions,
    axis: Option<usize>,
    channels: Vec<Observer>,
}

impl ChannelObserver {
    /// An empty channel observer; the axis and channel count are fixed by the
    /// first batch.
    pub fn new(opts: ObserverOptions) -> ChannelObserver {
        ChannelObserver {
            opts,
            axis: None,
            channels: Vec::new(),
        }
    }

    /// Adds one batch of a tensor of `shape` (row-major): channel `c` observes
    /// every value whose index along `axis` is `c`, as one batch. Checks
    /// everything before recording anything.
    pub fn observe(
        &mut self,
        values: &[f32],
        shape: &[usize],
        axis: usize,
    ) -> Result<(), ChannelObserveError> {
        check_shape(values.len(), shape, Some(axis))?;
        let c = shape[axis];
        if let Some(prev) = self.axis {
            if prev != axis || self.channels.len() != c {
                return Err(ChannelObserveError::Layout {
                    axis,
                    channels: c,
                    prev_axis: prev,
                    prev_channels: self.channels.len(),
                });
            }
        }
        let bad = values.iter().filter(|v| !v.is_finite()).count();
        if bad > 0 {
            return Err(NonFinite { count: bad }.into());
        }
        if self.axis.is_none() {
            self.axis = Some(axis);
            self.channels = vec![Observer::new(self.opts); c];
        }
        let inner: usize = shape[axis + 1..].iter().product();
        if inner == 0 || c == 0 {
            return Ok(());
        }
        let outer = values.len() / (inner * c);
        let mut buf = Vec::with_capacity(outer * inner);
        for (ch, obs) in self.channels.iter_mut().enumerate() {
            buf.clear();
            for o in 0..outer {
                let start = (o * c + ch) * inner;
                buf.extend_from_slice(&values[start..start + inner]);
            }
            obs.observe(&buf)?;
        }
        Ok(())
    }

    /// Axis of the channels; `None` before the first batch.
    pub fn axis(&self) -> Option<usize> {
        self.axis
    }

    /// The per-channel observers (empty before the first batch).
    pub fn channels(&self) -> &[Observer] {
        &self.channels
    }

    /// Folds another channel observer in (see [`Observer::merge`]); the
    /// layouts must match, or one of them must be empty.
    pub fn merge(&mut self, other: &ChannelObserver) -> Result<(), ChannelObserveError> {
        let Some(axis) = other.axis else {
            return Ok(());
        };
        match self.axis {
            None => {
                self.axis = other.axis;
                self.channels = other.channels.clone();
            }
            Some(prev) if prev != axis || self.channels.len() != other.channels.len() => {
                return Err(ChannelObserveError::Layout {
                    axis,
                    channels: other.channels.len(),
                    prev_axis: prev,
                    prev_channels: self.channels.len(),
                });
            }
            Some(_) => {
                for (a, b) in self.channels.iter_mut().zip(&other.channels) {
                    a.merge(b);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_above_is_strict() {
        assert_eq!(exp_above(1.0), 1);
        assert_eq!(exp_above(0.75), 0);
        assert_eq!(exp_above(2.0), 2);
        assert_eq!(exp_above(f32::MAX), 128);
        assert_eq!(exp_above(f32::from_bits(1)), -148);
    }

    #[test]
    fn growth_merges_pairs() {
        let mut o = Observer::new(ObserverOptions {
            hist_bins: 4,
            ..Default::default()
        });
        o.observe(&[0.1, 0.3, 0.6, 0.9]).unwrap(); // R = 1, w = 0.25
        assert_eq!(o.histogram().positive(), &[1, 1, 1, 1]);
        o.observe(&[-3.5]).unwrap(); // R = 4, w = 1
        let h = o.histogram();
        assert_eq!(h.range(), 4.0);
        assert_eq!(h.positive(), &[4, 0, 0, 0]);
        assert_eq!(h.negative(), &[0, 0, 0, 1]);
    }

    #[test]
    fn channel_layout() {
        let mut c = ChannelObserver::new(ObserverOptions::default());
        // shape [2, 3, 2], axis 1: channel k holds values with middle index k.
        let v: Vec<f32> = (0..12).map(|i| i as f32).collect();
        c.observe(&v, &[2, 3, 2], 1).unwrap();
        let mm: Vec<_> = c
            .channels()
            .iter()
            .map(|o| (o.min().unwrap(), o.max().unwrap(), o.count()))
            .collect();
        assert_eq!(mm, vec![(0.0, 7.0, 4), (2.0, 9.0, 4), (4.0, 11.0, 4)]);
        assert!(matches!(
            c.observe(&v, &[2, 2, 3], 1),
            Err(ChannelObserveError::Layout { .. })
        ));
        assert!(matches!(
            c.observe(&v, &[2, 3, 3], 1),
            Err(ChannelObserveError::Shape(ShapeError::Count { .. }))
        ));
    }
}
