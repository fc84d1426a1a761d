//! Integer execution of a QDQ artifact under an arithmetic profile.
//!
//! [`IntegerPlan`] lowers the artifact's QDQ groups to integer operators
//! ([`crate::lower_qdq`] with the profile's rule set,
//! [`ArithProfile::lowering`]: the groups onnxruntime's CPU execution
//! provider fuses on this host, every group qport can lower, or none, as
//! `QLinearConv`, `QLinearMatMul`, `QGemm`, `QLinearAdd`,
//! `QLinearMul`, the pooling, table and Softmax ops, data movement on
//! integers; and qport's own: the normalization tables, and the int8-in /
//! float-out Conv and MatMul groups of the float16 platform templates as
//! integer products with a float epilogue) and compiles them with a
//! [`PlanOptions::arith`] profile, so int8 tensors flow between the
//! quantized operators and the profile's accumulator, requantization,
//! rounding, bias and epilogue policies are the only free variables besides
//! the lowering. Groups the lowering leaves alone (an operator with no
//! integer form, a group the rule set declines) run in float between their
//! dequantize and quantize nodes, as onnxruntime runs them; under
//! [`qport_core::arith::Lowering::None`] that is every group, and the plan
//! runs the artifact as written (onnxruntime with graph optimizations
//! disabled).
//! [`IntegerPlan::coverage`] and [`IntegerPlan::run_with_coverage`] say how
//! much ran in integers: groups found and lowered, the share of Conv /
//! MatMul / Gemm multiply-accumulates, and each group left in float with
//! the reason.
//!
//! ```no_run
//! use qport_core::arith::ArithProfile;
//! use qport_engine::integer::IntegerPlan;
//! let model = qport_onnx::load::load("model.qdq.onnx").unwrap();
//! let plan = IntegerPlan::new(&model, &ArithProfile::preset("gemmlowp").unwrap()).unwrap();
//! println!("{} groups run in integers", plan.lowered().len());
//! let x = qport_core::Tensor::zeros(qport_core::DType::F32, vec![1, 3, 224, 224]).unwrap();
//! let outputs = plan.run(vec![("input".to_string(), x)]).unwrap();
//! ```

use crate::error::EngineError;
use crate::lower::{count_macs, lower_qdq, needed_values, Coverage, FloatGroup, MacNode};
use crate::plan::{Plan, PlanOptions};
use qport_core::arith::ArithProfile;
use qport_core::Tensor;
use qport_onnx::{opclass, Model};

/// Number of `QuantizeLinear` / `DequantizeLinear` nodes (any domain) and
/// already-integer quantized operators (`QLinear*`, `QGemm`,
/// `ConvInteger`, `MatMulInteger`) in `model`: zero means a float model.
pub fn quantized_node_count(model: &Model) -> usize {
    model
        .graph
        .nodes
        .iter()
        .filter(|n| opclass::is_qdq(&n.op_type) || opclass::is_integer_op(&n.op_type))
        .count()
}

/// A QDQ (or QOperator) model compiled for integer execution under one
/// [`ArithProfile`].
pub struct IntegerPlan {
    plan: Plan,
    lowered: Vec<(String, String)>,
    float: Vec<FloatGroup>,
    mac_nodes: Vec<MacNode>,
    model: Model,
    profile: ArithProfile,
}

impl IntegerPlan {
    /// Lowers `model` with the profile's rule set
    /// ([`ArithProfile::lowering`]) and compiles it with plan-time fusion
    /// on. Fails with [`EngineError::NotQuantized`] when the model has no
    /// quantized node (also under [`qport_core::arith::Lowering::None`],
    /// whose plan runs the quantized graph in float).
    pub fn new(model: &Model, profile: &ArithProfile) -> Result<IntegerPlan, EngineError> {
        Self::with_fusion(model, profile, true)
    }

    /// Like [`IntegerPlan::new`]; with `fuse: false` every value of the
    /// lowered graph is produced and reported to taps (for layer-by-layer
    /// comparison). Fusion never changes integer results: the integer
    /// operators are not fused.
    pub fn with_fusion(
        model: &Model,
        profile: &ArithProfile,
        fuse: bool,
    ) -> Result<IntegerPlan, EngineError> {
        if quantized_node_count(model) == 0 {
            return Err(EngineError::NotQuantized {
                model: model.graph.name.clone(),
            });
        }
        let low = lower_qdq(model, profile.lowering);
        let plan = Plan::with_options(
            &low.model,
            PlanOptions {
                fuse,
                arith: profile.clone(),
                // the float steps of a profile keep onnxruntime's order
                blocked: false,
            },
        )?;
        Ok(IntegerPlan {
            plan,
            lowered: low.lowered,
            float: low.float,
            mac_nodes: low.mac_nodes,
            model: low.model,
            profile: profile.clone(),
        })
    }

    /// The compiled plan.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// `(node name, integer operator)` for every lowered QDQ group.
    pub fn lowered(&self) -> &[(String, String)] {
        &self.lowered
    }

    /// The quantized groups left in float, each with the reason.
    pub fn float_groups(&self) -> &[FloatGroup] {
        &self.float
    }

    /// Groups found, lowered and left in float (without MACs, which need
    /// the shapes of a run: [`IntegerPlan::run_with_coverage`]).
    pub fn coverage(&self) -> Coverage {
        let mut by_op = std::collections::BTreeMap::new();
        for (_, op) in &self.lowered {
            *by_op.entry(op.clone()).or_insert(0) += 1;
        }
        Coverage {
            profile: self.profile.name.clone(),
            lowering: self.profile.lowering,
            groups_found: self.lowered.len() + self.float.len(),
            groups_lowered: self.lowered.len(),
            lowered_by_op: by_op,
            float: self.float.clone(),
            macs: None,
        }
    }

    /// Runs the plan like [`IntegerPlan::run`] and counts the
    /// multiply-accumulates of Conv / MatMul / Gemm that ran in integers
    /// and in all, from the shapes of this run (dynamic dimensions
    /// included).
    pub fn run_with_coverage(
        &self,
        inputs: Vec<(String, Tensor)>,
    ) -> Result<(Vec<(String, Tensor)>, Coverage), EngineError> {
        self.run_with_coverage_tap(inputs, &mut |_, _| {})
    }

    /// Like [`IntegerPlan::run_with_coverage`], also calling `tap` for
    /// every value a node produces, in execution order (see
    /// [`Plan::run_with_tap`]).
    pub fn run_with_coverage_tap(
        &self,
        inputs: Vec<(String, Tensor)>,
        tap: &mut dyn FnMut(&str, &Tensor),
    ) -> Result<(Vec<(String, Tensor)>, Coverage), EngineError> {
        let wanted: std::collections::HashSet<&str> = needed_values(&self.mac_nodes).collect();
        let mut shapes = std::collections::HashMap::new();
        for (name, t) in &inputs {
            if wanted.contains(name.as_str()) {
                shapes.insert(name.clone(), t.shape().to_vec());
            }
        }
        let outputs = self.plan.run_with_tap(inputs, &mut |name, t| {
            if wanted.contains(name) {
                shapes.insert(name.to_string(), t.shape().to_vec());
            }
            tap(name, t);
        })?;
        for (name, t) in &outputs {
            if wanted.contains(name.as_str()) {
                shapes.insert(name.clone(), t.shape().to_vec());
            }
        }
        let mut c = self.coverage();
        c.macs = Some(count_macs(&self.mac_nodes, &shapes));
        Ok((outputs, c))
    }

    /// The lowered model the plan was compiled from.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The profile the quantized operators compute under.
    pub fn profile(&self) -> &ArithProfile {
        &self.profile
    }

    /// Runs the plan (see [`Plan::run`]).
    pub fn run(&self, inputs: Vec<(String, Tensor)>) -> Result<Vec<(String, Tensor)>, EngineError> {
        self.plan.run(inputs)
    }
}
