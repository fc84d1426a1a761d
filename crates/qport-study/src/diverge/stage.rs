//! The stages of a quantized operator's arithmetic, one per
//! [`ArithProfile`] policy field, and the attribution of a layer's
//! divergence to them: the layer is re-run under profile A with one of
//! profile B's policies swapped in at a time, and every swap that alone
//! reproduces a difference names its stage.

use super::compare::Diff;
use qport_core::arith::{wire, ArithProfile, ProfileError};
use serde::Serialize;

/// One stage of the integer arithmetic, tied to one policy field of
/// [`ArithProfile`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// How products are summed ([`ArithProfile::accumulator`]).
    Accumulation,
    /// How the accumulator is scaled ([`ArithProfile::requant`]).
    RequantizationScale,
    /// How scaled values are rounded ([`ArithProfile::rounding`]).
    Rounding,
    /// Where the bias enters ([`ArithProfile::bias`]).
    Bias,
    /// Precision of the float epilogue ([`ArithProfile::epilogue`]).
    Epilogue,
    /// How non-GEMM operators compute ([`ArithProfile::non_gemm`]).
    NonGemm,
    /// Which QDQ groups run as integer operators at all
    /// ([`ArithProfile::lowering`]): a group one profile runs in float and
    /// the other in integers.
    Lowering,
}

impl Stage {
    /// Every stage, in the order of the profile's fields.
    pub const ALL: [Stage; 7] = [
        Stage::Accumulation,
        Stage::RequantizationScale,
        Stage::Rounding,
        Stage::Bias,
        Stage::Epilogue,
        Stage::NonGemm,
        Stage::Lowering,
    ];

    /// The stage's name in sentences (`"requantization scale"`).
    pub fn label(self) -> &'static str {
        match self {
            Stage::Accumulation => "accumulation",
            Stage::RequantizationScale => "requantization scale",
            Stage::Rounding => "rounding",
            Stage::Bias => "bias",
            Stage::Epilogue => "epilogue",
            Stage::NonGemm => "non-GEMM arithmetic",
            Stage::Lowering => "lowering",
        }
    }

    /// The [`ArithProfile`] field (and profile-file key) behind the stage.
    pub fn field(self) -> &'static str {
        match self {
            Stage::Accumulation => "accumulator",
            Stage::RequantizationScale => "requant",
            Stage::Rounding => "rounding",
            Stage::Bias => "bias",
            Stage::Epilogue => "epilogue",
            Stage::NonGemm => "non_gemm",
            Stage::Lowering => "lowering",
        }
    }

    /// The wire name of `p`'s policy for this stage (`"q31-shift"`).
    pub fn policy(self, p: &ArithProfile) -> String {
        match self {
            Stage::Accumulation => wire(&p.accumulator),
            Stage::RequantizationScale => wire(&p.requant),
            Stage::Rounding => wire(&p.rounding),
            Stage::Bias => wire(&p.bias),
            Stage::Epilogue => wire(&p.epilogue),
            Stage::NonGemm => wire(&p.non_gemm),
            Stage::Lowering => wire(&p.lowering),
        }
    }

    /// True when `a` and `b` have different policies for this stage.
    pub fn differs(self, a: &ArithProfile, b: &ArithProfile) -> bool {
        match self {
            Stage::Accumulation => a.accumulator != b.accumulator,
            Stage::RequantizationScale => a.requant != b.requant,
            Stage::Rounding => a.rounding != b.rounding,
            Stage::Bias => a.bias != b.bias,
            Stage::Epilogue => a.epilogue != b.epilogue,
            Stage::NonGemm => a.non_gemm != b.non_gemm,
            Stage::Lowering => a.lowering != b.lowering,
        }
    }

    /// `a` with `b`'s policy for this stage (every other field, and the
    /// name, from `a`).
    pub fn swap(self, a: &ArithProfile, b: &ArithProfile) -> ArithProfile {
        let mut p = a.clone();
        match self {
            Stage::Accumulation => p.accumulator = b.accumulator,
            Stage::RequantizationScale => p.requant = b.requant,
            Stage::Rounding => p.rounding = b.rounding,
            Stage::Bias => p.bias = b.bias,
            Stage::Epilogue => p.epilogue = b.epilogue,
            Stage::NonGemm => p.non_gemm = b.non_gemm,
            Stage::Lowering => p.lowering = b.lowering,
        }
        p
    }

    /// The stages whose policies differ between `a` and `b`.
    pub fn differing(a: &ArithProfile, b: &ArithProfile) -> Vec<Stage> {
        Stage::ALL.into_iter().filter(|s| s.differs(a, b)).collect()
    }
}

/// `a` with `b`'s policy for `stage`, or why that mix is not a valid
/// profile (e.g. a float bias under an integer requantization).
pub(crate) fn swapped(
    stage: Stage,
    a: &ArithProfile,
    b: &ArithProfile,
) -> Result<ArithProfile, String> {
    let p = stage.swap(a, b);
    match p.validate("swap") {
        Ok(()) => Ok(p),
        Err(ProfileError::Invalid { message, .. }) => Err(message),
        Err(e) => Err(e.to_string()),
    }
}

/// One single-policy swap of a layer re-run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Swap {
    /// The stage swapped.
    pub stage: Stage,
    /// The profile field swapped.
    pub field: &'static str,
    /// Profile A's policy (wire name).
    pub a: String,
    /// Profile B's policy, swapped into A.
    pub b: String,
    /// The swapped run against A's output; `None` when skipped.
    pub vs_a: Option<Diff>,
    /// The swapped run against B's output; `None` when skipped.
    pub vs_b: Option<Diff>,
    /// Why the swap was not run: the mixed profile is not valid.
    pub skipped: Option<String>,
}

impl Swap {
    /// True when this swap alone makes the layer differ from A.
    pub fn reproduces(&self) -> bool {
        self.vs_a.is_some_and(|d| !d.is_identical())
    }
}

/// Which stage(s) explain a diverging layer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Attribution {
    /// Every swap tried (one per differing policy), in stage order.
    pub swaps: Vec<Swap>,
    /// The stages whose swap alone reproduces a difference, largest share
    /// of differing elements first.
    pub stages: Vec<Stage>,
    /// The stage whose swap reproduces the largest share (the first of
    /// `stages`); `None` when no single swap reproduces the divergence.
    pub primary: Option<Stage>,
    /// One phrase: the primary stage's label (`"rounding"`, with `"(also
    /// …)"` for further stages), or `"interaction of f1, f2"` naming the
    /// differing fields when no single swap reproduces it.
    pub verdict: String,
}

impl Attribution {
    /// Names the stages from the swaps tried (see [`Attribution`]).
    pub fn from_swaps(swaps: Vec<Swap>) -> Attribution {
        let mut hits: Vec<(Stage, f64)> = swaps
            .iter()
            .filter(|s| s.reproduces())
            .map(|s| (s.stage, s.vs_a.map_or(0.0, |d| d.share())))
            .collect();
        // Largest share first; the stable sort keeps stage order on ties.
        hits.sort_by(|x, y| y.1.total_cmp(&x.1));
        let stages: Vec<Stage> = hits.iter().map(|h| h.0).collect();
        let primary = stages.first().copied();
        let verdict = match stages.as_slice() {
            [] => {
                let fields: Vec<&str> = swaps.iter().map(|s| s.field).collect();
                format!("interaction of {}", fields.join(", "))
            }
            [one] => one.label().to_string(),
            [first, rest @ ..] => {
                let rest: Vec<&str> = rest.iter().map(|s| s.label()).collect();
                format!("{} (also {})", first.label(), rest.join(", "))
            }
        };
        Attribution {
            swaps,
            stages,
            primary,
            verdict,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn swap(stage: Stage, differing: usize) -> Swap {
        let d = Diff {
            elements: 100,
            differing,
            max_diff: differing.min(1) as f64,
        };
        Swap {
            stage,
            field: stage.field(),
            a: "x".into(),
            b: "y".into(),
            vs_a: Some(d),
            vs_b: Some(Diff::default()),
            skipped: None,
        }
    }

    #[test]
    fn primary_is_the_largest_share_and_ties_keep_stage_order() {
        let a = Attribution::from_swaps(vec![
            swap(Stage::RequantizationScale, 3),
            swap(Stage::Rounding, 10),
            swap(Stage::NonGemm, 0),
        ]);
        assert_eq!(a.primary, Some(Stage::Rounding));
        assert_eq!(a.stages, [Stage::Rounding, Stage::RequantizationScale]);
        assert_eq!(a.verdict, "rounding (also requantization scale)");
        let a = Attribution::from_swaps(vec![swap(Stage::Accumulation, 5), swap(Stage::Bias, 5)]);
        assert_eq!(a.stages, [Stage::Accumulation, Stage::Bias]);
    }

    #[test]
    fn no_single_swap_is_an_interaction_of_the_fields() {
        let mut skipped = swap(Stage::Bias, 0);
        skipped.vs_a = None;
        skipped.skipped = Some("not valid".into());
        let a = Attribution::from_swaps(vec![swap(Stage::Rounding, 0), skipped]);
        assert_eq!(a.primary, None);
        assert_eq!(a.verdict, "interaction of rounding, bias");
    }

    #[test]
    fn swaps_take_one_field_and_refuse_invalid_mixes() {
        let f32 = ArithProfile::preset("f32-rne").unwrap();
        let g = ArithProfile::preset("gemmlowp").unwrap();
        assert_eq!(
            Stage::differing(&g, &f32),
            [
                Stage::RequantizationScale,
                Stage::Rounding,
                Stage::NonGemm,
                Stage::Lowering
            ]
        );
        assert_eq!(Stage::Lowering.policy(&g), "all");
        let p = Stage::Rounding.swap(&f32, &g);
        assert_eq!(Stage::differing(&p, &f32), [Stage::Rounding]);
        assert_eq!(p.name, "f32-rne");
        // A float bias cannot go with an integer requantization.
        let fb = ArithProfile::preset("float-bias").unwrap();
        let e = swapped(Stage::RequantizationScale, &fb, &g).unwrap_err();
        assert!(e.contains("float-after-scale"), "{e}");
        assert!(swapped(Stage::Bias, &g, &fb).is_err());
        assert!(swapped(Stage::Rounding, &fb, &g).is_ok());
    }
}
