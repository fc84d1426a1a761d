//! The judgement of one output: the comparison of a dump reading with an
//! execution ([`Residual`]), the combinations tried ([`Candidate`]), and
//! the decision rules of the [module docs](super) ([`Diagnosis`],
//! [`Hypothesis`]).

use super::decode::{LayoutUsed, OutputQuant};
use super::refs::Execution;
use serde::Serialize;

/// A hypothesis' kind of cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cause {
    /// The dump is a padded runtime buffer.
    Layout,
    /// The dump holds the integer form (not dequantized), or float32
    /// where the platform's form is int32.
    OutputType,
    /// Another arithmetic profile.
    Arithmetic,
    /// The artifact's scales were not used: float, float16, or the
    /// target's own calibration.
    ScalesIgnored,
}

impl Cause {
    /// The name used in reports (`layout`, `output-type`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Cause::Layout => "layout",
            Cause::OutputType => "output-type",
            Cause::Arithmetic => "arithmetic",
            Cause::ScalesIgnored => "scales-ignored",
        }
    }
}

/// How a dump compares with one execution.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Residual {
    /// Elements compared.
    pub elements: usize,
    /// Elements differing by more than the tolerance (NaN and infinities
    /// in the dump included).
    pub mismatched: usize,
    /// NaN or infinite elements in the dump.
    pub non_finite: usize,
    /// Largest absolute difference (finite elements).
    pub max_abs: f64,
    /// Largest `|dump - qport| / |qport|` over elements where qport's value
    /// is not 0.
    pub max_rel: f64,
    /// Root mean square of the differences (finite elements).
    pub rms: f64,
    /// Cosine similarity.
    pub cosine: f64,
    /// Every element equal.
    pub bit_exact: bool,
}

impl Residual {
    pub(crate) fn measure(dump: &[f64], reference: &[f64], tol: f64) -> Residual {
        let mut r = Residual {
            elements: dump.len(),
            mismatched: 0,
            non_finite: 0,
            max_abs: 0.0,
            max_rel: 0.0,
            rms: 0.0,
            cosine: 0.0,
            bit_exact: true,
        };
        let (mut sq, mut n, mut dot, mut na, mut nb) = (0.0, 0usize, 0.0, 0.0, 0.0);
        for (&d, &q) in dump.iter().zip(reference) {
            if d != q {
                r.bit_exact = false;
            }
            if !d.is_finite() || !q.is_finite() {
                r.non_finite += usize::from(!d.is_finite());
                r.mismatched += 1;
                continue;
            }
            let e = (d - q).abs();
            if e > tol {
                r.mismatched += 1;
            }
            r.max_abs = r.max_abs.max(e);
            if q != 0.0 {
                r.max_rel = r.max_rel.max(e / q.abs());
            }
            sq += e * e;
            n += 1;
            dot += d * q;
            na += d * d;
            nb += q * q;
        }
        r.rms = if n == 0 { 0.0 } else { (sq / n as f64).sqrt() };
        r.cosine = qport_core::metrics::cosine_of_sums(dot, na, nb);
        r
    }

    /// Within the tolerance everywhere.
    pub fn reproduces(&self) -> bool {
        self.mismatched == 0
    }
}

/// One combination of reading, transform and execution, with its residual.
#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    /// The causes this combination stands for (empty: the dump as written
    /// against the declared execution).
    pub causes: Vec<Cause>,
    /// The padded layout the dump was unpacked with.
    pub layout: Option<LayoutUsed>,
    /// The dtype the values were read as.
    pub read_as: String,
    /// The dequantization applied to integer values.
    pub dequantized: Option<OutputQuant>,
    /// A float dump where the platform's form is int32.
    pub float_for_int32: bool,
    /// The execution compared with.
    pub execution: Execution,
    /// The comparison.
    pub residual: Residual,
}

impl Candidate {
    /// One line: `layout j6p (F32 [16, 1008]) + profile gemmlowp`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(l) = &self.layout {
            parts.push(format!(
                "padded per {} ({} aligned {:?})",
                l.platforms.join("/"),
                l.tensor_type,
                l.aligned_shape
            ));
        }
        if let Some(q) = &self.dequantized {
            let s = match q.scales.as_slice() {
                [s] => format!("scale {s:e}"),
                v => format!("{} scales", v.len()),
            };
            let z = match q.zero_points.as_slice() {
                [z] => format!("zero point {z}"),
                v => format!("{} zero points", v.len()),
            };
            parts.push(format!(
                "{} integers dequantized ({s}, {z}; {})",
                self.read_as, q.source
            ));
        }
        if self.float_for_int32 {
            parts.push("float32 where the platform's form is int32".into());
        }
        parts.push(self.execution.describe());
        parts.join(" + ")
    }
}

/// The outcome for one output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The dump as written is consistent with the declared execution.
    Consistent,
    /// A combination reproduces the dump (within the tolerance).
    Explained,
    /// None reproduces it; one is decisively closer than the rest.
    Closest,
    /// No hypothesis explains the dump.
    None,
}

/// The diagnosis of one output.
#[derive(Debug, Clone, Serialize)]
pub struct Diagnosis {
    /// The outcome.
    pub verdict: Verdict,
    /// Cause names of the best combination (`layout`, `output-type`,
    /// `arithmetic`, `scales-ignored`); empty when consistent or none.
    pub causes: Vec<&'static str>,
    /// The best combination (none for `none` and `consistent`).
    pub best: Option<Candidate>,
    /// Other combinations that reproduce the dump with as few causes, best
    /// first (a bit-exact `best` outranks those only within the tolerance;
    /// each says which it is in its residual).
    pub tied: Vec<Candidate>,
    /// The sentence for people.
    pub summary: String,
}

/// One hypothesis as tested: how many combinations stood for it and the
/// best of them.
#[derive(Debug, Clone, Serialize)]
pub struct Hypothesis {
    /// The cause.
    pub cause: Cause,
    /// Combinations involving this cause.
    pub tried: usize,
    /// The one with the smallest RMS residual among those with the fewest
    /// other causes.
    pub best: Option<Candidate>,
    /// Part of the diagnosis.
    pub decisive: bool,
}

/// Orders candidates: fewer causes, bit-exact first, smaller RMS.
pub(crate) fn rank(a: &Candidate, b: &Candidate) -> std::cmp::Ordering {
    a.causes
        .len()
        .cmp(&b.causes.len())
        .then(b.residual.bit_exact.cmp(&a.residual.bit_exact))
        .then(a.residual.rms.total_cmp(&b.residual.rms))
}

pub(crate) fn diagnose(cands: &[Candidate], base_rms: f64, digits: u32) -> Diagnosis {
    let mut repro: Vec<&Candidate> = cands.iter().filter(|c| c.residual.reproduces()).collect();
    repro.sort_by(|a, b| rank(a, b));
    if let Some(best) = repro.first() {
        let tied: Vec<Candidate> = repro[1..]
            .iter()
            .filter(|c| c.causes.len() == best.causes.len())
            .map(|c| (*c).clone())
            .collect();
        let how = if best.residual.bit_exact {
            "bit for bit".to_string()
        } else {
            format!(
                "within {digits} decimal digits (max |diff| {:.3e})",
                best.residual.max_abs
            )
        };
        let mut summary = format!("explained: {} reproduces the dump {how}", best.describe());
        let list = |exact: bool| {
            tied.iter()
                .filter(|c| c.residual.bit_exact == exact)
                .map(Candidate::describe)
                .collect::<Vec<_>>()
        };
        let (same, near) = (
            list(best.residual.bit_exact),
            if best.residual.bit_exact {
                list(false)
            } else {
                Vec::new()
            },
        );
        if !same.is_empty() {
            summary.push_str(&format!("; tied with {}", same.join("; ")));
        }
        if !near.is_empty() {
            summary.push_str(&format!(
                "; also within {digits} decimal digits, not bit for bit: {}",
                near.join("; ")
            ));
        }
        return Diagnosis {
            verdict: Verdict::Explained,
            causes: best.causes.iter().map(|c| c.name()).collect(),
            best: Some((*best).clone()),
            tied,
            summary,
        };
    }
    let mut by_rms: Vec<&Candidate> = cands.iter().collect();
    by_rms.sort_by(|a, b| a.residual.rms.total_cmp(&b.residual.rms));
    if let Some(best) = by_rms.first() {
        let rival = by_rms
            .iter()
            .find(|c| c.causes != best.causes)
            .map_or(f64::INFINITY, |c| c.residual.rms);
        let decisive = !best.causes.is_empty()
            && best.residual.rms <= 0.1 * base_rms
            && rival >= 2.0 * best.residual.rms;
        if decisive {
            return Diagnosis {
                verdict: Verdict::Closest,
                causes: best.causes.iter().map(|c| c.name()).collect(),
                best: Some((*best).clone()),
                tied: Vec::new(),
                summary: format!(
                    "closest, not reproduced: {} (RMS residual {:.3e}, {:.1}x below the declared execution's {:.3e}; the next other cause {:.3e})",
                    best.describe(),
                    best.residual.rms,
                    base_rms / best.residual.rms.max(f64::MIN_POSITIVE),
                    base_rms,
                    rival
                ),
            };
        }
    }
    Diagnosis {
        verdict: Verdict::None,
        causes: Vec::new(),
        best: None,
        tied: Vec::new(),
        summary: format!(
            "no hypothesis explains the dump: none reproduces it at {digits} decimal digits, and none is decisively closer than the declared execution (RMS {base_rms:.3e})"
        ),
    }
}

pub(crate) fn hypotheses(cands: &[Candidate], d: &Diagnosis) -> Vec<Hypothesis> {
    [
        Cause::Layout,
        Cause::OutputType,
        Cause::Arithmetic,
        Cause::ScalesIgnored,
    ]
    .into_iter()
    .map(|cause| {
        let mine: Vec<&Candidate> = cands.iter().filter(|c| c.causes.contains(&cause)).collect();
        let best = mine
            .iter()
            .min_by(|a, b| {
                a.causes
                    .len()
                    .cmp(&b.causes.len())
                    .then(a.residual.rms.total_cmp(&b.residual.rms))
            })
            .map(|c| (*c).clone());
        Hypothesis {
            cause,
            tried: mine.len(),
            best,
            decisive: d.causes.contains(&cause.name()),
        }
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn residual_counts_tolerance_and_non_finite() {
        let r = Residual::measure(&[1.0, 2.00002, f64::NAN], &[1.0, 2.0, 3.0], 1e-5);
        assert_eq!((r.mismatched, r.non_finite), (2, 1));
        assert!(!r.bit_exact && !r.reproduces());
        assert!((r.max_abs - 2e-5).abs() < 1e-9);
        let r = Residual::measure(&[1.0, 2.0], &[1.0, 2.0], 1e-5);
        assert!(r.bit_exact && r.reproduces() && (r.cosine - 1.0).abs() < 1e-12);
    }

    fn cand(causes: Vec<Cause>, profile: &str, dump: &[f64], reference: &[f64]) -> Candidate {
        Candidate {
            causes,
            layout: None,
            read_as: "float32".into(),
            dequantized: None,
            float_for_int32: false,
            execution: Execution::Profile {
                profile: profile.into(),
            },
            residual: Residual::measure(dump, reference, 1e-5),
        }
    }

    #[test]
    fn fewest_causes_win_and_equals_are_tied() {
        let d = [1.0, 2.0, 3.0];
        let cands = vec![
            cand(vec![], "exact", &d, &[1.0, 2.5, 3.0]),
            cand(vec![Cause::Arithmetic], "a", &d, &d),
            cand(vec![Cause::Arithmetic], "b", &d, &d),
            cand(vec![Cause::Arithmetic], "n", &d, &[1.0, 2.0, 3.000001]),
            cand(vec![Cause::Arithmetic, Cause::Layout], "c", &d, &d),
        ];
        let g = diagnose(&cands, cands[0].residual.rms, 5);
        assert_eq!(g.verdict, Verdict::Explained);
        assert_eq!(g.causes, ["arithmetic"]);
        let tied: Vec<String> = g.tied.iter().map(|c| c.execution.describe()).collect();
        assert_eq!(tied, ["profile b", "profile n"]);
        assert!(g.summary.contains("tied with profile b"), "{}", g.summary);
        assert!(
            g.summary.contains("not bit for bit: profile n"),
            "{}",
            g.summary
        );
        let h = hypotheses(&cands, &g);
        assert!(h[2].decisive && !h[0].decisive);
        assert_eq!(h[0].tried, 1);
        assert_eq!(h[2].tried, 4);
    }

    #[test]
    fn closest_needs_a_tenfold_gain_and_a_twofold_margin() {
        let d = [1.0, 2.0, 3.0, 4.0];
        let far = [2.0, 3.0, 4.0, 5.0];
        // 100x closer than declared, others far: closest
        let near = [1.01, 2.01, 3.01, 4.01];
        let cands = vec![
            cand(vec![], "exact", &d, &far),
            cand(vec![Cause::Arithmetic], "a", &d, &near),
            cand(vec![Cause::ScalesIgnored], "f", &d, &far),
        ];
        let g = diagnose(&cands, 1.0, 5);
        assert_eq!(g.verdict, Verdict::Closest);
        assert_eq!(g.causes, ["arithmetic"]);
        // another cause nearly as close: a near-tie is no claim
        let cands = vec![
            cand(vec![], "exact", &d, &far),
            cand(vec![Cause::Arithmetic], "a", &d, &near),
            cand(
                vec![Cause::ScalesIgnored],
                "f",
                &d,
                &[1.015, 2.015, 3.015, 4.015],
            ),
        ];
        assert_eq!(diagnose(&cands, 1.0, 5).verdict, Verdict::None);
        // only 2x closer than declared: no claim
        let half = [1.5, 2.5, 3.5, 4.5];
        let cands = vec![
            cand(vec![], "exact", &d, &far),
            cand(vec![Cause::Arithmetic], "a", &d, &half),
        ];
        let g = diagnose(&cands, 1.0, 5);
        assert_eq!(g.verdict, Verdict::None);
        assert!(g.best.is_none() && g.causes.is_empty());
    }
}
