//! [`Plan`]: a model compiled into operator steps over numbered value slots.
//!
//! Before building operators a plan rewrites the graph (unless
//! [`PlanOptions::fuse`] is off). The fusions, each applied only where the
//! value it removes has a single reader and is not a graph output:
//!
//! - Conv followed by an inference BatchNormalization, both with constant
//!   `f32` parameters: the normalization is folded into the Conv's weight
//!   and bias.
//! - Conv (after any such fold) read only by an Add whose other operand is
//!   computed before the Conv (a residual): the Conv adds it to each
//!   output after its bias, the same bits as the Add.
//! - Conv (after any such fold and Add) followed by Relu, LeakyRelu,
//!   HardSwish or Clip with constant bounds: the activation is applied by
//!   the Conv to each output element as it is produced.
//! - DequantizeLinear of constants (a QDQ artifact's weights and biases,
//!   where they run in float): computed once when the plan is built, by
//!   the same operator, and a constant for the nodes that read it.
//!
//! Then, with [`PlanOptions::blocked`] (on by default) and a dispatch row
//! with SIMD `f32` kernels, the float convolutions with constant weights
//! (ungrouped or depthwise, 2-D) and the max pools between them run on
//! blocked channels, `[N, C/16, H, W, 16]`, converted at the ends of each
//! chain only (see `layout` in the source and [`qport_kernels::nchwc`]).
//! Taps ([`Plan::run_with_tap`]) see the model's values only; profilers
//! see every step ([`Plan::run_with_step_tap`]).
//!
//! Numerics: folding and the blocked order of the sums change rounding
//! (within the FP32 parity bound against onnxruntime); results stay
//! bit-identical run to run and for any thread count.

use crate::error::EngineError;
use crate::ops::{registry, BuildCtx, Op};
use crate::optimize;
use qport_core::arith::ArithProfile;
use qport_core::compare::NonFiniteOrigin;
use qport_core::{DType, Tensor};
use qport_kernels::activation::Activation;
use qport_onnx::{Model, ValueInfo};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::Mutex;

struct Step {
    node: String,
    op_type: String,
    op: Box<dyn Op>,
    inputs: Vec<Option<usize>>,
    outputs: Vec<Option<usize>>,
    output_names: Vec<String>,
    /// Slots whose last reader is this step (or that nothing reads): after
    /// it, their storage goes back to the arena's cell (see [`Arena`]).
    frees: Vec<usize>,
    /// Its output is in the blocked channel layout, under an internal
    /// name: not reported to taps.
    blocked: bool,
    /// `(i, s)`: input `i`, slot `s`, may lend its storage to output 0
    /// ([`Op::in_place`]): `s` is a computed value whose last reader is
    /// this step, read by it once. Where the arena lays both in one cell,
    /// the step runs with input `i` moved into output 0.
    in_place: Option<(usize, usize)>,
}

/// Where a run finds the value of a slot.
#[derive(Clone, Copy)]
enum Src {
    /// `Plan::constants[i]`.
    Const(usize),
    /// The run's input `i` (in [`Plan::inputs`] order).
    Input(usize),
    /// The arena: written by a step of this run.
    Value,
}

/// The storage of one run: a tensor per live value slot, each written by
/// its step into storage that operators implementing [`Op::eval_into`]
/// reuse rather than allocate.
///
/// A value that is not a graph output lives from its step to its last
/// reader; then its storage returns to its *cell*. Slots whose lives do
/// not overlap share a cell, so the activations a run holds at once (and
/// the memory a run writes, which then stays in cache) are about the
/// largest live set, not the sum of every value.
///
/// The cells are laid out ([`lay_out_cells`]) from the element types and
/// sizes of two runs in a row on inputs of the same shapes, during which
/// every value keeps a buffer of its own: the first sizes them, the second
/// shows which operators write into the buffer they are handed. An
/// operator that returns a new tensor instead (one that does not implement
/// [`Op::eval_into`] for that case) keeps a slot of its own, outside the
/// cells, since it would shrink a shared buffer every run. The second run's
/// buffers then fill the cells, the largest buffers the largest cells, so
/// from the third run on, a run on inputs of unchanged shapes finds every
/// buffer sized. A run whose sizes differ (new input shapes) starts over.
/// Graph outputs keep their own slot and stay after the run. An operator
/// that can compute its output in the storage of an input that dies at
/// its step ([`Op::in_place`], a convolution with its residual) gets that
/// input's buffer as its output once the cells are laid out.
struct Arena {
    vals: Vec<Option<Tensor>>,
    /// Storage of the shared slots while no slot of the cell is live.
    cells: Vec<Option<Tensor>>,
    /// Per slot, its cell (`None`: not shared, or not laid out yet).
    cell_of: Vec<Option<usize>>,
    /// Whether the cells are laid out (else every value keeps its buffer).
    shared: bool,
    /// Per slot, the element type and count its step produced last.
    sizes: Vec<Option<(DType, usize)>>,
    /// The sizes of the run before (while watching), or the sizes the
    /// cells were laid out for.
    laid_for: Vec<Option<(DType, usize)>>,
    /// Per slot, whether its operator replaced a buffer big enough that it
    /// was handed: such a slot keeps its own tensor, outside the cells.
    own: Vec<bool>,
    /// A slot became `own` while the cells were laid out: lay them out
    /// again.
    relay: bool,
}

/// Node inputs passed without a heap allocation (more go in a `Vec`).
const MAX_ARGS: usize = 16;
/// Node outputs written without a heap allocation (more go in a `Vec`).
const MAX_OUTS: usize = 8;

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
    pub(crate) constants: Vec<(usize, Arc<Tensor>)>,
    inputs: Vec<(ValueInfo, usize)>,
    outputs: Vec<(String, usize)>,
    /// Per slot: where a run reads it.
    src: Vec<Src>,
    /// Arenas of finished runs, taken by the next runs (one per run in
    /// flight at a time, so concurrent runs never share one).
    arenas: Mutex<Vec<Arena>>,
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

/// The value of `node` computed once at plan time, when it is a
/// `DequantizeLinear` whose inputs are all constants (a QDQ artifact's
/// weights and biases run in float): the operator of later nodes then sees
/// a constant (a float convolution packs it once), and no step recomputes
/// it every run. The same operator computes it, so the value is the one a
/// run would produce. `None` for any other node, or when the evaluation
/// fails (the step then reports the error when the plan runs).
fn fold_constant(
    node: &qport_onnx::Node,
    op: &dyn Op,
    initializers: &BTreeMap<String, Tensor>,
) -> Option<Tensor> {
    if !(node.in_default_domain() && node.op_type == "DequantizeLinear")
        || node.outputs.len() != 1
        || node.outputs[0].is_empty()
        || initializers.contains_key(&node.outputs[0])
    {
        return None;
    }
    let args = node
        .inputs
        .iter()
        .map(|n| match n.is_empty() {
            true => Some(None),
            false => initializers.get(n).map(Some),
        })
        .collect::<Option<Vec<Option<&Tensor>>>>()?;
    let mut out = op.eval(&args).ok()?;
    (out.len() == 1).then(|| out.pop()).flatten()
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
    /// With `fuse`, run the float convolutions with constant weights on
    /// blocked channels (`[N, C/16, H, W, 16]`) between conversions at the
    /// ends of each chain, where this thread's dispatch row has SIMD
    /// `f32` kernels (AVX2 or AVX-512; see [`qport_kernels::nchwc`]). The
    /// blocked kernels sum in another order than the planar ones, so the
    /// results differ in rounding (within the FP32 parity bound); off,
    /// every Conv computes onnxruntime's single-threaded order.
    pub blocked: bool,
}

impl Default for PlanOptions {
    /// Fusion on, the blocked layout on, onnxruntime's quantized
    /// arithmetic.
    fn default() -> Self {
        PlanOptions {
            fuse: true,
            arith: ArithProfile::default(),
            blocked: true,
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
            blocked: false,
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
        let mut rewritten = optimize::rewrite(model, options.fuse);
        if options.fuse && options.blocked && crate::layout::available() {
            let outs: Vec<String> = g.outputs.iter().map(|o| o.name.clone()).collect();
            rewritten = crate::layout::block(rewritten, &outs);
        }
        let mut initializers = rewritten.initializers;
        let mut folded = BTreeSet::new();
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
                folded: &folded,
            };
            let built = match (planned.blocked, planned.act, planned.residual) {
                (Some(kind), act, residual) => crate::ops::nn::nchwc::build(
                    &ctx,
                    kind,
                    act.unwrap_or(Activation::Identity),
                    residual,
                ),
                (None, None, false) => {
                    let builder = registry()
                        .get(&node.domain, &node.op_type)
                        .expect("checked by unsupported_ops");
                    builder(&ctx)
                }
                (None, act, residual) => crate::ops::nn::conv::build_conv_fused(
                    &ctx,
                    act.unwrap_or(Activation::Identity),
                    residual,
                ),
            };
            let op = built.map_err(|source| EngineError::Node {
                node: node.name.clone(),
                op: node.qualified_op(),
                source: Box::new(source),
            })?;
            if options.fuse {
                if let Some(t) = fold_constant(node, op.as_ref(), &initializers) {
                    let name = &node.outputs[0];
                    let s = slot(name, &mut slots);
                    if produced.len() <= s {
                        produced.resize(s + 1, false);
                    }
                    produced[s] = true;
                    initializers.insert(name.clone(), t);
                    folded.insert(name.clone());
                    continue;
                }
            }
            let mut ins = vec![];
            for (i, name) in node.inputs.iter().enumerate() {
                // an empty name is an omitted input; a constant the operator
                // holds itself is not passed (nor kept, unless another step
                // reads it)
                if name.is_empty() || (op.holds_input(i) && initializers.contains_key(name)) {
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
                blocked: matches!(
                    planned.blocked,
                    Some(
                        crate::layout::LayoutStep::Conv { .. }
                            | crate::layout::LayoutStep::ToBlocked
                            | crate::layout::LayoutStep::MaxPool
                    )
                ),
                in_place: None,
            });
        }
        // constants no step reads and no output is (the int8 weights of
        // folded DequantizeLinear nodes, weights the operators hold packed)
        // are not kept
        let mut read = vec![false; slots.len()];
        for s in steps
            .iter()
            .flat_map(|st: &Step| st.inputs.iter().flatten())
        {
            read[*s] = true;
        }
        for o in &g.outputs {
            if let Some(&s) = slots.get(&o.name) {
                read[s] = true;
            }
        }
        let constants: Vec<(usize, Arc<Tensor>)> = initializers
            .into_iter()
            .map(|(name, t)| (slots[&name], t))
            .filter(|(s, _)| read[*s])
            .map(|(s, t)| (s, Arc::new(t)))
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
        let n_slots = slots.len();
        let mut src = vec![Src::Value; n_slots];
        for (i, (s, _)) in constants.iter().enumerate() {
            src[*s] = Src::Const(i);
        }
        for (i, (_, s)) in inputs.iter().enumerate() {
            src[*s] = Src::Input(i);
        }
        for st in &steps {
            for s in st.outputs.iter().flatten() {
                src[*s] = Src::Value;
            }
        }
        // the step after which each value computed by a step and not a
        // graph output is dead: its last reader, or its producer when
        // nothing reads it
        let mut last: Vec<Option<usize>> = vec![None; n_slots];
        for (i, st) in steps.iter().enumerate() {
            for s in st.inputs.iter().chain(&st.outputs).flatten() {
                if matches!(src[*s], Src::Value) {
                    last[*s] = Some(i);
                }
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
        for st in &mut steps {
            let Some(i) = st.op.in_place() else { continue };
            let Some(Some(s)) = st.inputs.get(i).copied() else {
                continue;
            };
            let once = st.inputs.iter().filter(|x| **x == Some(s)).count() == 1;
            if once && st.frees.contains(&s) && st.outputs.first().is_some_and(Option::is_some) {
                st.in_place = Some((i, s));
            }
        }
        Ok(Plan {
            steps,
            n_slots,
            constants,
            inputs,
            outputs,
            src,
            arenas: Mutex::new(vec![]),
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

    /// `(value name, op type)` for every value a step produces, in
    /// execution order (a fused step carries its first node's op type,
    /// e.g. `Conv` for a Conv with its activation).
    pub fn producers(&self) -> impl Iterator<Item = (&str, &str)> {
        self.steps.iter().flat_map(|st| {
            st.output_names
                .iter()
                .filter(|n| !n.is_empty())
                .map(move |n| (n.as_str(), st.op_type.as_str()))
        })
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
    /// a node produces, in execution order (the values of the blocked
    /// channel layout, which no node of the model produces, are not
    /// reported; see [`Plan::run_with_step_tap`]).
    pub fn run_with_tap(
        &self,
        inputs: Vec<(String, Tensor)>,
        tap: &mut dyn FnMut(&str, &Tensor),
    ) -> Result<Vec<(String, Tensor)>, EngineError> {
        self.run_steps(inputs, &mut |st, name, t| {
            if !st.blocked {
                tap(name, t)
            }
        })
    }

    /// Like [`Plan::run_with_tap`] for profilers: `tap(op, value_name,
    /// tensor)` after every step, in execution order, where `op` is the
    /// step's op type (`domain:Op` outside the default domain). Unlike
    /// [`Plan::run_with_tap`] it includes the steps of the blocked channel
    /// layout ([`PlanOptions::blocked`]), whose values have internal names
    /// and blocked shapes: the conversions `qport:ToBlocked` and
    /// `qport:ToPlanar`, and the convolutions and max pools, whose ops
    /// read `Conv [blocked]` and `MaxPool [blocked]`.
    pub fn run_with_step_tap(
        &self,
        inputs: Vec<(String, Tensor)>,
        tap: &mut dyn FnMut(&str, &str, &Tensor),
    ) -> Result<Vec<(String, Tensor)>, EngineError> {
        self.run_steps(inputs, &mut |st, name, t| {
            if st.blocked && st.op_type == "Conv" {
                tap("Conv [blocked]", name, t)
            } else if st.blocked && st.op_type == "MaxPool" {
                tap("MaxPool [blocked]", name, t)
            } else {
                tap(&st.op_type, name, t)
            }
        })
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

    /// A run context that keeps this plan's value buffers between runs:
    /// see [`Session`].
    pub fn session(&self) -> Session<'_> {
        Session {
            plan: self,
            arena: self.new_arena(),
        }
    }

    fn new_arena(&self) -> Arena {
        Arena {
            vals: (0..self.n_slots).map(|_| None).collect(),
            cells: vec![],
            cell_of: vec![None; self.n_slots],
            shared: false,
            sizes: vec![None; self.n_slots],
            laid_for: vec![None; self.n_slots],
            own: vec![false; self.n_slots],
            relay: false,
        }
    }

    /// Checks `inputs` (in [`Plan::inputs`] order) against the declared
    /// dtypes and shapes.
    fn check_inputs(&self, inputs: &[&Tensor]) -> Result<(), EngineError> {
        if inputs.len() != self.inputs.len() {
            return Err(EngineError::Graph(format!(
                "the plan takes {} input(s) ({}), {} given",
                self.inputs.len(),
                self.inputs
                    .iter()
                    .map(|(v, _)| v.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                inputs.len()
            )));
        }
        for ((vi, _), t) in self.inputs.iter().zip(inputs) {
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
        }
        Ok(())
    }

    /// Named inputs in [`Plan::inputs`] order, or the error naming the
    /// unknown or missing one.
    fn order_inputs<'t>(
        &self,
        inputs: &'t [(String, Tensor)],
    ) -> Result<Vec<&'t Tensor>, EngineError> {
        for (name, _) in inputs {
            if !self.inputs.iter().any(|(v, _)| v.name == *name) {
                return Err(EngineError::UnknownInput {
                    name: name.clone(),
                    expected: self.inputs.iter().map(|(v, _)| v.name.clone()).collect(),
                });
            }
        }
        self.inputs
            .iter()
            .map(|(vi, _)| {
                inputs
                    .iter()
                    .rev()
                    .find(|(n, _)| *n == vi.name)
                    .map(|(_, t)| t)
                    .ok_or_else(|| EngineError::MissingInput {
                        name: vi.name.clone(),
                        dtype: vi
                            .dtype
                            .map(|d| d.to_string())
                            .unwrap_or_else(|| "?".into()),
                        shape: vi.shape_string(),
                    })
            })
            .collect()
    }

    fn run_steps(
        &self,
        inputs: Vec<(String, Tensor)>,
        tap: &mut dyn FnMut(&Step, &str, &Tensor),
    ) -> Result<Vec<(String, Tensor)>, EngineError> {
        let ordered = self.order_inputs(&inputs)?;
        self.check_inputs(&ordered)?;
        let mut arena = self
            .arenas
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_else(|| self.new_arena());
        let result = self.run_arena(&mut arena, &ordered, tap);
        let outputs = result.map(|()| {
            self.outputs
                .iter()
                .map(|(n, s)| {
                    let t = match self.src[*s] {
                        Src::Const(i) => (*self.constants[i].1).clone(),
                        Src::Input(i) => ordered[i].clone(),
                        // moved out: the next run allocates this one again
                        Src::Value => arena.vals[*s].take().expect("outputs are produced"),
                    };
                    (n.clone(), t)
                })
                .collect()
        });
        self.arenas
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(arena);
        outputs
    }

    /// The value of slot `s` in a run with `inputs` and `arena`.
    fn value<'a>(
        &'a self,
        s: usize,
        inputs: &[&'a Tensor],
        arena: &'a Arena,
    ) -> Option<&'a Tensor> {
        match self.src[s] {
            Src::Const(i) => Some(&self.constants[i].1),
            Src::Input(i) => inputs.get(i).copied(),
            Src::Value => arena.vals[s].as_ref(),
        }
    }

    /// Runs every step on checked `inputs` (in [`Plan::inputs`] order),
    /// writing each step's outputs into `arena`.
    fn run_arena(
        &self,
        arena: &mut Arena,
        inputs: &[&Tensor],
        tap: &mut dyn FnMut(&Step, &str, &Tensor),
    ) -> Result<(), EngineError> {
        for st in &self.steps {
            let node_error = |source: crate::OpError| EngineError::Node {
                node: st.node.clone(),
                op: st.op_type.clone(),
                source: Box::new(source),
            };
            let mut out_buf: [Option<Tensor>; MAX_OUTS] = Default::default();
            let mut out_vec: Vec<Option<Tensor>>;
            let n_out = st.outputs.len();
            let outs: &mut [Option<Tensor>] = if n_out <= MAX_OUTS {
                &mut out_buf[..n_out]
            } else {
                out_vec = (0..n_out).map(|_| None).collect();
                &mut out_vec
            };
            // the storage handed, per output (address, capacity)
            let mut handed = [None; MAX_OUTS];
            for (i, (o, s)) in outs.iter_mut().zip(&st.outputs).enumerate() {
                if let Some(s) = s {
                    *o = arena.vals[*s].take();
                    // output 0 in the storage of the input it may take,
                    // where the cells put both in one
                    if let (0, None, Some((_, r))) = (i, o.as_ref(), st.in_place) {
                        if arena.shared
                            && arena.cell_of[r].is_some()
                            && arena.cell_of[r] == arena.cell_of[*s]
                        {
                            *o = arena.vals[r].take();
                        }
                    }
                    // (only the first MAX_OUTS outputs are watched, so
                    // only they are handed a cell's buffer)
                    let Some(h) = handed.get_mut(i) else { continue };
                    match (o.as_mut(), arena.cell_of[*s]) {
                        (None, Some(c)) => *o = arena.cells[c].take(),
                        // watching: room for one more element, so that a
                        // new exact-size buffer returned in its place
                        // differs in capacity even where the allocator
                        // hands out the freed address again
                        (Some(t), _) if !arena.shared => {
                            let (_, cap) = t.data().storage();
                            if cap == t.len() {
                                t.data_mut().reserve_exact(1);
                            }
                        }
                        _ => {}
                    }
                    *h = o.as_ref().map(|t| t.data().storage());
                }
            }
            let result = {
                let get = |s: &Option<usize>| s.and_then(|s| self.value(s, inputs, arena));
                let mut arg_buf: [Option<&Tensor>; MAX_ARGS] = [None; MAX_ARGS];
                let arg_vec: Vec<Option<&Tensor>>;
                let args: &[Option<&Tensor>] = if st.inputs.len() <= MAX_ARGS {
                    for (a, s) in arg_buf.iter_mut().zip(&st.inputs) {
                        *a = get(s);
                    }
                    &arg_buf[..st.inputs.len()]
                } else {
                    arg_vec = st.inputs.iter().map(get).collect();
                    &arg_vec
                };
                st.op.eval_into(args, outs)
            };
            let mut missing = false;
            for (o, s) in outs.iter_mut().zip(&st.outputs) {
                match s {
                    Some(s) => {
                        missing |= o.is_none();
                        arena.vals[*s] = o.take();
                    }
                    None => {
                        if let Some(t) = o.take() {
                            crate::buffers::recycle(t);
                        }
                    }
                }
            }
            result.map_err(node_error)?;
            if missing {
                return Err(node_error(crate::OpError::invalid(
                    "operator did not produce all outputs",
                )));
            }
            for (i, (s, name)) in st.outputs.iter().zip(&st.output_names).enumerate() {
                if let Some(s) = *s {
                    if let Some(t) = arena.vals[s].as_ref() {
                        arena.sizes[s] = Some((t.dtype(), t.len()));
                        if let Some((addr, cap)) = handed.get(i).copied().flatten() {
                            // a buffer big enough, replaced by a new one
                            if t.data().storage() != (addr, cap) && cap >= t.len() {
                                arena.own[s] = true;
                                arena.relay = true;
                            }
                        }
                        tap(st, name, t);
                    }
                }
            }
            if arena.shared {
                for &s in &st.frees {
                    if arena.own[s] {
                        continue;
                    }
                    let t = arena.vals[s].take();
                    if let (Some(t), Some(c)) = (t, arena.cell_of[s]) {
                        arena.cells[c] = Some(t);
                    }
                }
            }
        }
        arena.settle(&self.steps);
        Ok(())
    }
}

impl Arena {
    /// After a run: lays the cells out once two runs in a row had the same
    /// sizes (see [`Arena`]), again when an operator was found replacing
    /// its buffer, and starts watching again when the sizes change.
    fn settle(&mut self, steps: &[Step]) {
        if self.sizes != self.laid_for {
            if self.shared {
                // new shapes: every value keeps its buffer again for two
                // runs (the cells' buffers are dropped)
                self.shared = false;
                self.cells.clear();
                self.cell_of.fill(None);
                self.own.fill(false);
            }
            self.laid_for.clone_from(&self.sizes);
            self.relay = false;
            return;
        }
        if self.shared && !self.relay {
            return;
        }
        self.relay = false;
        let (cell_of, need) = lay_out_cells(steps, &self.sizes, &self.own);
        // the buffers to share: those of the cells, and (the first time)
        // those the shared slots kept while watching
        let mut pool: Vec<Tensor> = std::mem::take(&mut self.cells)
            .into_iter()
            .flatten()
            .collect();
        for (s, c) in cell_of.iter().enumerate() {
            if c.is_some() {
                pool.extend(self.vals[s].take());
            }
        }
        self.cells = fill_cells(pool, &need);
        self.cell_of = cell_of;
        self.shared = true;
    }
}

/// Cells of the element types and sizes `need`, holding the tensors of
/// `pool`: per element type, the largest tensors go to the largest cells
/// (the rest are dropped). A cell's size is that of one of its slots, so
/// when `pool` holds every shared slot's buffer, each cell gets one that
/// holds it.
fn fill_cells(mut pool: Vec<Tensor>, need: &[(DType, usize)]) -> Vec<Option<Tensor>> {
    pool.sort_by_key(|t| std::cmp::Reverse(t.data().storage().1));
    let mut order: Vec<usize> = (0..need.len()).collect();
    order.sort_by_key(|&c| std::cmp::Reverse(need[c].1));
    let mut out: Vec<Option<Tensor>> = (0..need.len()).map(|_| None).collect();
    for c in order {
        if let Some(i) = pool.iter().position(|t| t.dtype() == need[c].0) {
            out[c] = Some(pool.remove(i));
        }
    }
    out
}

/// Cells for the slots of `steps` that die within a run (those in some
/// step's `frees`) and do not keep their `own` tensor, given the element
/// type and count each had (`sizes`): walking the steps in order, each
/// such output takes a free cell of its element type (the smallest that
/// holds it, else the largest, which grows), or a new one; its cell is
/// free again after its last reader. A step's outputs never take the
/// cells its own inputs free, except where the step computes output 0 in
/// an input's storage ([`Step::in_place`]): output 0 then takes that
/// input's cell (same element type and count). Per slot, its cell; per
/// cell, its element type and the most elements it holds.
fn lay_out_cells(
    steps: &[Step],
    sizes: &[Option<(DType, usize)>],
    own: &[bool],
) -> (Vec<Option<usize>>, Vec<(DType, usize)>) {
    let n_slots = own.len();
    let mut dies = vec![false; n_slots];
    for s in steps.iter().flat_map(|st| &st.frees) {
        dies[*s] = !own[*s];
    }
    let mut cell_of = vec![None; n_slots];
    // per cell: element type and the most elements it holds
    let mut cells: Vec<(DType, usize)> = vec![];
    let mut free: Vec<usize> = vec![];
    for st in steps {
        // output 0 takes the cell of the input it may run in (of its
        // type and size), which that input frees here
        let mut lent = None;
        if let (Some((_, r)), Some(Some(o))) = (st.in_place, st.outputs.first()) {
            if let (Some(c), true, true) = (cell_of[r], dies[*o], sizes[*o] == sizes[r]) {
                cell_of[*o] = Some(c);
                lent = Some(r);
            }
        }
        for s in st.outputs.iter().flatten() {
            if cell_of[*s].is_some() {
                continue;
            }
            let Some((dtype, n)) = sizes[*s].filter(|_| dies[*s]) else {
                continue;
            };
            let same = free
                .iter()
                .enumerate()
                .filter(|(_, c)| cells[**c].0 == dtype);
            let fits = same
                .clone()
                .filter(|(_, c)| cells[**c].1 >= n)
                .min_by_key(|(_, c)| cells[**c].1);
            let pick = fits
                .or_else(|| same.max_by_key(|(_, c)| cells[**c].1))
                .map(|(i, _)| i);
            let c = match pick {
                Some(i) => free.remove(i),
                None => {
                    cells.push((dtype, 0));
                    cells.len() - 1
                }
            };
            cells[c].1 = cells[c].1.max(n);
            cell_of[*s] = Some(c);
        }
        for s in st.frees.iter().filter(|s| Some(**s) != lent) {
            if let Some(c) = cell_of[*s] {
                free.push(c);
            }
        }
    }
    (cell_of, cells)
}

/// A run context of a [`Plan`] that owns the storage of every value the
/// plan computes: values whose lives do not overlap share buffers, laid
/// out after two runs on inputs of one shape and again when the shapes
/// change. From the third run on inputs of the same shapes, every step
/// writes into a buffer already sized, and operators that implement
/// [`Op::eval_into`] (the common float and integer operators of
/// convolutional networks) allocate nothing. Results are those of
/// [`Plan::run`], bit for bit.
///
/// ```no_run
/// use qport_engine::Plan;
/// let model = qport_onnx::load::load("model.onnx").unwrap();
/// let plan = Plan::new(&model).unwrap();
/// let x = qport_core::Tensor::zeros(qport_core::DType::F32, vec![1, 3, 224, 224]).unwrap();
/// let mut session = plan.session();
/// for _ in 0..3 {
///     session.run(&[&x]).unwrap();
///     println!("{:?}", session.output(0).unwrap().shape());
/// }
/// ```
pub struct Session<'p> {
    plan: &'p Plan,
    arena: Arena,
}

impl Session<'_> {
    /// Runs the plan on `inputs`, given in [`Plan::inputs`] order; the
    /// outputs stay in the session until the next run
    /// ([`Session::output`]). Errors as [`Plan::run`].
    pub fn run(&mut self, inputs: &[&Tensor]) -> Result<(), EngineError> {
        self.run_with_tap(inputs, &mut |_, _| {})
    }

    /// Like [`Session::run`], calling `tap(value_name, tensor)` for every
    /// value a step produces, in execution order (as
    /// [`Plan::run_with_tap`]).
    pub fn run_with_tap(
        &mut self,
        inputs: &[&Tensor],
        tap: &mut dyn FnMut(&str, &Tensor),
    ) -> Result<(), EngineError> {
        let plan = self.plan;
        plan.check_inputs(inputs)?;
        plan.run_arena(&mut self.arena, inputs, &mut |st, name, t| {
            if !st.blocked {
                tap(name, t)
            }
        })?;
        // an output that is a graph input outlives this call as a copy
        for (_, s) in &plan.outputs {
            if let Src::Input(i) = plan.src[*s] {
                self.arena.vals[*s] = Some(inputs[i].clone());
            }
        }
        Ok(())
    }

    /// Graph output `i` (in [`Plan::output_names`] order) of the last
    /// successful run; `None` before one or past the last output.
    pub fn output(&self, i: usize) -> Option<&Tensor> {
        let (_, s) = self.plan.outputs.get(i)?;
        match self.plan.src[*s] {
            Src::Const(c) => Some(&self.plan.constants[c].1),
            Src::Input(_) | Src::Value => self.arena.vals[*s].as_ref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qport_core::DType;
    use qport_onnx::graph::ModelBuilder;
    use qport_onnx::{Attribute, Node};

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

    /// y = Conv(x, w, b), 3x3, padded; `w` a constant (or an input, or a
    /// constant another step reads too).
    fn conv_model(w_input: bool, w_read_twice: bool) -> (Model, Tensor) {
        let w: Vec<f32> = (0..4 * 2 * 9)
            .map(|i| (i % 7) as f32 * 0.25 - 0.7)
            .collect();
        let w = Tensor::from_vec(vec![4, 2, 3, 3], w).unwrap();
        let b = Tensor::from_vec(vec![4], vec![0.5f32, -1.0, 0.0, 2.0]).unwrap();
        let mut m = ModelBuilder::new(13).input("x", DType::F32, &[1, 2, 5, 5]);
        m = if w_input {
            m.input("w", DType::F32, &[4, 2, 3, 3])
        } else {
            m.initializer("w", w.clone())
        };
        let conv = Node::new("conv", "Conv", ["x", "w", "b"], ["y"])
            .with_attr("pads", Attribute::Ints(vec![1, 1, 1, 1]));
        m = m
            .initializer("b", b)
            .node(conv)
            .output("y", DType::F32, &[1, 4, 5, 5]);
        if w_read_twice {
            m = m
                .op("Identity", ["w"], ["w_copy"])
                .output("w_copy", DType::F32, &[4, 2, 3, 3]);
        }
        (m.build(), w)
    }

    #[test]
    fn a_weight_the_conv_holds_packed_is_not_kept_twice() {
        // the planar Conv (a blocked one holds its bias too: see `layout`)
        let planar = || PlanOptions {
            blocked: false,
            ..PlanOptions::default()
        };
        let x: Vec<f32> = (0..50).map(|i| (i % 11) as f32 * 0.3 - 1.4).collect();
        let x = Tensor::from_vec(vec![1, 2, 5, 5], x).unwrap();
        let (held, w) = conv_model(false, false);
        let plan = Plan::with_options(&held, planar()).unwrap();
        // only the bias is kept: the Conv holds the packed weight
        assert_eq!(plan.constants.len(), 1);
        let y = plan.run(vec![("x".into(), x.clone())]).unwrap();
        // the same bits as a Conv given the weight at run time
        let (fed, _) = conv_model(true, false);
        let want = Plan::with_options(&fed, planar())
            .unwrap()
            .run(vec![("x".into(), x.clone()), ("w".into(), w.clone())])
            .unwrap();
        assert_eq!(y[0].1, want[0].1);
        // a weight another step reads is kept, and reads back as given
        let (shared, _) = conv_model(false, true);
        let plan = Plan::with_options(&shared, planar()).unwrap();
        assert_eq!(plan.constants.len(), 2);
        let out = plan.run(vec![("x".into(), x)]).unwrap();
        assert_eq!(out[0].1, want[0].1);
        assert_eq!(out[1].1, w);
    }

    /// A chain whose first value lives across the others, with operators
    /// that write into the buffer they are handed (Relu, Sigmoid, Neg, Add)
    /// and one that returns new tensors (Transpose), on an input of any
    /// shape.
    fn chain_model() -> Model {
        let mut m = ModelBuilder::new(13)
            .input("x", DType::F32, &[1])
            .op("Relu", ["x"], ["a"])
            .op("Transpose", ["a"], ["t"])
            .op("Transpose", ["t"], ["b"])
            .op("Sigmoid", ["b"], ["c"])
            .op("Neg", ["c"], ["d"])
            .op("Add", ["d", "a"], ["e"])
            .op("Sigmoid", ["e"], ["f"])
            .op("Neg", ["f"], ["g"])
            .op("Relu", ["g"], ["y"])
            .output("y", DType::F32, &[1])
            .output("f", DType::F32, &[1])
            .build();
        m.graph.inputs[0].shape = None;
        m
    }

    #[test]
    fn dead_values_share_cells_and_runs_keep_their_bits() {
        let plan = Plan::new(&chain_model()).unwrap();
        let input = |shape: &[usize]| {
            let n: usize = shape.iter().product();
            let v: Vec<f32> = (0..n).map(|i| (i % 13) as f32 * 0.37 - 2.0).collect();
            Tensor::from_vec(shape.to_vec(), v).unwrap()
        };
        let mut session = plan.session();
        // new shapes start the watching over; back to the first shape too
        let shapes: [&[usize]; 9] = [
            &[2, 3],
            &[2, 3],
            &[2, 3],
            &[2, 3],
            &[40, 50],
            &[40, 50],
            &[40, 50],
            &[2, 3],
            &[2, 3],
        ];
        for (run, shape) in shapes.iter().enumerate() {
            let x = input(shape);
            let want = plan.run(vec![("x".into(), x.clone())]).unwrap();
            session.run(&[&x]).unwrap();
            for (i, (name, w)) in want.iter().enumerate() {
                assert_eq!(session.output(i).unwrap(), w, "run {run}: {name}");
            }
            let a = &session.arena;
            // shared after two runs of one shape
            let shared = !matches!(run, 0 | 4 | 7);
            assert_eq!(a.shared, shared, "run {run}");
            if shared {
                // the Transposes' values keep their own buffers; of a, c,
                // d, e and g, a lives across c and d and d until e is
                // made: three cells, the third (c's) taken again by e,
                // a's by g
                let slot_of = |n: &str| {
                    let st = plan.steps.iter().find(|st| st.output_names[0] == n);
                    st.unwrap().outputs[0].unwrap()
                };
                let cell = |n: &str| a.cell_of[slot_of(n)];
                assert!(a.own[slot_of("t")] && a.own[slot_of("b")], "run {run}");
                assert_eq!((cell("t"), cell("b")), (None, None));
                assert_eq!(a.cells.len(), 3, "run {run}");
                assert!(a.cells.iter().all(Option::is_some), "run {run}");
                assert_eq!((cell("e"), cell("g")), (cell("c"), cell("a")));
                assert_ne!(a.cell_of[slot_of("a")], a.cell_of[slot_of("c")]);
                assert_ne!(a.cell_of[slot_of("a")], a.cell_of[slot_of("d")]);
                assert_eq!(a.cell_of[slot_of("f")], None, "a graph output");
            }
        }
    }

    /// x -> Conv 3x3 + Relu -> r; r -> Conv 1x1 -> c; c -> Conv 3x3 ->
    /// d; Add(d, r) -> Relu -> a; a -> Conv 1x1 -> y. The Add fuses into
    /// the third convolution, whose residual `r` dies there, read once.
    fn residual_chain() -> Model {
        let wt = |m: usize, c: usize, k: usize, seed: usize| {
            let v = (0..m * c * k * k)
                .map(|i| (((i + seed) * 7) % 13) as f32 * 0.05 - 0.3)
                .collect();
            Tensor::from_vec(vec![m, c, k, k], v).unwrap()
        };
        let conv = |ins: [&str; 2], out: &str, k: i64| {
            Node::new(out, "Conv", ins, [out])
                .with_attr("pads", Attribute::Ints(vec![k / 2; 4]))
                .with_attr("kernel_shape", Attribute::Ints(vec![k, k]))
        };
        ModelBuilder::new(13)
            .input("x", DType::F32, &[1, 20, 9, 7])
            .initializer("w1", wt(20, 20, 3, 1))
            .initializer("w2", wt(20, 20, 1, 2))
            .initializer("w3", wt(20, 20, 3, 3))
            .initializer("w4", wt(5, 20, 1, 4))
            .node(conv(["x", "w1"], "c1", 3))
            .op("Relu", ["c1"], ["r"])
            .node(conv(["r", "w2"], "c", 1))
            .node(conv(["c", "w3"], "d", 3))
            .op("Add", ["d", "r"], ["s"])
            .op("Relu", ["s"], ["a"])
            .node(conv(["a", "w4"], "y", 1))
            .output("y", DType::F32, &[1, 5, 9, 7])
            .build()
    }

    /// Once the arena shares cells, the blocked convolution with the
    /// residual runs in the residual's buffer, and every run gives the
    /// bits of the first (the residual passed apart).
    #[test]
    fn a_residual_convolution_runs_in_the_residuals_buffer() {
        if !crate::layout::available() {
            return; // no blocked kernels on this dispatch row
        }
        let plan = Plan::new(&residual_chain()).unwrap();
        let st = plan
            .steps
            .iter()
            .position(|st| st.in_place.is_some())
            .expect("a step that may run in place");
        let (i, r) = plan.steps[st].in_place.unwrap();
        assert_eq!(i, 3);
        let o = plan.steps[st].outputs[0].unwrap();
        let x: Vec<f32> = (0..20 * 63)
            .map(|i| ((i * 11) % 19) as f32 * 0.1 - 0.9)
            .collect();
        let x = Tensor::from_vec(vec![1, 20, 9, 7], x).unwrap();
        let want = plan.run(vec![("x".into(), x.clone())]).unwrap();
        let mut session = plan.session();
        let before = crate::ops::nn::nchwc::IN_PLACE_RUNS.with(|c| c.get());
        for run in 0..5 {
            session.run(&[&x]).unwrap();
            assert_eq!(session.output(0).unwrap(), &want[0].1, "run {run}");
            let a = &session.arena;
            if a.shared {
                assert!(a.cell_of[r].is_some() && a.cell_of[r] == a.cell_of[o]);
            }
        }
        let ran = crate::ops::nn::nchwc::IN_PLACE_RUNS.with(|c| c.get()) - before;
        // runs 0 and 1 watch (the cells are laid out after run 1): runs 2,
        // 3 and 4 run in place
        assert_eq!(ran, 3);
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
