//! The latency regime of an accelerator whose `N` cores share one
//! device-to-host (D2H) link: when does the output transfer, not the
//! compute, set the throughput (seed `004_…` §latency regimes, Table 5,
//! Figure 3).
//!
//! # Model
//!
//! One inference computes for `c` ms on one core and then moves its
//! output of `b` bytes over the link in `d(b) = fixed + b / bandwidth` ms
//! ([`LinkModel`]). The cores compute in parallel; the link carries one
//! transfer at a time. In steady state (a core computes the next
//! inference while its previous output is in flight) the period of `N`
//! cores is `max(c / N, d)`, so
//!
//! ```text
//! throughput_N = min(N / c, 1 / d)        throughput_1 = min(1 / c, 1 / d)
//! scaling      = throughput_N / throughput_1 = clamp(c / d, 1, N)
//! ```
//!
//! (`min(N/c, 1/d)`, the study's wording, and the pipelined
//! `1 / max(c/N, d)` are the same expression.) A serial core (compute,
//! then wait for its own transfer) would give `min(N, 1 + c / d)`
//! instead; on the study's sweep that predicts 1.30x at 8.892 ms where
//! 1.00x was measured, and 2.11x at 2.429 ms where 1.21x was, while the
//! pipelined form predicts 1.00x and 1.11x, so the pipelined form is
//! the one used here.
//!
//! Two thresholds bound the transition band ([`Thresholds`]):
//!
//! * the **link-saturation onset**, `d = c / N`: below it the link idles
//!   part of the time and `N` cores scale linearly (compute-bound);
//! * the **single-inference crossover**, `d = c`: from it on one
//!   inference's transfer outlasts its compute and extra cores add
//!   nothing (D2H-bound).
//!
//! In D2H time the band is exactly `N` wide; in bytes its width ratio
//! (crossover / onset) is `N` when the fixed cost is small.
//!
//! # Measured sweeps
//!
//! A sweep ([`SweepPoint`]) gives measured D2H p50 per output size. The
//! thresholds use **piecewise-linear interpolation** of the measured D2H
//! between the two neighbouring points that bracket the level
//! ([`interpolate_bytes`]): it needs no model and follows a link whose
//! cost is not linear over the whole range (the study's top point,
//! 8.892 ms at 1,999,984 B, is 3.7x the 1,000,384 B point for 2x the
//! bytes). The least-squares [`LinkFit`] of the link model is reported
//! beside it with its residuals, over all points and over the points
//! below the crossover, and gives thresholds of its own for comparison.
//!
//! A point is classified from its D2H against the thresholds
//! ([`Regime::classify_d2h`]); when the sweep also has measured scaling
//! (or 1-core and N-core throughput) the point's class is the measured
//! one ([`Regime::classify_scaling`]: plateau within `tol` of `N`,
//! flat within `tol` of 1, transition between), and the model's class is
//! kept beside it, so a link that saturates before the model says shows.
//!
//! ```
//! use qport_platform::regime::{analyze_sweep, Regime, RegimeClass, SweepPoint};
//! let points: Vec<SweepPoint> = [(3_920, 0.141), (256_368, 0.776), (511_952, 1.367),
//!     (1_000_384, 2.429), (1_999_984, 8.892)]
//!     .into_iter().map(|(b, d)| SweepPoint::new(b, d)).collect();
//! let a = analyze_sweep(&Regime::new(2.70, 3).unwrap(), &points, 0.05).unwrap();
//! let t = &a.thresholds;
//! assert!((t.onset_bytes.unwrap() - 326_377.0).abs() / 326_377.0 < 0.10);
//! assert!((t.crossover_bytes.unwrap() - 1_095_949.0).abs() / 1_095_949.0 < 0.10);
//! assert!((t.width_ratio.unwrap() - 3.36).abs() < 0.05);
//! assert_eq!(a.points[4].class, RegimeClass::D2hBound);
//! ```

use serde::Serialize;

/// Why a regime could not be analysed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RegimeError {
    /// A parameter out of its range (cores < 1, a time <= 0...).
    #[error("{what} must be {must}, got {got}")]
    BadParameter {
        /// The parameter.
        what: &'static str,
        /// What it must be.
        must: &'static str,
        /// The value given.
        got: String,
    },
    /// A sweep CSV that cannot be read.
    #[error("{file}: {reason}")]
    BadCsv {
        /// The file (as given).
        file: String,
        /// What is wrong, naming the row and column.
        reason: String,
    },
    /// Too few points or no spread in output size.
    #[error("cannot fit the link model: {0}")]
    Fit(String),
}

fn positive(what: &'static str, v: f64) -> Result<f64, RegimeError> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(RegimeError::BadParameter {
            what,
            must: "a positive finite number",
            got: v.to_string(),
        })
    }
}

/// The D2H link: `d(b) = fixed_ms + b / bytes_per_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LinkModel {
    /// Fixed cost of one transfer, ms.
    pub fixed_ms: f64,
    /// Bandwidth, bytes per ms (= kB/s).
    pub bytes_per_ms: f64,
}

impl LinkModel {
    /// A link of `fixed_ms >= 0` and bandwidth `bytes_per_ms > 0`.
    pub fn new(fixed_ms: f64, bytes_per_ms: f64) -> Result<LinkModel, RegimeError> {
        if !(fixed_ms.is_finite() && fixed_ms >= 0.0) {
            return Err(RegimeError::BadParameter {
                what: "link fixed cost (ms)",
                must: "a finite number >= 0",
                got: fixed_ms.to_string(),
            });
        }
        let bytes_per_ms = positive("link bandwidth", bytes_per_ms)?;
        Ok(LinkModel {
            fixed_ms,
            bytes_per_ms,
        })
    }

    /// D2H time of `bytes`, ms.
    pub fn d2h_ms(&self, bytes: f64) -> f64 {
        self.fixed_ms + bytes / self.bytes_per_ms
    }

    /// The output size whose D2H time is `d_ms` (`None` when the fixed
    /// cost alone exceeds it or the bandwidth is not positive).
    pub fn bytes_at(&self, d_ms: f64) -> Option<f64> {
        let b = (d_ms - self.fixed_ms) * self.bytes_per_ms;
        (self.bytes_per_ms > 0.0 && b >= 0.0).then_some(b)
    }
}

/// Compute time per inference and core count.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Regime {
    /// Compute time of one inference on one core, ms.
    pub compute_ms: f64,
    /// Cores sharing the link (`N`).
    pub cores: u32,
}

/// Where a point sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RegimeClass {
    /// Below the onset: cores scale linearly.
    ComputeBound,
    /// Between onset and crossover.
    Transition,
    /// From the crossover on: one transfer outlasts one compute.
    D2hBound,
}

impl RegimeClass {
    /// The name used in reports (`compute-bound`, `transition`, `d2h-bound`).
    pub fn name(self) -> &'static str {
        match self {
            RegimeClass::ComputeBound => "compute-bound",
            RegimeClass::Transition => "transition",
            RegimeClass::D2hBound => "d2h-bound",
        }
    }
}

impl Regime {
    /// `compute_ms > 0` and `cores >= 1`.
    pub fn new(compute_ms: f64, cores: u32) -> Result<Regime, RegimeError> {
        if cores < 1 {
            return Err(RegimeError::BadParameter {
                what: "cores (N)",
                must: "at least 1",
                got: cores.to_string(),
            });
        }
        Ok(Regime {
            compute_ms: positive("compute time (ms)", compute_ms)?,
            cores,
        })
    }

    /// D2H time at the link-saturation onset, `c / N`.
    pub fn onset_ms(&self) -> f64 {
        self.compute_ms / f64::from(self.cores)
    }

    /// D2H time at the single-inference crossover, `c`.
    pub fn crossover_ms(&self) -> f64 {
        self.compute_ms
    }

    /// Predicted N-core throughput over 1-core throughput at D2H `d_ms`:
    /// `clamp(c / d, 1, N)` (see the module docs).
    pub fn predicted_scaling(&self, d_ms: f64) -> f64 {
        (self.compute_ms / d_ms).clamp(1.0, f64::from(self.cores))
    }

    /// Predicted N-core throughput, inferences per second.
    pub fn predicted_throughput(&self, d_ms: f64) -> f64 {
        1000.0 / self.onset_ms().max(d_ms)
    }

    /// Class of a D2H time: compute-bound below `c / N`, D2H-bound from
    /// `c` on, transition between. With `N = 1` the band is empty.
    pub fn classify_d2h(&self, d_ms: f64) -> RegimeClass {
        if d_ms >= self.crossover_ms() {
            RegimeClass::D2hBound
        } else if d_ms < self.onset_ms() {
            RegimeClass::ComputeBound
        } else {
            RegimeClass::Transition
        }
    }

    /// Class of a measured scaling: compute-bound when within `tol`
    /// (relative) of `N`, D2H-bound when within `tol` of 1, transition
    /// between. With `N = 1` every point is compute-bound (nothing to
    /// scale).
    pub fn classify_scaling(&self, scaling: f64, tol: f64) -> RegimeClass {
        let n = f64::from(self.cores);
        if self.cores == 1 || scaling >= n * (1.0 - tol) {
            RegimeClass::ComputeBound
        } else if scaling <= 1.0 + tol {
            RegimeClass::D2hBound
        } else {
            RegimeClass::Transition
        }
    }

    /// Onset and crossover of an analytic link.
    pub fn link_thresholds(&self, link: &LinkModel) -> Thresholds {
        Thresholds::new(
            link.bytes_at(self.onset_ms()),
            link.bytes_at(self.crossover_ms()),
        )
    }
}

/// The band's edges in output bytes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Thresholds {
    /// Output bytes where D2H = compute / N (`None`: outside the sweep,
    /// or the fixed cost alone exceeds it).
    pub onset_bytes: Option<f64>,
    /// Output bytes where D2H = compute (`None` likewise).
    pub crossover_bytes: Option<f64>,
    /// crossover / onset, when both are known and the onset is positive.
    pub width_ratio: Option<f64>,
}

impl Thresholds {
    /// Thresholds from the two edges.
    pub fn new(onset_bytes: Option<f64>, crossover_bytes: Option<f64>) -> Thresholds {
        let width_ratio = match (onset_bytes, crossover_bytes) {
            (Some(o), Some(c)) if o > 0.0 => Some(c / o),
            _ => None,
        };
        Thresholds {
            onset_bytes,
            crossover_bytes,
            width_ratio,
        }
    }
}

/// One measured point of a sweep.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SweepPoint {
    /// Output bytes of the inference.
    pub bytes: u64,
    /// Measured D2H p50, ms.
    pub d2h_ms: f64,
    /// Measured 1-core throughput, inferences per second.
    pub throughput_1: Option<f64>,
    /// Measured N-core throughput, inferences per second.
    pub throughput_n: Option<f64>,
    /// Measured N-core scaling, when given directly.
    pub scaling: Option<f64>,
}

impl SweepPoint {
    /// A point with output size and D2H only.
    pub fn new(bytes: u64, d2h_ms: f64) -> SweepPoint {
        SweepPoint {
            bytes,
            d2h_ms,
            throughput_1: None,
            throughput_n: None,
            scaling: None,
        }
    }

    /// Measured scaling: the `scaling` column, else N-core / 1-core
    /// throughput.
    pub fn measured_scaling(&self) -> Option<f64> {
        self.scaling
            .or(match (self.throughput_1, self.throughput_n) {
                (Some(a), Some(b)) => Some(b / a),
                _ => None,
            })
    }
}

/// A least-squares fit of [`LinkModel`] to measured points.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkFit {
    /// Which points were fitted (`all`, `below-crossover`).
    pub over: &'static str,
    /// Output sizes of the fitted points.
    pub bytes: Vec<u64>,
    /// The fitted link (a negative fixed cost is kept as fitted).
    pub link: LinkModel,
    /// Measured minus fitted D2H per fitted point, ms.
    pub residuals_ms: Vec<f64>,
    /// Root mean square of the residuals, ms.
    pub rms_ms: f64,
    /// Coefficient of determination.
    pub r2: f64,
    /// Onset and crossover of the fitted line.
    pub thresholds: Thresholds,
}

/// Ordinary least squares of D2H on bytes over `points` (at least two,
/// with at least two distinct sizes and a positive slope).
pub fn fit_link(
    regime: &Regime,
    points: &[SweepPoint],
    over: &'static str,
) -> Result<LinkFit, RegimeError> {
    if points.len() < 2 {
        return Err(RegimeError::Fit(format!(
            "{} point(s) {over}; at least 2 are needed",
            points.len()
        )));
    }
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.bytes as f64).sum::<f64>() / n;
    let my = points.iter().map(|p| p.d2h_ms).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.bytes as f64 - mx).powi(2)).sum();
    let sxy: f64 = points
        .iter()
        .map(|p| (p.bytes as f64 - mx) * (p.d2h_ms - my))
        .sum();
    if sxx <= 0.0 {
        return Err(RegimeError::Fit(format!(
            "the points {over} all have the same output size"
        )));
    }
    let slope = sxy / sxx;
    if slope <= 0.0 {
        return Err(RegimeError::Fit(format!(
            "D2H does not grow with output size over the points {over} (slope {slope:e} ms/B)"
        )));
    }
    let link = LinkModel {
        fixed_ms: my - slope * mx,
        bytes_per_ms: 1.0 / slope,
    };
    let residuals_ms: Vec<f64> = points
        .iter()
        .map(|p| p.d2h_ms - link.d2h_ms(p.bytes as f64))
        .collect();
    let ss_res: f64 = residuals_ms.iter().map(|r| r * r).sum();
    let ss_tot: f64 = points.iter().map(|p| (p.d2h_ms - my).powi(2)).sum();
    Ok(LinkFit {
        over,
        bytes: points.iter().map(|p| p.bytes).collect(),
        link,
        rms_ms: (ss_res / n).sqrt(),
        r2: if ss_tot > 0.0 {
            1.0 - ss_res / ss_tot
        } else {
            1.0
        },
        residuals_ms,
        thresholds: regime.link_thresholds(&link),
    })
}

/// The output size where the measured D2H first reaches `level_ms`, by
/// linear interpolation between the two neighbouring points that bracket
/// it (`points` sorted by size). `None` when the sweep never brackets it
/// (every point above, or every point below).
pub fn interpolate_bytes(points: &[SweepPoint], level_ms: f64) -> Option<f64> {
    points.windows(2).find_map(|w| {
        let (a, b) = (w[0], w[1]);
        (a.d2h_ms <= level_ms && level_ms <= b.d2h_ms && a.d2h_ms < b.d2h_ms).then(|| {
            let t = (level_ms - a.d2h_ms) / (b.d2h_ms - a.d2h_ms);
            a.bytes as f64 + t * (b.bytes as f64 - a.bytes as f64)
        })
    })
}

/// One point as analysed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PointAnalysis {
    /// Output bytes.
    pub bytes: u64,
    /// D2H time, ms (measured, or from the link model).
    pub d2h_ms: f64,
    /// Predicted N-core scaling at this D2H.
    pub predicted_scaling: f64,
    /// Predicted N-core throughput, inferences per second.
    pub predicted_throughput: f64,
    /// Measured scaling, when the sweep has it.
    pub measured_scaling: Option<f64>,
    /// Class from the D2H time against the thresholds.
    pub model_class: RegimeClass,
    /// Class from the measured scaling, when the sweep has it.
    pub measured_class: Option<RegimeClass>,
    /// The point's class: the measured one when there is one, else the
    /// model's.
    pub class: RegimeClass,
}

impl PointAnalysis {
    fn new(regime: &Regime, bytes: u64, d2h_ms: f64, measured: Option<f64>, tol: f64) -> Self {
        let model_class = regime.classify_d2h(d2h_ms);
        let measured_class = measured.map(|s| regime.classify_scaling(s, tol));
        PointAnalysis {
            bytes,
            d2h_ms,
            predicted_scaling: regime.predicted_scaling(d2h_ms),
            predicted_throughput: regime.predicted_throughput(d2h_ms),
            measured_scaling: measured,
            model_class,
            measured_class,
            class: measured_class.unwrap_or(model_class),
        }
    }
}

/// What [`analyze_sweep`] and [`analyze_link`] found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Analysis {
    /// Compute time and cores.
    pub regime: Regime,
    /// D2H time at the onset (c / N) and at the crossover (c), ms.
    pub onset_ms: f64,
    /// D2H time at the crossover (c), ms.
    pub crossover_ms: f64,
    /// How the thresholds were found: `interpolated` (measured sweep) or
    /// `link-model`.
    pub thresholds_from: &'static str,
    /// Onset, crossover and width ratio in bytes.
    pub thresholds: Thresholds,
    /// Every point, by size.
    pub points: Vec<PointAnalysis>,
    /// Least-squares fits of the link model (measured sweeps only): over
    /// all points, and over the points below the crossover when they are
    /// fewer and at least two.
    pub fits: Vec<LinkFit>,
}

fn check_points(points: &[SweepPoint]) -> Result<(), RegimeError> {
    for p in points {
        positive("D2H time (ms)", p.d2h_ms)?;
    }
    if let Some(w) = points.windows(2).find(|w| w[1].bytes <= w[0].bytes) {
        return Err(RegimeError::BadParameter {
            what: "output sizes",
            must: "strictly increasing",
            got: format!("{} after {}", w[1].bytes, w[0].bytes),
        });
    }
    Ok(())
}

/// Analyses a measured sweep (sizes strictly increasing, D2H > 0); `tol`
/// is the relative tolerance of [`Regime::classify_scaling`].
pub fn analyze_sweep(
    regime: &Regime,
    points: &[SweepPoint],
    tol: f64,
) -> Result<Analysis, RegimeError> {
    check_points(points)?;
    let mut fits = vec![fit_link(regime, points, "all")?];
    let below: Vec<SweepPoint> = points
        .iter()
        .filter(|p| p.d2h_ms < regime.crossover_ms())
        .copied()
        .collect();
    if below.len() >= 2 && below.len() < points.len() {
        if let Ok(f) = fit_link(regime, &below, "below-crossover") {
            fits.push(f);
        }
    }
    Ok(Analysis {
        regime: *regime,
        onset_ms: regime.onset_ms(),
        crossover_ms: regime.crossover_ms(),
        thresholds_from: "interpolated",
        thresholds: Thresholds::new(
            interpolate_bytes(points, regime.onset_ms()),
            interpolate_bytes(points, regime.crossover_ms()),
        ),
        points: points
            .iter()
            .map(|p| PointAnalysis::new(regime, p.bytes, p.d2h_ms, p.measured_scaling(), tol))
            .collect(),
        fits,
    })
}

/// Predicts the regime of `sizes` (bytes, strictly increasing) over an
/// analytic link.
pub fn analyze_link(
    regime: &Regime,
    link: &LinkModel,
    sizes: &[u64],
) -> Result<Analysis, RegimeError> {
    let points: Vec<SweepPoint> = sizes
        .iter()
        .map(|&b| SweepPoint::new(b, link.d2h_ms(b as f64)))
        .collect();
    check_points(&points)?;
    Ok(Analysis {
        regime: *regime,
        onset_ms: regime.onset_ms(),
        crossover_ms: regime.crossover_ms(),
        thresholds_from: "link-model",
        thresholds: regime.link_thresholds(link),
        points: points
            .iter()
            .map(|p| PointAnalysis::new(regime, p.bytes, p.d2h_ms, None, 0.0))
            .collect(),
        fits: vec![],
    })
}

/// `count` output sizes spaced evenly in log scale from `lo` to `hi`
/// bytes (both included, rounded, deduplicated): the default grid of a
/// link-model prediction.
pub fn log_sizes(lo: u64, hi: u64, count: usize) -> Vec<u64> {
    let (lo, hi) = (lo.max(1), hi.max(lo.max(1)));
    let count = count.max(2);
    let (a, b) = ((lo as f64).ln(), (hi as f64).ln());
    let mut v: Vec<u64> = (0..count)
        .map(|i| (a + (b - a) * i as f64 / (count - 1) as f64).exp().round() as u64)
        .collect();
    v.dedup();
    v
}
