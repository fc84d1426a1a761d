//! The deployment and tuning sections of a study report: layouts and the
//! migration checklist (from `qport_platform`'s records), lint findings,
//! sensitivity, the tuning trajectory and the latency regime.

use super::{finite, Provenance};
use crate::lint::LintReport;
use crate::regime_plot::RegimePlot;
use qport_core::wire::wire;
use qport_platform::{Change, ModelLayout, TensorDescriptor};
use qport_quant::sensitivity::Sensitivity;
use qport_quant::tune::Tuned;
use serde::{Deserialize, Serialize};

/// How much a finding or checklist item matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// For information.
    Info,
    /// A risk: re-evaluate.
    Warning,
    /// Deployment breaks or silently loses the intended benefit.
    Error,
}

impl Severity {
    /// `info`, `warning` or `error`.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

impl From<qport_platform::Severity> for Severity {
    fn from(s: qport_platform::Severity) -> Severity {
        match s {
            qport_platform::Severity::Info => Severity::Info,
            qport_platform::Severity::Warning => Severity::Warning,
            qport_platform::Severity::Error => Severity::Error,
        }
    }
}

/// One input or output tensor as a platform's runtime lays it out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorLayout {
    /// Tensor name.
    pub name: String,
    /// Runtime tensor type (`S8`, `F32`, `NV12_Y`, ...).
    pub dtype: String,
    /// Valid shape (`-1`: dynamic).
    pub shape: Vec<i64>,
    /// What and from where (`featuremap, ddr`, `image, pyramid, no
    /// padding`).
    pub layout: String,
    /// Shape with padding (`-1`: dynamic).
    pub padded_shape: Vec<i64>,
    /// Strides in bytes (`-1`: dynamic).
    pub stride: Vec<i64>,
    /// Bytes to allocate (`-1`: dynamic).
    pub bytes: i64,
}

impl From<&TensorDescriptor> for TensorLayout {
    fn from(d: &TensorDescriptor) -> TensorLayout {
        let kind = match d.kind {
            qport_platform::TensorKind::Featuremap(_) => "featuremap",
            qport_platform::TensorKind::Image(_) => "image",
        };
        let pad = if d.no_padding { ", no padding" } else { "" };
        TensorLayout {
            name: d.name.clone(),
            dtype: d.kind.type_name().into(),
            shape: d.valid_shape.clone(),
            layout: format!("{kind}, {}{pad}", d.source.name()),
            padded_shape: d.aligned_shape.clone(),
            stride: d.stride.clone(),
            bytes: d.aligned_byte_size,
        }
    }
}

/// A model's inputs and outputs on one platform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlatformLayout {
    /// Platform name.
    pub platform: String,
    /// Inputs.
    pub inputs: Vec<TensorLayout>,
    /// Outputs.
    pub outputs: Vec<TensorLayout>,
    /// What the computation assumed, in words.
    pub assumptions: Vec<String>,
}

impl From<&ModelLayout> for PlatformLayout {
    fn from(m: &ModelLayout) -> PlatformLayout {
        PlatformLayout {
            platform: m.platform.clone(),
            inputs: m.inputs.iter().map(TensorLayout::from).collect(),
            outputs: m.outputs.iter().map(TensorLayout::from).collect(),
            assumptions: m.assumptions.clone(),
        }
    }
}

/// Input/output layouts per platform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayoutSection {
    /// How it was made.
    pub provenance: Provenance,
    /// One entry per platform, in the order given.
    pub platforms: Vec<PlatformLayout>,
}

/// One item of a migration checklist.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigrationItem {
    /// What changes (`tail-output`, `tensor:<name>`, ...).
    pub item: String,
    /// How much it matters.
    pub severity: Severity,
    /// Value on the source platform.
    pub from: String,
    /// Value on the target platform.
    pub to: String,
    /// What to do.
    pub note: String,
}

impl From<&Change> for MigrationItem {
    fn from(c: &Change) -> MigrationItem {
        MigrationItem {
            item: c.item.clone(),
            severity: c.severity.into(),
            from: c.from.clone(),
            to: c.to.clone(),
            note: c.note.clone(),
        }
    }
}

/// The checklist from one platform to another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Migration {
    /// Source platform.
    pub from: String,
    /// Target platform.
    pub to: String,
    /// The items, in checklist order.
    pub items: Vec<MigrationItem>,
}

impl Migration {
    /// The checklist of `changes` (`qport_platform::migrate_*`) from
    /// `from` to `to`.
    pub fn new(from: &str, to: &str, changes: &[Change]) -> Migration {
        Migration {
            from: from.into(),
            to: to.into(),
            items: changes.iter().map(MigrationItem::from).collect(),
        }
    }

    /// Items of severity `s`.
    pub fn count(&self, s: Severity) -> usize {
        self.items.iter().filter(|i| i.severity == s).count()
    }
}

/// Migration checklists between the platforms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigrationSection {
    /// How it was made.
    pub provenance: Provenance,
    /// One checklist per ordered pair of platforms studied.
    pub migrations: Vec<Migration>,
}

/// One lint finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LintRow {
    /// Rule id.
    pub rule: String,
    /// Severity.
    pub severity: Severity,
    /// The nodes it names (may be empty).
    pub nodes: Vec<String>,
    /// What is wrong and what to do.
    pub message: String,
}

/// Lint of one platform's artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlatformLint {
    /// Platform name.
    pub platform: String,
    /// Errors.
    pub errors: usize,
    /// Warnings.
    pub warnings: usize,
    /// Infos.
    pub infos: usize,
    /// Every finding, in lint order.
    pub findings: Vec<LintRow>,
}

impl From<&LintReport> for PlatformLint {
    fn from(r: &LintReport) -> PlatformLint {
        use qport_platform::Severity as S;
        PlatformLint {
            platform: r.platform.clone(),
            errors: r.count(S::Error),
            warnings: r.count(S::Warning),
            infos: r.count(S::Info),
            findings: r
                .findings
                .iter()
                .map(|f| LintRow {
                    rule: f.rule.into(),
                    severity: f.severity.into(),
                    nodes: f.nodes.clone(),
                    message: f.message.clone(),
                })
                .collect(),
        }
    }
}

/// Lint findings per platform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LintSection {
    /// How it was made.
    pub provenance: Provenance,
    /// One entry per platform, in the order given.
    pub platforms: Vec<PlatformLint>,
}

/// One node of the sensitivity ranking.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SensitiveNode {
    /// Node name.
    pub node: String,
    /// Op type.
    pub op_type: String,
    /// The error it adds alone at its base precision (the metric's loss).
    pub loss: f64,
    /// Its share of the model's MACs.
    pub mac_share: f64,
}

/// Per-node sensitivity, most sensitive first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SensitivitySection {
    /// How it was made.
    pub provenance: Provenance,
    /// The platform whose config was analysed.
    pub platform: String,
    /// The ranking metric.
    pub metric: String,
    /// The precision nodes are promoted to.
    pub high: String,
    /// Samples scored on.
    pub samples: usize,
    /// Nodes, most sensitive first.
    pub nodes: Vec<SensitiveNode>,
}

impl SensitivitySection {
    /// The section of `s` (`qport_quant::sensitivity::analyze` on
    /// `platform`'s config).
    pub fn new(provenance: Provenance, platform: &str, s: &Sensitivity) -> SensitivitySection {
        SensitivitySection {
            provenance,
            platform: platform.into(),
            metric: s.metric.name().into(),
            high: wire(&s.high),
            samples: s.samples,
            nodes: s
                .nodes
                .iter()
                .map(|n| SensitiveNode {
                    node: n.node.clone(),
                    op_type: n.op_type.clone(),
                    loss: finite(n.alone_loss).unwrap_or(0.0),
                    mac_share: finite(n.mac_share).unwrap_or(0.0),
                })
                .collect(),
        }
    }
}

/// One configuration of a tuning search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuneStep {
    /// Index in the trajectory.
    pub step: usize,
    /// `baseline`, `upper-bound`, `promote` or `fall-back`.
    pub kind: String,
    /// The change, in words.
    pub change: String,
    /// The target metric's value (`null`: not finite).
    pub value: Option<f64>,
    /// Whether the target holds.
    pub holds: bool,
    /// Share of MACs at the high precision.
    pub high_share: f64,
    /// Whether the search kept it.
    pub kept: bool,
}

/// A mixed-precision tuning search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuningSection {
    /// How it was made.
    pub provenance: Provenance,
    /// The platform tuned for.
    pub platform: String,
    /// The target, in words.
    pub target: String,
    /// The high precision.
    pub high: String,
    /// How it ended (`baseline-holds`, `reached`, `unreachable`,
    /// `budget-won`).
    pub outcome: String,
    /// Whether the final configuration meets the target.
    pub reached: bool,
    /// Index of the final configuration in `steps`.
    pub final_step: usize,
    /// Every configuration scored, in order.
    pub steps: Vec<TuneStep>,
}

impl TuningSection {
    /// The section of `t` (`qport_quant::tune::tune` for `platform`).
    pub fn new(provenance: Provenance, platform: &str, t: &Tuned) -> TuningSection {
        let high = wire(&t.high);
        let outcome = serde_json::to_value(&t.outcome)
            .ok()
            .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_string))
            .unwrap_or_default();
        TuningSection {
            provenance,
            platform: platform.into(),
            target: t.target.to_string(),
            outcome,
            reached: t.outcome.reached(),
            final_step: t.final_step,
            steps: t
                .trajectory
                .iter()
                .enumerate()
                .map(|(step, s)| TuneStep {
                    step,
                    kind: wire(&s.kind),
                    change: s.change.clone(),
                    value: finite(s.value),
                    holds: s.holds,
                    high_share: s.mac_share.get(&high).copied().unwrap_or(0.0),
                    kept: s.kept,
                })
                .collect(),
            high,
        }
    }
}

/// The latency regime analysis of a sweep (`--regime CSV`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegimeSection {
    /// How it was made.
    pub provenance: Provenance,
    /// The plotted values.
    pub plot: RegimePlot,
}
