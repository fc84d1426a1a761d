//! The statistics of an agreement study: how two outputs of one sample
//! compare ([`compare`]), their aggregation over samples ([`PairStats`],
//! built by [`PairAcc`]), the FP32 logit margin ([`logit_margin`]) and the
//! ROC-AUC of the margin as a predictor of a top-1 flip ([`margin_auc`]).

use qport_core::metrics;
use serde::Serialize;

/// How two outputs of the same sample compare.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Compared {
    /// Top-1 class of the first output (first index on ties).
    pub top1_a: usize,
    /// Top-1 class of the second output.
    pub top1_b: usize,
    /// Same length and every element has the same bits.
    pub bit_identical: bool,
    /// Cosine similarity (f64; exactly 1 for bit-identical outputs and for
    /// two zero vectors).
    pub cosine: f64,
    /// Largest absolute element-wise difference (NaN when one side has NaN
    /// where the other does not).
    pub max_abs_diff: f32,
    /// Top-5 overlap: `|top5(a) ∩ top5(b)| / k` with `k = min(5, len)`.
    pub top5_overlap: f64,
}

/// Top-`k` overlap of two outputs, `k = min(5, len)`: the share of the five
/// largest classes of `a` that are also among the five largest of `b` (ties
/// broken by lower index). 1 for empty outputs.
///
/// ```
/// use qport_study::agree::top5_overlap;
/// let a = [9.0, 8.0, 7.0, 6.0, 5.0, 0.0];
/// let b = [9.0, 8.0, 7.0, 6.0, 0.0, 5.0];
/// assert_eq!(top5_overlap(&a, &b), 0.8);
/// ```
pub fn top5_overlap(a: &[f32], b: &[f32]) -> f64 {
    let k = 5.min(a.len()).min(b.len());
    if k == 0 {
        return 1.0;
    }
    let ta = metrics::top_k(a, k);
    let tb = metrics::top_k(b, k);
    let common = ta.iter().filter(|i| tb.contains(i)).count();
    common as f64 / k as f64
}

/// Compares two outputs of one sample.
pub fn compare(a: &[f32], b: &[f32]) -> Compared {
    let bit_identical =
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
    Compared {
        top1_a: metrics::argmax(a).unwrap_or(0),
        top1_b: metrics::argmax(b).unwrap_or(0),
        bit_identical,
        // exactly 1 for identical outputs (the f64 sum may round below)
        cosine: if bit_identical && !a.is_empty() {
            1.0
        } else {
            metrics::cosine(a, b)
        },
        max_abs_diff: metrics::max_abs_diff(a, b),
        top5_overlap: top5_overlap(a, b),
    }
}

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

/// One sample on which a pair's top-1 classes differ.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Flip {
    /// Index of the sample in the study (0-based).
    pub index: usize,
    /// FP32 logit margin of the sample.
    pub margin: f32,
    /// Top-1 class of the pair's first member.
    pub top1_a: usize,
    /// Top-1 class of the pair's second member.
    pub top1_b: usize,
}

/// How two members (profiles, or FP32 paths) agree over all samples.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairStats {
    /// First member.
    pub a: String,
    /// Second member (the same name as `a` for a profile against its own
    /// repeat run).
    pub b: String,
    /// Number of samples.
    pub n: usize,
    /// Samples with the same top-1 class.
    pub top1_agree: usize,
    /// Samples whose outputs are bit-identical.
    pub bit_identical: usize,
    /// Mean cosine similarity of the outputs.
    pub cosine_mean: f64,
    /// Smallest cosine similarity.
    pub cosine_min: f64,
    /// Largest absolute difference over every sample and element.
    pub max_abs_diff: f32,
    /// Mean top-5 overlap ([`top5_overlap`]).
    pub top5_overlap: f64,
    /// The samples whose top-1 classes differ, in sample order.
    pub flips: Vec<Flip>,
    /// ROC-AUC of the FP32 margin as a predictor of this pair's flips
    /// ([`margin_auc`]); `None` without flips or without non-flips.
    pub margin_auc: Option<f64>,
}

impl PairStats {
    /// `top1_agree / n` (1 for no samples).
    pub fn top1_rate(&self) -> f64 {
        qport_quant::ptq::fraction(self.top1_agree, self.n, 1.0)
    }
}

/// Accumulates [`PairStats`] sample by sample, in sample order (so sums,
/// and therefore results, do not depend on how the work was scheduled).
#[derive(Debug, Clone)]
pub struct PairAcc {
    stats: PairStats,
    cosine_sum: f64,
    top5_sum: f64,
}

impl PairAcc {
    /// An empty accumulator for members `a` and `b`.
    pub fn new(a: &str, b: &str) -> PairAcc {
        PairAcc {
            stats: PairStats {
                a: a.to_string(),
                b: b.to_string(),
                n: 0,
                top1_agree: 0,
                bit_identical: 0,
                cosine_mean: 1.0,
                cosine_min: 1.0,
                max_abs_diff: 0.0,
                top5_overlap: 1.0,
                flips: vec![],
                margin_auc: None,
            },
            cosine_sum: 0.0,
            top5_sum: 0.0,
        }
    }

    /// Adds the next sample (index `index`, FP32 margin `margin`).
    pub fn add(&mut self, index: usize, margin: f32, c: &Compared) {
        let s = &mut self.stats;
        s.n += 1;
        if c.top1_a == c.top1_b {
            s.top1_agree += 1;
        } else {
            s.flips.push(Flip {
                index,
                margin,
                top1_a: c.top1_a,
                top1_b: c.top1_b,
            });
        }
        s.bit_identical += usize::from(c.bit_identical);
        self.cosine_sum += c.cosine;
        self.top5_sum += c.top5_overlap;
        s.cosine_min = if s.n == 1 {
            c.cosine
        } else {
            s.cosine_min.min(c.cosine)
        };
        if c.max_abs_diff.is_nan() || s.max_abs_diff.is_nan() {
            s.max_abs_diff = f32::NAN;
        } else {
            s.max_abs_diff = s.max_abs_diff.max(c.max_abs_diff);
        }
    }

    /// The statistics; `margins` holds every sample's FP32 margin, by
    /// index, for the ROC-AUC.
    pub fn finish(self, margins: &[f32]) -> PairStats {
        let mut s = self.stats;
        if s.n > 0 {
            s.cosine_mean = self.cosine_sum / s.n as f64;
            s.top5_overlap = self.top5_sum / s.n as f64;
        }
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
    fn top5_overlap_and_margin() {
        let a = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        assert_eq!(top5_overlap(&a, &a), 1.0);
        let mut b = a;
        b.reverse(); // top-5 of b: 0..=4, of a: 2..=6 -> 2, 3, 4 shared
        assert_eq!(top5_overlap(&a, &b), 0.6);
        // fewer than five classes: k = len
        assert_eq!(top5_overlap(&[1.0, 2.0], &[2.0, 1.0]), 1.0);
        assert_eq!(top5_overlap(&[], &[]), 1.0);
        assert_eq!(logit_margin(&[1.0, 4.0, 3.5]), 0.5);
        assert_eq!(logit_margin(&[2.0, 2.0]), 0.0);
        assert!(logit_margin(&[1.0]).is_nan());
    }

    #[test]
    fn compare_and_accumulate() {
        let a = [1.0f32, 2.0, 3.0];
        let c = compare(&a, &a);
        assert!(c.bit_identical && c.top1_a == 2 && c.top1_b == 2);
        assert_eq!((c.cosine, c.max_abs_diff, c.top5_overlap), (1.0, 0.0, 1.0));
        // -0.0 and 0.0 are equal but not bit-identical
        assert!(!compare(&[0.0], &[-0.0]).bit_identical);
        let b = [1.0f32, 3.5, 3.0];
        let d = compare(&a, &b);
        assert!(!d.bit_identical);
        assert_eq!((d.top1_a, d.top1_b, d.max_abs_diff), (2, 1, 1.5));

        let mut acc = PairAcc::new("x", "y");
        acc.add(0, 2.0, &c);
        acc.add(1, 0.5, &d);
        acc.add(2, 1.0, &c);
        let s = acc.finish(&[2.0, 0.5, 1.0]);
        assert_eq!((s.n, s.top1_agree, s.bit_identical), (3, 2, 2));
        assert_eq!(s.top1_rate(), 2.0 / 3.0);
        assert_eq!(s.max_abs_diff, 1.5);
        assert_eq!(s.cosine_min, d.cosine);
        assert!((s.cosine_mean - (2.0 + d.cosine) / 3.0).abs() < 1e-15);
        assert_eq!(
            s.flips,
            vec![Flip {
                index: 1,
                margin: 0.5,
                top1_a: 2,
                top1_b: 1
            }]
        );
        // the flip has the smallest margin
        assert_eq!(s.margin_auc, Some(1.0));

        // NaN differences stick
        let mut acc = PairAcc::new("x", "y");
        acc.add(0, 1.0, &compare(&[f32::NAN], &[1.0]));
        acc.add(1, 1.0, &c);
        assert!(acc.finish(&[1.0, 1.0]).max_abs_diff.is_nan());
    }
}
