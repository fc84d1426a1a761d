//! Integer coverage as reported by every study: how much of a quantized
//! model ran in integers under a profile ([`qport_engine::Coverage`] of one
//! run), so that agreement measured on a model that ran mostly in float is
//! never mistaken for a portability result.

use serde::Serialize;

/// Below this share of MACs in integers a study warns that it says little
/// about integer arithmetic.
pub const LOW_MAC_SHARE: f64 = 0.5;

/// How much of a model ran in integers under a profile (from
/// [`qport_engine::Coverage`] of one run).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoverageJson {
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
#[derive(Debug, Clone, PartialEq, Serialize)]
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
    /// ([`qport_engine::IntegerPlan::run_with_coverage`]). Which groups are
    /// lowered does not depend on the plan's profile, so one plan speaks
    /// for every profile of a study.
    pub fn measure(
        plan: &qport_engine::IntegerPlan,
        inputs: Vec<(String, qport_core::Tensor)>,
    ) -> Result<CoverageJson, qport_engine::EngineError> {
        let (_, c) = plan.run_with_coverage(inputs)?;
        Ok(CoverageJson::new(&c))
    }

    /// True when a share of MACs is known and below `min`.
    pub fn mac_share_below(&self, min: f64) -> bool {
        self.mac_share.is_some_and(|v| v < min)
    }

    /// The warning a study gives when under [`LOW_MAC_SHARE`] of the MACs
    /// ran in integers.
    pub fn low_coverage_warning(&self) -> Option<String> {
        let share = self.mac_share?;
        (share < LOW_MAC_SHARE).then(|| {
            format!(
                "only {:.1}% of the model's multiply-accumulates ran in integers ({} of {} quantized \
                 groups lowered); the results measure mostly float arithmetic, not integer portability",
                100.0 * share,
                self.groups_lowered,
                self.groups_found
            )
        })
    }
}
