//! [`Plan`]: a model compiled into operator steps over numbered value slots.
//!
//! Before building operators a plan rewrites the graph (unless
//! [`PlanOptions::fuse`] is off). The fusions, each applied only where the
//! value it removes has a single reader and is not a graph output:
//!
//! - Conv followed by an inference BatchNormalization, both with constant
//!   `f32` parameters: the normalization is folded into the Conv's weight
//!   and bias.
//! - Conv (after any such fold) followed by Relu, LeakyRelu, HardSwish or
//!   Clip with constant bounds: the activation is applied by the Conv to
//!   each output element as it is produced.
//!
//! Numerics: folding changes rounding (within the FP32 parity bound
//! against onnxruntime); results stay bit-identical run to run.

use crate::error::EngineError;
use crate::ops::{registry, BuildCtx, Op};
use crate::optimize;
use qport_core::arith::ArithProfile;
use qport_core::compare::NonFiniteOrigin;
use qport_core::Tensor;
use qport_onnx::{Model, ValueInfo};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

struct Step {
    node: String,
    op_type: String,
    op: Box<dyn Op>,
    inputs: Vec<Option<usize>>,
    outputs: Vec<Option<usize>>,
    output_names: Vec<String>,
    /// Slots whose last reader is this step (freed after it runs).
    frees: Vec<usize>,
}

/// An executable float plan of a model.
///
/// Build once with [`Plan::new`] (or [`Plan::with_options`]), run many
/// times with [`Plan::run`]. Runs are independent and a plan can be shared
/// between threads.
///
/// ```no_run
/// use qport_engine::Plan;
/// let model = qport_onnx::load::load("model.onnx").unwrap();
/// let plan = Plan::new(&model).unwrap();
/// let x = qport_core::Tensor::zeros(qport_core::DType::F32, vec![1, 3, 224, 224]).unwrap();
/// let outputs = plan.run(vec![("input".to_string(), x)]).unwrap();
/// println!("{:?}", outputs[0].1.shape());
/// ```
pub struct Plan {
    steps: Vec<Step>,
    n_slots: usize,
    constants: Vec<(usize, Arc<Tensor>)>,
    inputs: Vec<(ValueInfo, usize)>,
    outputs: Vec<(String, usize)>,
}

/// Op types in `model` that qport cannot run, with their node counts,
/// sorted by op type (`domain:Op` outside the default domain).
pub fn unsupported_ops(model: &Model) -> Vec<(String, usize)> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for n in &model.graph.nodes {
        if registry().get(&n.domain, &n.op_type).is_none() {
            *counts.entry(n.qualified_op()).or_default() += 1;
        }
    }
    counts.into_iter().collect()
}

/// How [`Plan::with_options`] compiles a model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanOptions {
    /// Apply the plan-time fusions listed in the [module docs](self):
    /// fewer, faster steps whose intermediate values (a Conv's output before
    /// its BatchNormalization, say) are never produced, so
    /// [`Plan::run_with_tap`] does not report them. With `fuse: false` every
    /// node runs as written and every ONNX value is produced and tapped.
    pub fuse: bool,
    /// The integer arithmetic of the quantized operators (`QLinearConv`,
    /// `QLinearMatMul`, `QGemm`, `QLinearAdd`, `QLinearMul`,
    /// `QLinearGlobalAveragePool`, `QuantizeLinear`) under the profile's
    /// accumulator, requantization, rounding, bias and epilogue policies
    /// (see [`qport_core::arith`] and [`crate::integer`]). The default,
    /// [`ArithProfile::onnxruntime`], computes them as onnxruntime's CPU
    /// kernels do.
    pub arith: ArithProfile,
}

impl Default for PlanOptions {
    /// Fusion on, onnxruntime's quantized arithmetic.
    fn default() -> Self {
        PlanOptions {
            fuse: true,
            arith: ArithProfile::default(),
        }
    }
}

impl PlanOptions {
    /// Every node as written, every value visible to taps (for
    /// calibration and layer-by-layer comparison).
    pub fn unfused() -> Self {
        PlanOptions {
            fuse: false,
            arith: ArithProfile::default(),
        }
    }
}

impl Plan {
    /// Compiles `model` with the default options (fusion on, see
    /// [`PlanOptions`]). Fails with [`EngineError::Unsupported`] listing
    /// every unsupported op type, or with the first builder error naming its
    /// node. Nodes must be in topological order (as `qport_onnx::load`
    /// leaves them).
    pub fn new(model: &Model) -> Result<Plan, EngineError> {
        Self::with_options(model, PlanOptions::default())
    }

    /// Compiles `model` with `options`; errors as [`Plan::new`].
    pub fn with_options(model: &Model, options: PlanOptions) -> Result<Plan, EngineError> {
        let unsupported = unsupported_ops(model);
        if !unsupported.is_empty() {
            return Err(EngineError::Unsupported {
                ops: unsupported
                    .iter()
                    .map(|(op, n)| format!("{op} ({n} node{})", if *n == 1 { "" } else { "s" }))
                    .collect(),
            });
        }
        let g = &model.graph;
        let rewritten = optimize::rewrite(model, options.fuse);
        let initializers = rewritten.initializers;
        let mut slots: HashMap<String, usize> = HashMap::new();
        let slot = |name: &str, slots: &mut HashMap<String, usize>| -> usize {
            let n = slots.len();
            *slots.entry(name.to_string()).or_insert(n)
        };
        for name in initializers.keys() {
            slot(name, &mut slots);
        }
        let mut inputs = vec![];
        for vi in &g.inputs {
            if initializers.contains_key(&vi.name) {
                continue;
            }
            let s = slot(&vi.name, &mut slots);
            inputs.push((vi.clone(), s));
        }
        let mut produced: Vec<bool> = vec![true; slots.len()];
        let mut steps = vec![];
        for planned in &rewritten.nodes {
            let node = &planned.node;
            let opset = model
                .opset(&node.domain)
                .unwrap_or(if node.in_default_domain() {
                    model.opset("").unwrap_or(21)
                } else {
                    1
                });
            let ctx = BuildCtx {
                node,
                opset,
                initializers: &initializers,
                arith: &options.arith,
            };
            let built = match planned.act {
                Some(act) => crate::ops::nn::conv::build_conv_fused(&ctx, act),
                None => {
                    let builder = registry()
                        .get(&node.domain, &node.op_type)
                        .expect("checked by unsupported_ops");
                    builder(&ctx)
                }
            };
            let op = built.map_err(|source| EngineError::Node {
                node: node.name.clone(),
                op: node.qualified_op(),
                source: Box::new(source),
            })?;
            let mut ins = vec![];
            for name in &node.inputs {
                if name.is_empty() {
                    ins.push(None);
                    continue;
                }
                match slots.get(name) {
                    Some(&s) if produced.get(s).copied().unwrap_or(false) => ins.push(Some(s)),
                    _ => {
                        return Err(EngineError::Graph(format!(
                            "node '{}' ({}) reads '{}' which is not produced before it",
                            node.name, node.op_type, name
                        )))
                    }
                }
            }
            let mut outs = vec![];
            for name in &node.outputs {
                if name.is_empty() {
                    outs.push(None);
                    continue;
                }
                let s = slot(name, &mut slots);
                if produced.len() <= s {
                    produced.resize(s + 1, false);
                }
                produced[s] = true;
                outs.push(Some(s));
            }
            steps.push(Step {
                node: node.name.clone(),
                op_type: node.qualified_op(),
                op,
                inputs: ins,
                outputs: outs,
                output_names: node.outputs.clone(),
                frees: vec![],
            });
        }
        let constants: Vec<(usize, Arc<Tensor>)> = initializers
            .into_iter()
            .map(|(name, t)| (slots[&name], Arc::new(t)))
            .collect();
        let mut outputs = vec![];
        for o in &g.outputs {
            match slots.get(&o.name) {
                Some(&s) if produced.get(s).copied().unwrap_or(false) => {
                    outputs.push((o.name.clone(), s))
                }
                _ => {
                    return Err(EngineError::Graph(format!(
                        "graph output '{}' is never produced",
                        o.name
                    )))
                }
            }
        }
        // Liveness: free each non-output slot after its last reader.
        let n_slots = slots.len();
        let mut last: Vec<Option<usize>> = vec![None; n_slots];
        for (i, st) in steps.iter().enumerate() {
            for s in st.inputs.iter().flatten() {
                last[*s] = Some(i);
            }
        }
        for (_, s) in &outputs {
            last[*s] = None;
        }
        for (s, l) in last.iter().enumerate() {
            if let Some(i) = l {
                steps[*i].frees.push(s);
            }
        }
        Ok(Plan {
            steps,
            n_slots,
            constants,
            inputs,
            outputs,
        })
    }

    /// The graph inputs a caller must feed, with declared dtype and shape.
    pub fn inputs(&self) -> impl Iterator<Item = &ValueInfo> {
        self.inputs.iter().map(|(v, _)| v)
    }

    /// The graph output names, in order.
    pub fn output_names(&self) -> impl Iterator<Item = &str> {
        self.outputs.iter().map(|(n, _)| n.as_str())
    }

    /// Number of operator steps.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// True for a plan with no operator steps.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// Runs the plan on named inputs and returns the graph outputs in order.
    pub fn run(&self, inputs: Vec<(String, Tensor)>) -> Result<Vec<(String, Tensor)>, EngineError> {
        self.run_with_tap(inputs, &mut |_, _| {})
    }

    /// Like [`Plan::run`], calling `tap(value_name, tensor)` for every value
    /// a node produces, in execution order.
    pub fn run_with_tap(
        &self,
        inputs: Vec<(String, Tensor)>,
        tap: &mut dyn FnMut(&str, &Tensor),
    ) -> Result<Vec<(String, Tensor)>, EngineError> {
        self.run_steps(inputs, &mut |_, name, t| tap(name, t))
    }

    /// Runs the plan on `inputs` capturing every intermediate value, and
    /// returns the first step (in execution order) that wrote a NaN or an
    /// infinity, with the value; `None` when every value a node produced is
    /// finite. With fusion on, a fused step carries its first node's name
    /// (build the plan with [`PlanOptions::unfused`] to see every node).
    pub fn first_non_finite(
        &self,
        inputs: Vec<(String, Tensor)>,
    ) -> Result<Option<NonFiniteOrigin>, EngineError> {
        let mut first: Option<NonFiniteOrigin> = None;
        self.run_steps(inputs, &mut |st, name, t| {
            if first.is_some() {
                return;
            }
            if let Some(v) = qport_core::compare::non_finite(t) {
                first = Some(NonFiniteOrigin {
                    node: st.node.clone(),
                    op: st.op_type.clone(),
                    value: name.to_string(),
                    nan: v.nan,
                });
            }
        })?;
        Ok(first)
    }

    fn run_steps(
        &self,
        inputs: Vec<(String, Tensor)>,
        tap: &mut dyn FnMut(&Step, &str, &Tensor),
    ) -> Result<Vec<(String, Tensor)>, EngineError> {
        let mut vals: Vec<Option<Arc<Tensor>>> = vec![None; self.n_slots];
        for (s, t) in &self.constants {
            vals[*s] = Some(t.clone());
        }
        let mut given: HashMap<String, Tensor> = HashMap::new();
        for (name, t) in inputs {
            if !self.inputs.iter().any(|(v, _)| v.name == name) {
                return Err(EngineError::UnknownInput {
                    name,
                    expected: self.inputs.iter().map(|(v, _)| v.name.clone()).collect(),
                });
            }
            given.insert(name, t);
        }
        for (vi, s) in &self.inputs {
            let t = given
                .remove(&vi.name)
                .ok_or_else(|| EngineError::MissingInput {
                    name: vi.name.clone(),
                    dtype: vi
                        .dtype
                        .map(|d| d.to_string())
                        .unwrap_or_else(|| "?".into()),
                    shape: vi.shape_string(),
                })?;
            if let Some(d) = vi.dtype {
                if d != t.dtype() {
                    return Err(EngineError::InputDType {
                        name: vi.name.clone(),
                        expected: d,
                        actual: t.dtype(),
                    });
                }
            }
            if !vi.accepts_shape(t.shape()) {
                return Err(EngineError::InputShape {
                    name: vi.name.clone(),
                    expected: vi.shape_string(),
                    actual: t.shape().to_vec(),
                });
            }
            vals[*s] = Some(Arc::new(t));
        }
        for st in &self.steps {
            let args: Vec<Option<&Tensor>> = st
                .inputs
                .iter()
                .map(|s| s.and_then(|s| vals[s].as_deref()))
                .collect();
            let outs = st.op.eval(&args).map_err(|source| EngineError::Node {
                node: st.node.clone(),
                op: st.op_type.clone(),
                source: Box::new(source),
            })?;
            drop(args);
            for (i, t) in outs.into_iter().enumerate() {
                if let Some(Some(s)) = st.outputs.get(i) {
                    vals[*s] = Some(Arc::new(t));
                }
            }
            for (s, name) in st.outputs.iter().zip(&st.output_names) {
                let Some(s) = s else { continue };
                match vals[*s].as_deref() {
                    Some(t) => tap(st, name, t),
                    None => {
                        return Err(EngineError::Node {
                            node: st.node.clone(),
                            op: st.op_type.clone(),
                            source: Box::new(crate::OpError::invalid(
                                "operator did not produce all outputs",
                            )),
                        })
                    }
                }
            }
            for s in &st.frees {
                if let Some(t) = vals[*s].take().and_then(|a| Arc::try_unwrap(a).ok()) {
                    crate::buffers::recycle(t);
                }
            }
        }
        Ok(self
            .outputs
            .iter()
            .map(|(n, s)| {
                let t = vals[*s].clone().expect("outputs are produced");
                (
                    n.clone(),
                    Arc::try_unwrap(t).unwrap_or_else(|a| (*a).clone()),
                )
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qport_core::DType;
    use qport_onnx::graph::ModelBuilder;

    /// y = Relu(x) + Log(x - 3): NaN for x < 3, from the Log.
    fn log_model() -> Model {
        ModelBuilder::new(13)
            .input("x", DType::F32, &[2])
            .initializer("three", Tensor::scalar(3.0f32))
            .op("Relu", ["x"], ["r"])
            .op("Sub", ["x", "three"], ["d"])
            .op("Log", ["d"], ["l"])
            .op("Add", ["r", "l"], ["y"])
            .output("y", DType::F32, &[2])
            .build()
    }

    #[test]
    fn the_first_non_finite_value_names_its_node() {
        let plan = Plan::new(&log_model()).unwrap();
        let x = |v: Vec<f32>| vec![("x".to_string(), Tensor::from_vec(vec![2], v).unwrap())];
        assert_eq!(plan.first_non_finite(x(vec![4.0, 5.0])).unwrap(), None);
        let o = plan.first_non_finite(x(vec![4.0, 1.0])).unwrap().unwrap();
        assert_eq!(
            (o.node.as_str(), o.op.as_str(), o.value.as_str(), o.nan),
            ("Log_l", "Log", "l", true)
        );
        // log(0) = -inf
        let o = plan.first_non_finite(x(vec![3.0, 4.0])).unwrap().unwrap();
        assert_eq!((o.node.as_str(), o.nan), ("Log_l", false));
    }
}
