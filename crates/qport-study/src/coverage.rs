//! Integer coverage as reported by every study: how much of a quantized
//! model ran in integers under a profile ([`qport_engine::Coverage`] of one
//! run), so that agreement measured on a model that ran mostly in float is
//! never mistaken for a portability result. Which groups run in integers
//! depends on the profile's lowering rule set
//! ([`qport_core::arith::Lowering`]) and on nothing else, so a study of
//! several profiles measures once per rule set ([`CoverageJson::measure_each`])
//! and reports one coverage per profile. A profile that lowers nothing
//! (`none`) runs the artifact in float by definition: it is reported as
//! unfused float execution, never warned about, and left out of coverage
//! thresholds.

use qport_core::arith::{wire, Lowering};
use serde::{Deserialize, Serialize};

/// Below this share of MACs in integers a study warns that it says little
/// about integer arithmetic.
pub const LOW_MAC_SHARE: f64 = 0.5;

/// How much of a model ran in integers under a profile (from
/// [`qport_engine::Coverage`] of one run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoverageJson {
    /// The profile it was measured under.
    pub profile: String,
    /// The profile's lowering rule set (`onnxruntime`, `all`, `none`).
    pub lowering: String,
    /// Quantized groups found.
    pub groups_found: usize,
    /// Groups lowered to integer operators.
    pub groups_lowered: usize,
    /// `groups_lowered / groups_found`.
    pub group_share: Option<f64>,
    /// Lowered groups per integer operator.
    pub lowered_by_op: std::collections::BTreeMap<String, usize>,
    /// Multiply-accumulates of Conv / MatMul / Gemm run in integers.
    pub macs_integer: u64,
    /// Multiply-accumulates of all Conv / MatMul / Gemm.
    pub macs_total: u64,
    /// `macs_integer / macs_total`.
    pub mac_share: Option<f64>,
    /// Multiply-accumulate nodes whose shapes the run did not report.
    pub macs_uncounted_nodes: usize,
    /// Groups left in float, each with the reason.
    pub float_groups: Vec<FloatGroupJson>,
}

/// A quantized group left in float.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FloatGroupJson {
    /// The operator node's name.
    pub node: String,
    /// Its op type.
    pub op: String,
    /// Why it was not lowered.
    pub reason: String,
}

impl CoverageJson {
    /// The JSON form of `c`.
    pub fn new(c: &qport_engine::Coverage) -> CoverageJson {
        let m = c.macs.unwrap_or_default();
        CoverageJson {
            profile: c.profile.clone(),
            lowering: wire(&c.lowering),
            groups_found: c.groups_found,
            groups_lowered: c.groups_lowered,
            group_share: c.group_share(),
            lowered_by_op: c.lowered_by_op.clone(),
            macs_integer: m.integer,
            macs_total: m.total,
            mac_share: m.share(),
            macs_uncounted_nodes: m.uncounted,
            float_groups: c
                .float
                .iter()
                .map(|g| FloatGroupJson {
                    node: g.node.clone(),
                    op: g.op.clone(),
                    reason: g.reason.clone(),
                })
                .collect(),
        }
    }

    /// Runs `plan` once on `inputs` and measures what ran in integers
    /// under its profile ([`qport_engine::IntegerPlan::run_with_coverage`]).
    pub fn measure(
        plan: &qport_engine::IntegerPlan,
        inputs: Vec<(String, qport_core::Tensor)>,
    ) -> Result<CoverageJson, qport_engine::EngineError> {
        let (_, c) = plan.run_with_coverage(inputs)?;
        Ok(CoverageJson::new(&c))
    }

    /// The coverage under each of `plans`' profiles, in order, on
    /// `inputs`: one run per lowering rule set (plans with the same rule
    /// set lower the same groups, so they share the measurement).
    pub fn measure_each(
        plans: &[&qport_engine::IntegerPlan],
        inputs: &[(String, qport_core::Tensor)],
    ) -> Result<Vec<CoverageJson>, qport_engine::EngineError> {
        let mut measured: Vec<(Lowering, CoverageJson)> = vec![];
        let mut out = Vec::with_capacity(plans.len());
        for plan in plans {
            let profile = plan.profile();
            let mut c = match measured.iter().find(|(l, _)| *l == profile.lowering) {
                Some((_, c)) => c.clone(),
                None => {
                    let c = CoverageJson::measure(plan, inputs.to_vec())?;
                    measured.push((profile.lowering, c.clone()));
                    c
                }
            };
            c.profile = profile.name.clone();
            out.push(c);
        }
        Ok(out)
    }

    /// True for a profile that lowers nothing (lowering `none`): the
    /// artifact ran in float as written, by definition.
    pub fn is_float_execution(&self) -> bool {
        self.lowering == wire(&Lowering::None)
    }

    /// True when a share of MACs is known and below `min`.
    pub fn mac_share_below(&self, min: f64) -> bool {
        self.mac_share.is_some_and(|v| v < min)
    }

    /// The warning a study gives when under [`LOW_MAC_SHARE`] of the MACs
    /// ran in integers (never for unfused float execution).
    pub fn low_coverage_warning(&self) -> Option<String> {
        low_coverage_warnings(std::slice::from_ref(self)).pop()
    }
}

/// The low-coverage warnings of a study of several profiles: one per
/// lowering rule set under which less than [`LOW_MAC_SHARE`] of the MACs
/// ran in integers, naming its profiles; none for profiles that lower
/// nothing (unfused float execution is not a portability result to warn
/// about).
pub fn low_coverage_warnings(coverages: &[CoverageJson]) -> Vec<String> {
    let mut groups: Vec<(&CoverageJson, Vec<&str>)> = vec![];
    for c in coverages.iter().filter(|c| !c.is_float_execution()) {
        match groups.iter_mut().find(|(g, _)| g.lowering == c.lowering) {
            Some((_, names)) => names.push(&c.profile),
            None => groups.push((c, vec![&c.profile])),
        }
    }
    groups
        .into_iter()
        .filter_map(|(c, names)| {
            let share = c.mac_share?;
            let names: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
            (share < LOW_MAC_SHARE).then(|| {
                format!(
                    "only {:.1}% of the model's multiply-accumulates ran in integers under {} \
                     (lowering {}: {} of {} quantized groups lowered); the results measure mostly \
                     float arithmetic, not integer portability",
                    100.0 * share,
                    names.join(", "),
                    c.lowering,
                    c.groups_lowered,
                    c.groups_found
                )
            })
        })
        .collect()
}

/// The coverages a `--min-integer-coverage` threshold applies to: every
/// profile's but those that lower nothing.
pub fn integer_profiles(coverages: &[CoverageJson]) -> impl Iterator<Item = &CoverageJson> {
    coverages.iter().filter(|c| !c.is_float_execution())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cov(profile: &str, lowering: Lowering, share: Option<f64>) -> CoverageJson {
        CoverageJson {
            profile: profile.into(),
            lowering: wire(&lowering),
            groups_found: 10,
            groups_lowered: if lowering == Lowering::None { 0 } else { 3 },
            group_share: None,
            lowered_by_op: Default::default(),
            macs_integer: 0,
            macs_total: 100,
            mac_share: share,
            macs_uncounted_nodes: 0,
            float_groups: vec![],
        }
    }

    #[test]
    fn one_warning_per_low_rule_set_and_none_for_float_execution() {
        let cs = [
            cov("f32-rne", Lowering::Onnxruntime, Some(0.027)),
            cov("exact", Lowering::All, Some(0.99)),
            cov("avx2-u8s8", Lowering::Onnxruntime, Some(0.027)),
            cov("ort-unfused", Lowering::None, Some(0.0)),
        ];
        let w = low_coverage_warnings(&cs);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with(
                "only 2.7% of the model's multiply-accumulates ran in integers under \
                 `f32-rne`, `avx2-u8s8` (lowering onnxruntime: 3 of 10"
            ),
            "{}",
            w[0]
        );
        assert!(w[0].ends_with("not integer portability"), "{}", w[0]);
        assert_eq!(cs[3].low_coverage_warning(), None);
        assert!(cs[3].is_float_execution() && !cs[0].is_float_execution());
        let names: Vec<&str> = integer_profiles(&cs).map(|c| c.profile.as_str()).collect();
        assert_eq!(names, ["f32-rne", "exact", "avx2-u8s8"]);
        assert_eq!(low_coverage_warnings(&cs[1..2]), Vec::<String>::new());
    }
}
