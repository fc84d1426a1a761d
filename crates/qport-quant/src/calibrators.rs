//! Every calibrator on one model, one platform and the same data: the
//! study's calibrator comparison (its Table 7) as one measurement.
//!
//! One [`Calibration`](crate::ptq::Calibration) pass observes what every
//! calibrator needs (minima and maxima, their moving averages, value
//! histograms), so the rows differ only in how ranges are computed from the
//! same statistics: each (calibrator, asymmetric) pair is narrowed from the
//! base config ([`ptq::narrow`]), exported with the shared statistics and
//! scored against FP32 on the scorer's samples ([`Scorer::score`]).
//!
//! ```no_run
//! # fn demo(scorer: &qport_quant::measure::Scorer<'_>) -> Result<(), qport_quant::QuantError> {
//! use qport_quant::calibrators::{compare, Options};
//! let table = compare(scorer, &Options::default(), &mut |_, _| {})?;
//! for row in &table.rows {
//!     println!("{} asym={} cosine {:.4}", row.method.name(), row.asymmetric, row.score.cosine);
//! }
//! # Ok(()) }
//! ```

use crate::measure::{Metric, Score, Scorer};
use crate::ptq;
use crate::types::CalibMethod;
use crate::QuantError;
use serde::Serialize;
use std::time::Instant;

/// What to compare.
#[derive(Debug, Clone)]
pub struct Options {
    /// Calibrators, in table order.
    pub methods: Vec<CalibMethod>,
    /// Asymmetric settings tried for each.
    pub asymmetric: Vec<bool>,
    /// The metric the best row is chosen by.
    pub metric: Metric,
}

impl Default for Options {
    /// The five data calibrators, symmetric and asymmetric, ranked by cosine.
    fn default() -> Self {
        Options {
            methods: CalibMethod::CALIBRATORS.to_vec(),
            asymmetric: vec![false, true],
            metric: Metric::Cosine,
        }
    }
}

/// One calibrator's result.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The calibrator.
    pub method: CalibMethod,
    /// Asymmetric activation ranges.
    pub asymmetric: bool,
    /// Against FP32 on the scorer's samples.
    pub score: Score,
    /// Seconds to export and score this row (timing: varies run to run).
    pub seconds: f64,
}

/// Every row, and the best one.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// The metric `best` is chosen by.
    pub metric: Metric,
    /// Samples scored on.
    pub samples: usize,
    /// One row per (calibrator, asymmetric), in option order.
    pub rows: Vec<Row>,
    /// Index of the best row by `metric` (the first of equals).
    pub best: usize,
}

/// Scores every (calibrator, asymmetric) pair of `opts` with the scorer's
/// statistics and samples; `progress(0, total)` before the first row and
/// `progress(done, total)` after each (`total`: one row per pair).
pub fn compare(
    scorer: &Scorer<'_>,
    opts: &Options,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Comparison, QuantError> {
    scorer.check_metric(opts.metric)?;
    let combos: Vec<(CalibMethod, bool)> = opts
        .methods
        .iter()
        .flat_map(|&m| opts.asymmetric.iter().map(move |&a| (m, a)))
        .collect();
    if combos.is_empty() {
        return Err(QuantError::Outputs("no calibrator to compare".into()));
    }
    progress(0, combos.len());
    let mut rows = Vec::with_capacity(combos.len());
    for (i, &(method, asymmetric)) in combos.iter().enumerate() {
        let t = Instant::now();
        let s = scorer.with_base(ptq::narrow(scorer.base(), method, asymmetric));
        let score = s.score(&s.base_precisions())?;
        rows.push(Row {
            method,
            asymmetric,
            score,
            seconds: t.elapsed().as_secs_f64(),
        });
        progress(i + 1, combos.len());
    }
    let m = opts.metric;
    let best = (0..rows.len())
        .min_by(|&a, &b| {
            m.loss(&rows[a].score)
                .total_cmp(&m.loss(&rows[b].score))
                .then(a.cmp(&b))
        })
        .unwrap_or(0);
    Ok(Comparison {
        metric: m,
        samples: scorer.samples(),
        rows,
        best,
    })
}
