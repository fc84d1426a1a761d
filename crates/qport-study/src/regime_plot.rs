//! The SVG of a latency regime analysis
//! ([`qport_platform::regime::Analysis`]): N-core scaling against output
//! size (the model's curve, its value at each point, the measured scaling
//! when the sweep has it, the onset-to-crossover band shaded, as the
//! study's Figure 3), and D2H time against output size (the points, the
//! least-squares link fits, the `c / N` and `c` levels). The plot is drawn
//! from [`RegimePlot`], the analysis's plotted values in a form a report
//! stores and reads back (`qport.study/1`'s `regime` section).

use crate::svg::{render_panels, Band, Chart, Series};
use qport_platform::regime::{Analysis, Regime, RegimeClass};
use serde::{Deserialize, Serialize};

/// Sub-steps drawn between neighbouring points on a log x axis.
const STEPS: usize = 24;

/// One point of a regime plot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegimePoint {
    /// Output bytes.
    pub bytes: u64,
    /// D2H time, ms (measured or from the link model).
    pub d2h_ms: f64,
    /// The model's N-core scaling at this point.
    pub predicted_scaling: f64,
    /// The measured scaling, when the sweep has it.
    pub measured_scaling: Option<f64>,
    /// `compute-bound`, `transition` or `d2h-bound`.
    pub class: String,
}

/// A least-squares link fit drawn on the D2H panel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegimeFit {
    /// Which points were fitted (`all`, `below-crossover`).
    pub over: String,
    /// Fixed cost of one transfer, ms.
    pub fixed_ms: f64,
    /// Bandwidth, bytes per ms.
    pub bytes_per_ms: f64,
    /// Coefficient of determination (`null`: not finite).
    pub r2: Option<f64>,
}

/// What a regime plot draws: an [`Analysis`]'s values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegimePlot {
    /// Cores sharing the link (`N`).
    pub cores: u32,
    /// Compute time of one inference on one core, ms.
    pub compute_ms: f64,
    /// D2H time at the onset (`c / N`), ms.
    pub onset_ms: f64,
    /// D2H time at the crossover (`c`), ms.
    pub crossover_ms: f64,
    /// `interpolated` (measured sweep) or `link-model`.
    pub thresholds_from: String,
    /// Output bytes at the onset, when found.
    pub onset_bytes: Option<f64>,
    /// Output bytes at the crossover, when found.
    pub crossover_bytes: Option<f64>,
    /// Crossover over onset bytes, when both are found.
    pub width_ratio: Option<f64>,
    /// Every point, by size.
    pub points: Vec<RegimePoint>,
    /// The link fits (measured sweeps only).
    pub fits: Vec<RegimeFit>,
}

fn finite(x: Option<f64>) -> Option<f64> {
    x.filter(|v| v.is_finite())
}

impl From<&Analysis> for RegimePlot {
    fn from(a: &Analysis) -> RegimePlot {
        RegimePlot {
            cores: a.regime.cores,
            compute_ms: a.regime.compute_ms,
            onset_ms: a.onset_ms,
            crossover_ms: a.crossover_ms,
            thresholds_from: a.thresholds_from.into(),
            onset_bytes: finite(a.thresholds.onset_bytes),
            crossover_bytes: finite(a.thresholds.crossover_bytes),
            width_ratio: finite(a.thresholds.width_ratio),
            points: a
                .points
                .iter()
                .map(|p| RegimePoint {
                    bytes: p.bytes,
                    d2h_ms: p.d2h_ms,
                    predicted_scaling: p.predicted_scaling,
                    measured_scaling: finite(p.measured_scaling),
                    class: p.class.name().into(),
                })
                .collect(),
            fits: a
                .fits
                .iter()
                .map(|f| RegimeFit {
                    over: f.over.into(),
                    fixed_ms: f.link.fixed_ms,
                    bytes_per_ms: f.link.bytes_per_ms,
                    r2: finite(Some(f.r2)),
                })
                .collect(),
        }
    }
}

impl RegimePlot {
    fn regime(&self) -> Regime {
        Regime {
            compute_ms: self.compute_ms,
            cores: self.cores,
        }
    }
}

/// The model's scaling curve: D2H interpolated linearly in bytes between
/// neighbouring points (exact for a link model), sampled evenly in log
/// bytes.
fn scaling_curve(a: &RegimePlot) -> Vec<(f64, f64)> {
    let regime = a.regime();
    let mut v = vec![];
    for w in a.points.windows(2) {
        let (p, q) = (&w[0], &w[1]);
        let (l0, l1) = ((p.bytes.max(1) as f64).ln(), (q.bytes as f64).ln());
        for i in 0..STEPS {
            let b = (l0 + (l1 - l0) * i as f64 / STEPS as f64).exp();
            let t = (b - p.bytes as f64) / (q.bytes as f64 - p.bytes as f64);
            let d = p.d2h_ms + t * (q.d2h_ms - p.d2h_ms);
            v.push((b, regime.predicted_scaling(d)));
        }
    }
    if let Some(p) = a.points.last() {
        v.push((p.bytes as f64, p.predicted_scaling));
    }
    v
}

/// `(bytes, f(point))` for every point.
fn at_points(a: &RegimePlot, f: impl Fn(&RegimePoint) -> f64) -> Vec<(f64, f64)> {
    a.points.iter().map(|p| (p.bytes as f64, f(p))).collect()
}

/// Renders both panels of `a` as one SVG document.
pub fn render(a: &Analysis) -> String {
    render_plot(&RegimePlot::from(a))
}

/// Renders both panels of a stored plot as one SVG document.
pub fn render_plot(a: &RegimePlot) -> String {
    let n = f64::from(a.cores);
    let band = match (a.onset_bytes, a.crossover_bytes) {
        (Some(o), Some(c)) => vec![Band {
            from: o,
            to: c,
            label: match a.width_ratio {
                Some(r) => format!("transition band ({r:.2}x wide)"),
                None => "transition band".into(),
            },
        }],
        _ => vec![],
    };
    let mut sc = Chart::new(
        &format!(
            "{}-core scaling vs output size (compute {} ms)",
            a.cores, a.compute_ms
        ),
        "output bytes (log)",
        &format!("{}-core / 1-core throughput", a.cores),
    );
    sc.log_x = true;
    sc.y_range = Some((0.0, n.max(1.0) + 0.5));
    sc.bands = band.clone();
    sc.series.push(Series::line("model", scaling_curve(a)));
    sc.series.push(Series::dots(
        "model at each point",
        at_points(a, |p| p.predicted_scaling),
    ));
    let measured: Vec<_> = a
        .points
        .iter()
        .filter_map(|p| p.measured_scaling.map(|s| (p.bytes as f64, s)))
        .collect();
    if !measured.is_empty() {
        sc.series.push(Series::dots("measured", measured));
    }

    let mut d2h = Chart::new("D2H time vs output size", "output bytes (log)", "D2H ms");
    d2h.log_x = true;
    d2h.bands = band;
    let (lo, hi) = match (a.points.first(), a.points.last()) {
        (Some(p), Some(q)) => (p.bytes as f64, q.bytes as f64),
        _ => (1.0, 1.0),
    };
    d2h.series
        .push(Series::dots("D2H", at_points(a, |p| p.d2h_ms)));
    for f in &a.fits {
        let pts = (0..=STEPS * 4)
            .map(|i| {
                let b = (lo.ln() + (hi.ln() - lo.ln()) * i as f64 / (STEPS * 4) as f64).exp();
                (b, f.fixed_ms + b / f.bytes_per_ms)
            })
            .collect();
        d2h.series
            .push(Series::dashed(&format!("least squares ({})", f.over), pts));
    }
    for (name, level) in [
        (format!("c/N = {:.3} ms (onset)", a.onset_ms), a.onset_ms),
        (
            format!("c = {:.3} ms (crossover)", a.crossover_ms),
            a.crossover_ms,
        ),
    ] {
        d2h.series
            .push(Series::line(&name, vec![(lo, level), (hi, level)]));
    }
    render_panels(&[sc, d2h])
}

/// Counts of points per class, in the order compute-bound, transition,
/// D2H-bound (for captions and summaries).
pub fn class_counts(a: &Analysis) -> [usize; 3] {
    let mut c = [0; 3];
    for p in &a.points {
        c[match p.class {
            RegimeClass::ComputeBound => 0,
            RegimeClass::Transition => 1,
            RegimeClass::D2hBound => 2,
        }] += 1;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use qport_platform::regime::{analyze_sweep, Regime, SweepPoint};

    #[test]
    fn study_sweep_plot() {
        let pts: Vec<SweepPoint> = [
            (3_920, 0.141, 2.98),
            (256_368, 0.776, 1.99),
            (511_952, 1.367, 1.59),
            (1_000_384, 2.429, 1.21),
            (1_999_984, 8.892, 1.00),
        ]
        .into_iter()
        .map(|(b, d, s)| SweepPoint {
            scaling: Some(s),
            ..SweepPoint::new(b, d)
        })
        .collect();
        let a = analyze_sweep(&Regime::new(2.7, 3).unwrap(), &pts, 0.05).unwrap();
        let svg = render(&a);
        assert!(svg.contains("transition band (3.36x wide)"), "{svg}");
        // model dots + measured dots in panel 1, D2H dots in panel 2
        assert_eq!(svg.matches("<circle").count(), 15);
        assert!(svg.contains("least squares (all)"));
        assert!(svg.contains("least squares (below-crossover)"));
        assert_eq!(class_counts(&a), [1, 3, 1]);
        let curve = scaling_curve(&RegimePlot::from(&a));
        assert_eq!(curve.len(), 4 * STEPS + 1);
        assert!(curve.windows(2).all(|w| w[1].1 <= w[0].1 + 1e-12));
    }
}
