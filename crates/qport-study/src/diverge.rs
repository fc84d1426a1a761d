//! Divergence localization: where and why two arithmetic profiles compute
//! different integers on the same quantized artifact.
//!
//! For a pair of profiles A and B and one input, [`Localizer::localize`]:
//!
//! 1. lowers the artifact to integer operators with A's rule set
//!    ([`IntegerPlan`], no fusion) and runs it under A, recording every
//!    value;
//! 2. takes the *layers*: the nodes of the lowered graph whose arithmetic
//!    is quantized (`QLinear*`, `QGemm`, `QuantizeLinear`, ...) or whose
//!    output is an 8-, 16- or 32-bit integer tensor (integer `Clip`, data
//!    movement on integers), in execution order; when B lowers the
//!    artifact otherwise ([`ArithProfile::lowering`]), only those whose
//!    outputs B's lowered graph computes too (a value only one lowering
//!    has, such as a QuantizeLinear propagated across a Transpose, is
//!    part of the next layer);
//! 3. re-runs every layer on its own, under A and under B, with A's values
//!    as its inputs, so both profiles see the same integer operands. The
//!    re-run under A must reproduce A's value in the full graph (anything
//!    else is a bug and fails with [`StudyError::Inconsistent`]); B's
//!    result against A's gives the layer's *isolated* divergence (share of
//!    differing elements, max difference in LSBs). Under a profile that
//!    lowers otherwise than A, the layer is the part of that profile's
//!    lowered graph that computes its outputs from A's values (e.g. a
//!    `QLinearConv` under A is `DequantizeLinear → Conv → QuantizeLinear`
//!    in float under a profile that lowers nothing);
//! 4. for each layer that diverges in isolation, re-runs it under A with
//!    one of B's policies swapped in at a time ([`Stage`]): every swap that
//!    alone reproduces a difference names its stage ([`Attribution`]);
//! 5. runs the whole graph under B too, for the *end-to-end* view: how far
//!    a first flipped integer propagates and grows through later layers.
//!
//! The first layer with any isolated difference is the first diverging
//! layer. [`summarize`] aggregates the results of several inputs.
//!
//! ```no_run
//! use qport_core::arith::ArithProfile;
//! use qport_study::diverge::Localizer;
//! let model = qport_onnx::load("model.qdq.onnx").unwrap();
//! let a = ArithProfile::preset("gemmlowp").unwrap();
//! let b = ArithProfile::preset("f32-rne").unwrap();
//! let mut loc = Localizer::new(&model, &a, &b).unwrap();
//! let x = qport_core::Tensor::zeros(qport_core::DType::F32, vec![1, 3, 224, 224]).unwrap();
//! let d = loc.localize(vec![("input".to_string(), x)]).unwrap();
//! if let Some(layer) = d.first_layer() {
//!     let stage = layer.attribution.as_ref().map(|a| a.verdict.as_str());
//!     println!("first diverging layer: {} ({stage:?})", layer.node);
//! }
//! ```

mod compare;
mod node;
pub mod report;
mod stage;
mod summary;

pub(crate) use compare::compare as compare_values;
pub use compare::Diff;
pub use stage::{Attribution, Stage, Swap};
pub use summary::{summarize, FirstCount, LayerSummary, Summary, SwapSummary, VerdictCount, View};

use crate::coverage::CoverageJson;
use crate::StudyError;
use node::{is_quantized_op, NodeRunner, Part, Variant};
use qport_core::arith::ArithProfile;
use qport_core::compare::{
    self as cmp, NonFiniteOutput, OutputAcc, OutputChoice, OutputKind, OutputStats, Top1,
};
use qport_core::{DType, Tensor};
use qport_engine::IntegerPlan;
use qport_onnx::Model;
use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// Units of a layer's differences.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unit {
    /// Integer steps of the quantized output (LSBs).
    Lsb,
    /// The output's own (float) units.
    Value,
}

/// One layer's divergence on one input.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Layer {
    /// Node name in the lowered graph.
    pub node: String,
    /// Op type (`domain:Op` outside the default domain).
    pub op: String,
    /// The node's outputs.
    pub outputs: Vec<String>,
    /// Element type of the first output.
    pub dtype: String,
    /// Units of `max_diff`.
    pub unit: Unit,
    /// B against A with the same operands (A's values) fed to the layer.
    pub isolated: Diff,
    /// B against A when each profile runs the whole graph.
    pub end_to_end: Diff,
    /// For a layer with an isolated difference: which stage(s) explain it.
    pub attribution: Option<Attribution>,
}

/// One chosen graph output under both profiles, on one input.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutputDiff {
    /// Graph output name.
    pub name: String,
    /// What it is on this input (a pass-through output repeats a model
    /// input under both profiles; only float outputs count as agreement).
    pub kind: OutputKind,
    /// B against A, end to end.
    pub diff: Diff,
    /// Top-1 agreement along the output's arg-max axis (float outputs
    /// with one).
    pub top1: Option<Top1>,
}

/// The divergence of profile B from profile A on one input.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Divergence {
    /// Profile A's name.
    pub a: String,
    /// Profile B's name.
    pub b: String,
    /// Every layer, in execution order.
    pub layers: Vec<Layer>,
    /// Index in `layers` of the first layer with an isolated difference.
    pub first: Option<usize>,
    /// The graph outputs.
    pub outputs: Vec<OutputDiff>,
}

impl Divergence {
    /// The first diverging layer, if any.
    pub fn first_layer(&self) -> Option<&Layer> {
        self.first.map(|i| &self.layers[i])
    }

    /// True when every chosen output that does not repeat a model input
    /// is bit-identical under both profiles (integer outputs count here:
    /// this study measures integers in LSBs).
    pub fn outputs_identical(&self) -> bool {
        self.outputs
            .iter()
            .filter(|o| o.kind != OutputKind::PassThrough)
            .all(|o| o.diff.is_identical())
    }

    /// Whether every top-1 row of every compared output agrees; `None`
    /// when no output has an arg-max axis.
    pub fn top1_agrees(&self) -> Option<bool> {
        let tops: Vec<&Top1> = self
            .outputs
            .iter()
            .filter(|o| o.kind.is_compared())
            .filter_map(|o| o.top1.as_ref())
            .collect();
        (!tops.is_empty()).then(|| tops.iter().all(|t| t.agree == t.rows))
    }
}

/// Localizes the divergence between two profiles on one model, input after
/// input, reusing the lowered plans and the single-node plans.
pub struct Localizer {
    a: ArithProfile,
    b: ArithProfile,
    plan_a: IntegerPlan,
    plan_b: IntegerPlan,
    nodes: NodeRunner,
    choice: OutputChoice,
    /// Each graph output's quantization step in the artifact, when stated.
    steps: Vec<Option<f64>>,
    /// Per chosen output (its index among the graph outputs), B against A
    /// over every input so far; built on the first input.
    outputs: Vec<(usize, OutputAcc)>,
    /// What ran in integers under A and under B, measured on the first
    /// input.
    coverage: Vec<CoverageJson>,
    /// When B lowers the artifact otherwise than A: the values B's lowered
    /// graph computes (its graph inputs and node outputs).
    b_values: Option<HashSet<String>>,
}

/// Localizes the divergence of `b` from `a` on `model` for one input (see
/// the [module docs](self)); use a [`Localizer`] for several inputs.
pub fn localize(
    model: &Model,
    inputs: Vec<(String, Tensor)>,
    a: &ArithProfile,
    b: &ArithProfile,
) -> Result<Divergence, StudyError> {
    Localizer::new(model, a, b)?.localize(inputs)
}

/// True for the element types of quantized values and accumulators.
fn is_quantized_dtype(d: DType) -> bool {
    matches!(
        d,
        DType::I8 | DType::U8 | DType::I16 | DType::U16 | DType::I32
    )
}

impl Localizer {
    /// Lowers `model` and compiles it under `a` and under `b`. Fails with
    /// [`qport_engine::EngineError::NotQuantized`] for a float model.
    pub fn new(model: &Model, a: &ArithProfile, b: &ArithProfile) -> Result<Localizer, StudyError> {
        let plan_a = IntegerPlan::with_fusion(model, a, false)?;
        let plan_b = IntegerPlan::with_fusion(model, b, false)?;
        let b_values = (a.lowering != b.lowering).then(|| {
            let g = &plan_b.model().graph;
            g.inputs
                .iter()
                .map(|v| v.name.clone())
                .chain(g.nodes.iter().flat_map(|n| n.outputs.iter().cloned()))
                .collect()
        });
        let steps = plan_a
            .plan()
            .output_names()
            .map(|n| model.graph.dequantize_step(n))
            .collect();
        Ok(Localizer {
            a: a.clone(),
            b: b.clone(),
            plan_a,
            plan_b,
            nodes: NodeRunner::new(),
            choice: OutputChoice::default(),
            steps,
            outputs: vec![],
            coverage: vec![],
            b_values,
        })
    }

    /// Compares the outputs `choice` names, with its top-1 axis (default:
    /// every output, [`qport_core::compare::default_argmax_axis`]).
    pub fn with_outputs(mut self, choice: OutputChoice) -> Localizer {
        self.choice = choice;
        self
    }

    /// Every chosen output, B against A, over every input localized so far
    /// (A is the reference).
    pub fn output_stats(&self) -> Vec<OutputStats> {
        self.outputs
            .iter()
            .map(|(_, acc)| acc.clone().finish())
            .collect()
    }

    /// Fails when an output of `plan`'s run holds NaN or an infinity,
    /// naming the first node that produced one.
    fn check_finite(
        plan: &IntegerPlan,
        inputs: &[(String, Tensor)],
        outputs: &[(String, Tensor)],
    ) -> Result<(), StudyError> {
        let Some((i, v)) = cmp::non_finite_output(outputs) else {
            return Ok(());
        };
        let origin = plan.plan().first_non_finite(inputs.to_vec())?;
        Err(StudyError::NonFiniteOutput(NonFiniteOutput {
            output: outputs[i].0.clone(),
            run: format!("profile `{}`", plan.profile().name),
            sample: "this input".into(),
            nan: v.nan,
            origin: origin.map(Box::new),
        }))
    }

    /// Profile A.
    pub fn profile_a(&self) -> &ArithProfile {
        &self.a
    }

    /// Profile B.
    pub fn profile_b(&self) -> &ArithProfile {
        &self.b
    }

    /// `(node name, integer operator)` of every QDQ group A lowers.
    pub fn lowered(&self) -> &[(String, String)] {
        self.plan_a.lowered()
    }

    /// The lowered model (A's) the layers are nodes of.
    pub fn model(&self) -> &Model {
        self.plan_a.model()
    }

    /// How much of the artifact runs in integers under A and under B (in
    /// that order; they differ only where the profiles' lowerings do),
    /// measured on the first input localized; empty before any.
    pub fn coverage(&self) -> &[CoverageJson] {
        &self.coverage
    }

    /// Localizes the divergence of B from A on one input (the graph inputs
    /// by name, as [`qport_engine::Plan::run`] takes them).
    pub fn localize(&mut self, inputs: Vec<(String, Tensor)>) -> Result<Divergence, StudyError> {
        // 1. A, every value kept.
        let mut values: HashMap<String, Tensor> = inputs.iter().cloned().collect();
        let outputs_a = self
            .plan_a
            .plan()
            .run_with_tap(inputs.clone(), &mut |name, t| {
                values.insert(name.to_string(), t.clone());
            })?;
        // after A ran, so inputs that do not fit fail as such
        if self.coverage.is_empty() {
            self.coverage = CoverageJson::measure_each(&[&self.plan_a, &self.plan_b], &inputs)?;
        }

        // 2. The layers.
        let model = self.plan_a.model();
        let mut layers: Vec<(usize, Layer)> = vec![];
        for (i, n) in model.graph.nodes.iter().enumerate() {
            let outs: Vec<String> = n
                .outputs
                .iter()
                .filter(|o| !o.is_empty())
                .cloned()
                .collect();
            let Some(dtype) = outs.first().and_then(|o| values.get(o)).map(|t| t.dtype()) else {
                continue;
            };
            if !(is_quantized_op(&n.op_type) || is_quantized_dtype(dtype)) {
                continue;
            }
            if let Some(b) = &self.b_values {
                if !outs.iter().all(|o| b.contains(o)) {
                    continue;
                }
            }
            let op = n.qualified_op();
            layers.push((
                i,
                Layer {
                    node: n.name.clone(),
                    op,
                    outputs: outs,
                    dtype: dtype.name().to_string(),
                    unit: if dtype.is_int() {
                        Unit::Lsb
                    } else {
                        Unit::Value
                    },
                    isolated: Diff::default(),
                    end_to_end: Diff::default(),
                    attribution: None,
                },
            ));
        }

        // 3. B end to end, compared value by value as it runs.
        let owner: HashMap<&str, usize> = layers
            .iter()
            .enumerate()
            .flat_map(|(k, (_, l))| l.outputs.iter().map(move |o| (o.as_str(), k)))
            .collect();
        let mut e2e: Vec<Diff> = vec![Diff::default(); layers.len()];
        let mut mismatch: Option<String> = None;
        let inputs_kept = inputs.clone();
        let outputs_b = self.plan_b.plan().run_with_tap(inputs, &mut |name, t| {
            let (Some(&k), Some(ta)) = (owner.get(name), values.get(name)) else {
                return;
            };
            match compare::compare(ta, t) {
                Ok(d) => e2e[k].merge(d),
                Err(e) => {
                    mismatch.get_or_insert(format!("value '{name}' under A and B: {e}"));
                }
            }
        })?;
        Self::check_finite(&self.plan_a, &inputs_kept, &outputs_a)?;
        Self::check_finite(&self.plan_b, &inputs_kept, &outputs_b)?;
        if let Some(m) = mismatch {
            return Err(StudyError::Inconsistent(m));
        }
        for ((_, l), d) in layers.iter_mut().zip(e2e) {
            l.end_to_end = d;
        }

        // 4. Each layer alone, under A (check), B and the swaps.
        for (index, layer) in layers.iter_mut() {
            self.isolate(*index, layer, &values)?;
        }
        let first = layers.iter().position(|(_, l)| !l.isolated.is_identical());

        if self.outputs.is_empty() {
            let steps = &self.steps;
            self.outputs = self
                .choice
                .specs(&outputs_a, |n| {
                    let i = outputs_a.iter().position(|(m, _)| m == n)?;
                    steps.get(i).copied().flatten()
                })
                .map_err(StudyError::Input)?
                .into_iter()
                .map(|(i, spec)| (i, OutputAcc::new(spec)))
                .collect();
        }
        let mut outputs = vec![];
        for (i, acc) in &mut self.outputs {
            let ((name, ta), (_, tb)) = (&outputs_a[*i], &outputs_b[*i]);
            let inconsistent =
                |e: String| StudyError::Inconsistent(format!("graph output '{name}': {e}"));
            let diff = compare::compare(ta, tb).map_err(inconsistent)?;
            let float = acc.add(ta, tb, &inputs_kept).map_err(inconsistent)?;
            let passes =
                cmp::passed_input(ta, &inputs_kept).is_some() && cmp::bit_identical(ta, tb);
            outputs.push(OutputDiff {
                name: name.clone(),
                kind: match (passes, float) {
                    (true, _) => OutputKind::PassThrough,
                    (false, Some(_)) => OutputKind::Float,
                    (false, None) => OutputKind::Integer,
                },
                diff,
                top1: float.and_then(|d| d.top1(acc.spec().argmax_axis)),
            });
        }
        Ok(Divergence {
            a: self.a.name.clone(),
            b: self.b.name.clone(),
            layers: layers.into_iter().map(|(_, l)| l).collect(),
            first,
            outputs,
        })
    }

    /// Re-runs node `index` alone under A, B and (when B differs) each
    /// single-policy swap, filling `layer.isolated` and
    /// `layer.attribution`.
    fn isolate(
        &mut self,
        index: usize,
        layer: &mut Layer,
        values: &HashMap<String, Tensor>,
    ) -> Result<(), StudyError> {
        let model = self.plan_a.model();
        let expected: Vec<&Tensor> = layer.outputs.iter().map(|o| &values[o.as_str()]).collect();
        let diff_to = |got: &[(String, Tensor)], want: &[&Tensor]| -> Result<Diff, String> {
            let mut d = Diff::default();
            for ((name, g), w) in got.iter().zip(want) {
                d.merge(compare::compare(w, g).map_err(|e| format!("output '{name}': {e}"))?);
            }
            Ok(d)
        };
        let (node, op) = (layer.node.clone(), layer.op.clone());
        let inconsistent = |what: String| {
            StudyError::Inconsistent(format!(
                "node '{node}' ({op}) re-run alone under profile `{}`: {what}",
                self.a.name
            ))
        };

        let outputs = layer.outputs.clone();
        let part = |p: &ArithProfile| {
            if p.lowering == self.a.lowering {
                Part::Node(model, index)
            } else {
                Part::Computing(self.plan_b.model(), &outputs)
            }
        };
        let own = self
            .nodes
            .run(part(&self.a), index, Variant::A, &self.a, values)?;
        let check = diff_to(&own, &expected).map_err(inconsistent)?;
        if !check.is_identical() {
            return Err(inconsistent(format!(
                "{} of {} elements differ from its value in the full graph (max {} apart)",
                check.differing, check.elements, check.max_diff
            )));
        }

        let under_b = self
            .nodes
            .run(part(&self.b), index, Variant::B, &self.b, values)?;
        layer.isolated = diff_to(&under_b, &expected).map_err(inconsistent)?;
        if layer.isolated.is_identical() {
            return Ok(());
        }
        let b_refs: Vec<&Tensor> = under_b.iter().map(|(_, t)| t).collect();
        let mut swaps = vec![];
        for stage in Stage::differing(&self.a, &self.b) {
            let mut swap = Swap {
                stage,
                field: stage.field(),
                a: stage.policy(&self.a),
                b: stage.policy(&self.b),
                vs_a: None,
                vs_b: None,
                skipped: None,
            };
            match stage::swapped(stage, &self.a, &self.b) {
                Err(why) => swap.skipped = Some(why),
                Ok(p) => {
                    let got = self
                        .nodes
                        .run(part(&p), index, Variant::Swap(stage), &p, values)?;
                    swap.vs_a = Some(diff_to(&got, &expected).map_err(inconsistent)?);
                    swap.vs_b = Some(diff_to(&got, &b_refs).map_err(inconsistent)?);
                }
            }
            swaps.push(swap);
        }
        layer.attribution = Some(Attribution::from_swaps(swaps));
        Ok(())
    }
}

#[cfg(test)]
#[path = "diverge_tests.rs"]
mod tests;
