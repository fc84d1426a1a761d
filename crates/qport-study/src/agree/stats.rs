//! The statistics of an agreement study: how two members' outputs of one
//! sample compare, aggregated over samples ([`PairStats`], built by
//! [`PairAcc`]: per output through `qport_core::compare`, and per sample
//! the top-1 agreement over every top-1 row of the compared outputs), the
//! FP32 logit margin ([`logit_margin`]) and the ROC-AUC of the margin as a
//! predictor of a top-1 flip ([`margin_auc`]).

use qport_core::compare::{OutputAcc, OutputSpec, OutputStats};
use qport_core::{metrics, Tensor};
use serde::{Deserialize, Serialize};

/// The FP32 logit margin of an output: its largest value minus its second
/// largest. NaN for an output with fewer than two elements.
///
/// ```
/// assert_eq!(qport_study::agree::logit_margin(&[1.0, 4.0, 3.5]), 0.5);
/// ```
pub fn logit_margin(out: &[f32]) -> f32 {
    match metrics::top_k(out, 2)[..] {
        [i, j] => out[i] - out[j],
        _ => f32::NAN,
    }
}

/// ROC-AUC of the margin as a predictor of a flip: the probability that a
/// flipped sample has a smaller margin than a non-flipped one, ties counting
/// one half. `None` when there are no flipped or no non-flipped samples
/// (samples with a NaN margin are left out). 1 means every flip happened at
/// a smaller margin than every non-flip; 0.5 is chance.
///
/// ```
/// use qport_study::agree::margin_auc;
/// let margins = [0.1, 0.2, 3.0, 4.0];
/// assert_eq!(margin_auc(&margins, &[true, false, false, false]), Some(1.0));
/// assert_eq!(margin_auc(&margins, &[false; 4]), None);
/// ```
pub fn margin_auc(margins: &[f32], flipped: &[bool]) -> Option<f64> {
    let mut neg: Vec<f32> = vec![];
    let mut pos: Vec<f32> = vec![];
    for (&m, &f) in margins.iter().zip(flipped) {
        if m.is_nan() {
            continue;
        }
        if f {
            pos.push(m);
        } else {
            neg.push(m);
        }
    }
    if pos.is_empty() || neg.is_empty() {
        return None;
    }
    neg.sort_by(f32::total_cmp);
    let mut score = 0f64;
    for &m in &pos {
        // non-flipped margins greater than m count 1, equal ones 1/2
        let below_or_eq = neg.partition_point(|&x| x <= m);
        let below = neg.partition_point(|&x| x < m);
        let greater = neg.len() - below_or_eq;
        score += greater as f64 + 0.5 * (below_or_eq - below) as f64;
    }
    Some(score / (pos.len() as f64 * neg.len() as f64))
}

/// One sample on which a pair's top-1 classes differ: the first output
/// and row (in output order, then row order) where they do.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Flip {
    /// Index of the sample in the study (0-based).
    pub index: usize,
    /// FP32 logit margin of the sample.
    pub margin: f32,
    /// The output.
    pub output: String,
    /// The row of that output (0 for a `[1, C]` output).
    pub row: usize,
    /// Top-1 class of the pair's first member.
    pub top1_a: usize,
    /// Top-1 class of the pair's second member.
    pub top1_b: usize,
}

/// How two members (profiles, or FP32 paths) agree over all samples.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairStats {
    /// First member (the reference of the per-output statistics).
    pub a: String,
    /// Second member (the same name as `a` for a profile against its own
    /// repeat run).
    pub b: String,
    /// Number of samples.
    pub n: usize,
    /// Samples on which every top-1 row of every compared output has the
    /// same class; `None` when no compared output has an arg-max axis.
    pub top1_agree: Option<usize>,
    /// Samples on which every compared (float) output is bit-identical.
    pub bit_identical: usize,
    /// Every chosen output compared on its own, in graph order.
    pub outputs: Vec<OutputStats>,
    /// The samples whose top-1 classes differ, in sample order.
    pub flips: Vec<Flip>,
    /// ROC-AUC of the FP32 margin as a predictor of this pair's flips
    /// ([`margin_auc`]); `None` without flips or without non-flips.
    pub margin_auc: Option<f64>,
}

impl PairStats {
    /// `top1_agree / n` (1 for no samples); `None` without top-1.
    pub fn top1_rate(&self) -> Option<f64> {
        self.top1_agree
            .map(|k| qport_quant::ptq::fraction(k, self.n, 1.0))
    }
}

/// One member's run of one sample, as a pair compares it: the chosen
/// outputs (in spec order) and their top-1 classes ([`top1_rows`]).
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    /// The chosen outputs, in spec order.
    pub outputs: &'a [Tensor],
    /// Per output, the top-1 class of each row (empty for an output
    /// without an arg-max axis or not compared on this sample).
    pub top1: &'a [Vec<usize>],
}

/// The top-1 class of every row of every output that has an arg-max axis
/// and is compared on this sample (`skip[k]` false: a float output that
/// does not pass an input through); an empty list for the others.
pub fn top1_rows(outputs: &[Tensor], specs: &[OutputSpec], skip: &[bool]) -> Vec<Vec<usize>> {
    outputs
        .iter()
        .zip(specs)
        .zip(skip)
        .map(|((t, spec), &skip)| match spec.argmax_axis {
            Some(axis) if !skip && t.dtype().is_float() => t
                .to_f32_vec()
                .map(|v| {
                    metrics::lanes(&v, t.shape(), axis)
                        .iter()
                        .map(|r| metrics::argmax(r).unwrap_or(0))
                        .collect()
                })
                .unwrap_or_default(),
            _ => vec![],
        })
        .collect()
}

/// The FP32 logit margin of a sample: the smallest [`logit_margin`] over
/// every top-1 row of every compared output (the `fp32` run's values); NaN
/// when there is no such row.
pub fn sample_margin(outputs: &[Tensor], specs: &[OutputSpec], skip: &[bool]) -> f32 {
    let mut m = f32::NAN;
    for ((t, spec), &skip) in outputs.iter().zip(specs).zip(skip) {
        let (Some(axis), false) = (spec.argmax_axis, skip) else {
            continue;
        };
        let Ok(v) = t.to_f32_vec() else { continue };
        for row in metrics::lanes(&v, t.shape(), axis) {
            // f32::min keeps the number when one side is NaN
            m = m.min(logit_margin(&row));
        }
    }
    m
}

/// Accumulates [`PairStats`] sample by sample, in sample order (so sums,
/// and therefore results, do not depend on how the work was scheduled).
/// Accumulators of consecutive runs of samples combine exactly
/// ([`PairAcc::merge`]), and serialise (serde) so that a sharded study can
/// carry them between processes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PairAcc {
    a: String,
    b: String,
    n: usize,
    top1_agree: Option<usize>,
    bit_identical: usize,
    #[serde(with = "exact_flips")]
    flips: Vec<Flip>,
    outputs: Vec<OutputAcc>,
    reference_b: bool,
}

/// [`Flip`]s in JSON with their margins written exactly
/// ([`qport_core::exact::f32_json`]).
mod exact_flips {
    use super::Flip;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    struct F {
        index: usize,
        #[serde(with = "qport_core::exact::f32_json")]
        margin: f32,
        output: String,
        row: usize,
        top1_a: usize,
        top1_b: usize,
    }

    pub fn serialize<S: Serializer>(v: &[Flip], s: S) -> Result<S::Ok, S::Error> {
        let f: Vec<F> = v
            .iter()
            .map(|f| F {
                index: f.index,
                margin: f.margin,
                output: f.output.clone(),
                row: f.row,
                top1_a: f.top1_a,
                top1_b: f.top1_b,
            })
            .collect();
        f.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Flip>, D::Error> {
        let f: Vec<F> = Vec::deserialize(d)?;
        Ok(f.into_iter()
            .map(|f| Flip {
                index: f.index,
                margin: f.margin,
                output: f.output,
                row: f.row,
                top1_a: f.top1_a,
                top1_b: f.top1_b,
            })
            .collect())
    }
}

impl PairAcc {
    /// An empty accumulator for members `a` and `b` comparing the outputs
    /// `specs` describe.
    pub fn new(a: &str, b: &str, specs: &[OutputSpec]) -> PairAcc {
        PairAcc {
            a: a.to_string(),
            b: b.to_string(),
            n: 0,
            top1_agree: specs.iter().any(|s| s.argmax_axis.is_some()).then_some(0),
            bit_identical: 0,
            flips: vec![],
            outputs: specs.iter().cloned().map(OutputAcc::new).collect(),
            reference_b: false,
        }
    }

    /// Folds in `next`, the accumulator of the same pair over the samples
    /// that follow this one's (with their study-wide indices): afterwards
    /// `self` is bit-identical to one accumulator that saw every sample.
    /// Fails when `next` is another pair or compares other outputs.
    pub fn merge(&mut self, next: &PairAcc) -> Result<(), String> {
        if (&self.a, &self.b, self.reference_b) != (&next.a, &next.b, next.reference_b)
            || self.outputs.len() != next.outputs.len()
            || self.top1_agree.is_some() != next.top1_agree.is_some()
        {
            return Err(format!(
                "cannot merge the statistics of {} vs {} with those of {} vs {}",
                self.a, self.b, next.a, next.b
            ));
        }
        for (x, y) in self.outputs.iter_mut().zip(&next.outputs) {
            x.merge(y)
                .map_err(|e| format!("{} vs {}: {e}", self.a, self.b))?;
        }
        self.n += next.n;
        self.bit_identical += next.bit_identical;
        if let (Some(x), Some(y)) = (&mut self.top1_agree, next.top1_agree) {
            *x += y;
        }
        self.flips.extend(next.flips.iter().cloned());
        Ok(())
    }

    /// Samples added so far.
    pub fn samples(&self) -> usize {
        self.n
    }

    /// Takes member `b` as the reference of the per-output statistics
    /// (SQNR is relative to the reference's signal; by default `a`).
    pub fn with_reference_b(mut self) -> PairAcc {
        self.reference_b = true;
        self
    }

    /// Adds the next sample (index `index`, FP32 margin `margin`, model
    /// inputs `inputs`): member `a`'s run and member `b`'s. Fails when the
    /// runs disagree on an output's type or shape.
    pub fn add(
        &mut self,
        index: usize,
        margin: f32,
        a: Run,
        b: Run,
        inputs: &[(String, Tensor)],
    ) -> Result<(), String> {
        let s = self;
        s.n += 1;
        let mut identical = true;
        let (r, t) = if s.reference_b { (b, a) } else { (a, b) };
        for ((acc, x), y) in s.outputs.iter_mut().zip(r.outputs).zip(t.outputs) {
            if let Some(d) = acc.add(x, y, inputs)? {
                identical &= d.bit_identical;
            }
        }
        s.bit_identical += usize::from(identical);
        if let Some(agree) = &mut s.top1_agree {
            let first = a
                .top1
                .iter()
                .zip(b.top1)
                .enumerate()
                .find_map(|(k, (ra, rb))| {
                    ra.iter()
                        .zip(rb)
                        .position(|(p, q)| p != q)
                        .map(|row| (k, row, ra[row], rb[row]))
                });
            match first {
                None => *agree += 1,
                Some((k, row, top1_a, top1_b)) => s.flips.push(Flip {
                    index,
                    margin,
                    output: s.outputs[k].spec().name.clone(),
                    row,
                    top1_a,
                    top1_b,
                }),
            }
        }
        Ok(())
    }

    /// The statistics; `margins` holds every sample's FP32 margin, by
    /// index, for the ROC-AUC.
    pub fn finish(self, margins: &[f32]) -> PairStats {
        let mut s = PairStats {
            a: self.a,
            b: self.b,
            n: self.n,
            top1_agree: self.top1_agree,
            bit_identical: self.bit_identical,
            outputs: self.outputs.into_iter().map(OutputAcc::finish).collect(),
            flips: self.flips,
            margin_auc: None,
        };
        let mut flipped = vec![false; margins.len()];
        for f in &s.flips {
            if let Some(x) = flipped.get_mut(f.index) {
                *x = true;
            }
        }
        s.margin_auc = margin_auc(margins, &flipped);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auc_on_hand_made_cases() {
        let m = [0.1, 0.5, 1.0, 2.0, 3.0];
        let cases = [
            // perfect: the two flips have the two smallest margins
            ([true, true, false, false, false], 1.0),
            // inverted: flips at the largest margins
            ([false, false, false, true, true], 0.0),
            // one flip at 1.0 against 0.1, 0.5 (below) and 2.0, 3.0 (above)
            ([false, false, true, false, false], 0.5),
            // flips at 0.5 and 2.0 against 0.1, 1.0, 3.0: (2 + 1) / 6
            ([false, true, false, true, false], 0.5),
        ];
        for (flips, auc) in cases {
            assert_eq!(margin_auc(&m, &flips), Some(auc), "{flips:?}");
        }
        // ties count one half
        assert_eq!(margin_auc(&[1.0, 1.0], &[true, false]), Some(0.5));
        assert_eq!(
            margin_auc(&[1.0, 1.0, 2.0], &[true, false, false]),
            Some(0.75)
        );
        // no flips, or nothing but flips
        assert_eq!(margin_auc(&m, &[false; 5]), None);
        assert_eq!(margin_auc(&m, &[true; 5]), None);
        assert_eq!(margin_auc(&[], &[]), None);
        // NaN margins are left out
        assert_eq!(
            margin_auc(&[f32::NAN, 0.1, 1.0], &[false, true, false]),
            Some(1.0)
        );
        assert_eq!(margin_auc(&[f32::NAN, 1.0], &[true, false]), None);
    }

    #[test]
    fn auc_matches_the_quadratic_definition() {
        // a deterministic pseudo-random case with many ties
        let mut x = 12345u32;
        let mut next = || {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            x >> 16
        };
        let m: Vec<f32> = (0..300).map(|_| (next() % 17) as f32 * 0.25).collect();
        let f: Vec<bool> = (0..300).map(|_| next() % 5 == 0).collect();
        let mut s = 0.0;
        let (mut np, mut nn) = (0.0, 0.0);
        for (i, &fi) in f.iter().enumerate() {
            if !fi {
                continue;
            }
            np += 1.0;
            for (j, &fj) in f.iter().enumerate() {
                if !fj {
                    s += match m[i].partial_cmp(&m[j]).unwrap() {
                        std::cmp::Ordering::Less => 1.0,
                        std::cmp::Ordering::Equal => 0.5,
                        std::cmp::Ordering::Greater => 0.0,
                    };
                }
            }
        }
        for &fj in &f {
            nn += f64::from(u8::from(!fj));
        }
        let want = s / (np * nn);
        let got = margin_auc(&m, &f).unwrap();
        assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    }

    #[test]
    fn margins() {
        assert_eq!(logit_margin(&[1.0, 4.0, 3.5]), 0.5);
        assert_eq!(logit_margin(&[2.0, 2.0]), 0.0);
        assert!(logit_margin(&[1.0]).is_nan());
        // two rows: the smaller margin; outputs without an axis are skipped
        let t = Tensor::from_vec(vec![2, 3], vec![0.0f32, 3.0, 1.0, 5.0, 4.5, 0.0]).unwrap();
        let boxes = Tensor::from_vec(vec![1, 2, 2], vec![0.0f32; 4]).unwrap();
        let specs = [
            OutputSpec::new("s", &[2, 3]),
            OutputSpec::new("b", &[1, 2, 2]),
        ];
        let outs = [t.clone(), boxes];
        assert_eq!(sample_margin(&outs, &specs, &[false, false]), 0.5);
        assert!(sample_margin(&outs, &specs, &[true, false]).is_nan());
        assert_eq!(
            top1_rows(&outs, &specs, &[false, false]),
            vec![vec![1, 0], vec![]]
        );
    }

    fn run<'a>(outputs: &'a [Tensor], top1: &'a [Vec<usize>]) -> Run<'a> {
        Run { outputs, top1 }
    }

    #[test]
    fn pairs_accumulate_per_output_and_per_sample() {
        let specs = [
            OutputSpec::new("logits", &[1, 3]),
            OutputSpec::new("boxes", &[1, 2, 2]),
        ];
        let t = |shape: &[usize], v: &[f32]| Tensor::from_vec(shape.to_vec(), v.to_vec()).unwrap();
        let a = [
            t(&[1, 3], &[1.0, 2.0, 3.0]),
            t(&[1, 2, 2], &[1.0, 2.0, 3.0, 4.0]),
        ];
        let b = [
            t(&[1, 3], &[1.0, 3.5, 3.0]),
            t(&[1, 2, 2], &[1.0, 2.0, 3.0, 4.0]),
        ];
        let c = [
            t(&[1, 3], &[1.0, 2.0, 3.0]),
            t(&[1, 2, 2], &[1.0, 2.0, 3.0, 4.5]),
        ];
        let no = [false, false];
        let (ta, tb, tc) = (
            top1_rows(&a, &specs, &no),
            top1_rows(&b, &specs, &no),
            top1_rows(&c, &specs, &no),
        );
        let mut acc = PairAcc::new("x", "y", &specs);
        acc.add(0, 2.0, run(&a, &ta), run(&a, &ta), &[]).unwrap();
        acc.add(1, 0.5, run(&a, &ta), run(&b, &tb), &[]).unwrap();
        acc.add(2, 1.0, run(&a, &ta), run(&c, &tc), &[]).unwrap();
        let s = acc.finish(&[2.0, 0.5, 1.0]);
        assert_eq!((s.n, s.top1_agree, s.bit_identical), (3, Some(2), 1));
        assert_eq!(s.top1_rate(), Some(2.0 / 3.0));
        assert_eq!(
            s.flips,
            vec![Flip {
                index: 1,
                margin: 0.5,
                output: "logits".into(),
                row: 0,
                top1_a: 2,
                top1_b: 1
            }]
        );
        // the flip has the smallest margin
        assert_eq!(s.margin_auc, Some(1.0));
        // per output: logits differ on sample 1 only, boxes on sample 2 only
        let (l, bx) = (&s.outputs[0], &s.outputs[1]);
        assert_eq!((l.name.as_str(), l.bit_identical), ("logits", 2));
        assert_eq!(l.top1.unwrap().agree, 2);
        assert_eq!(l.max_abs_diff, Some(1.5));
        assert_eq!((bx.bit_identical, bx.top1), (2, None));
        assert_eq!(bx.max_abs_diff, Some(0.5));

        // no output with an axis: no top-1 at all
        let specs = [OutputSpec::new("boxes", &[1, 2, 2])];
        let mut acc = PairAcc::new("x", "y", &specs);
        acc.add(
            0,
            f32::NAN,
            run(&a[1..], &[vec![]]),
            run(&c[1..], &[vec![]]),
            &[],
        )
        .unwrap();
        let s = acc.finish(&[f32::NAN]);
        assert_eq!(
            (s.top1_agree, s.top1_rate(), s.bit_identical),
            (None, None, 0)
        );
        assert!(s.flips.is_empty());
    }
}
