//! The operator registry and operator implementations.
//!
//! Each ONNX op type has one builder ([`OpBuilder`]) that reads the node's
//! attributes (and, when useful, constant inputs such as weights) once at
//! plan time and returns an [`Op`] that evaluates tensors at run time.
//! Builders are grouped by family in the submodules, each with a
//! `register` function called by [`registry`].

use crate::error::{OpError, OpResult};
use qport_core::Tensor;
use qport_onnx::graph::normalize_domain;
use qport_onnx::Node;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::OnceLock;

pub mod elementwise;
pub mod nn;
pub mod quant;
pub mod reduce;
pub mod shape;

/// An operator ready to evaluate.
pub trait Op: Send + Sync {
    /// Evaluates the operator. `inputs[i]` is `None` for an omitted
    /// optional input. Returns one tensor per node output (trailing optional
    /// outputs may be omitted).
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>>;

    /// Evaluates the operator into `outputs` (one entry per node output),
    /// which hold what this step wrote in the plan's previous run (or
    /// `None`): an operator that overrides this writes its results into
    /// those tensors' storage ([`reuse_output`]), so a steady-state run
    /// allocates nothing. Every entry the operator produces must be `Some`
    /// afterwards and the others `None`. The default runs [`Op::eval`],
    /// handing the old storage to the plan's buffer pool first.
    fn eval_into(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &mut [Option<Tensor>],
    ) -> OpResult<()> {
        eval_fallback(self, inputs, outputs)
    }

    /// Whether the operator holds its own copy of input `i` when that
    /// input is a constant (its weight, packed when the operator was
    /// built), and runs with `None` in its place: a [`crate::Plan`] then
    /// passes `None` and keeps no copy of the constant unless another step
    /// reads it. The default holds nothing.
    fn holds_input(&self, _i: usize) -> bool {
        false
    }

    /// An input `i` whose storage the operator can compute output 0 in:
    /// called with `inputs[i] == None` and `outputs[0]` holding that
    /// input's value (of output 0's type and size), it reads the value
    /// there and overwrites it with the output, giving the same bits as
    /// with the value passed apart. A [`crate::Plan`] lends the storage
    /// where the input dies at this step and its buffer would otherwise
    /// sit beside the output's (a residual Add fused into a convolution
    /// accumulates into the buffer of the value it adds). The default:
    /// none.
    fn in_place(&self) -> Option<usize> {
        None
    }
}

/// [`Op::eval`] into `outputs` (the default of [`Op::eval_into`], also
/// for operators whose own `eval_into` covers only some cases): the old
/// outputs' storage goes to the plan's buffer pool, where the operator's
/// kernels may take it back.
pub(crate) fn eval_fallback<O: Op + ?Sized>(
    op: &O,
    inputs: &[Option<&Tensor>],
    outputs: &mut [Option<Tensor>],
) -> OpResult<()> {
    for o in outputs.iter_mut() {
        if let Some(t) = o.take() {
            crate::buffers::recycle(t);
        }
    }
    for (o, t) in outputs.iter_mut().zip(op.eval(inputs)?) {
        *o = Some(t);
    }
    Ok(())
}

/// Output `i` of an [`Op::eval_into`] call made a tensor of `shape` and
/// element type `T`, reusing the storage it held (see
/// [`Tensor::reuse_as`]); returns its elements, which the caller must all
/// overwrite.
pub fn reuse_output<'a, T: qport_core::Element>(
    outputs: &'a mut [Option<Tensor>],
    i: usize,
    shape: &[usize],
) -> OpResult<&'a mut [T]> {
    let slot = outputs
        .get_mut(i)
        .ok_or_else(|| OpError::invalid(format!("output {i} is not wired")))?;
    let t = slot.get_or_insert_with(|| Tensor::from_vec::<T>(vec![0], vec![]).expect("empty"));
    Ok(t.reuse_as::<T>(shape)?)
}

/// No folded values (the [`BuildCtx::new`] default).
static NONE_FOLDED: BTreeSet<String> = BTreeSet::new();

/// What a builder sees at plan time.
pub struct BuildCtx<'a> {
    /// The node being built.
    pub node: &'a Node,
    /// The opset version of the node's domain imported by the model.
    pub opset: i64,
    /// Constant tensors of the graph (initializers and folded constants).
    pub initializers: &'a BTreeMap<String, Tensor>,
    /// The integer-arithmetic profile quantized operators compute under
    /// ([`qport_core::arith::ArithProfile::onnxruntime`] unless a plan asks
    /// for another; see [`crate::PlanOptions::arith`]).
    pub arith: &'a qport_core::arith::ArithProfile,
    /// The names among `initializers` that the plan computed
    /// (`DequantizeLinear` of constants, folded at plan time) rather than
    /// read from the graph.
    pub folded: &'a BTreeSet<String>,
}

impl<'a> BuildCtx<'a> {
    /// A context for `node` at `opset` with the constants `initializers`,
    /// under [`qport_core::arith::ArithProfile::onnxruntime`] (set `arith`
    /// for another profile).
    pub fn new(node: &'a Node, opset: i64, initializers: &'a BTreeMap<String, Tensor>) -> Self {
        BuildCtx {
            node,
            opset,
            initializers,
            arith: qport_core::arith::ArithProfile::onnxruntime(),
            folded: &NONE_FOLDED,
        }
    }

    /// The value of input `i` if it is one of the graph's own
    /// initializers (not a value the plan folded): what onnxruntime sees
    /// as a constant when it prepares a kernel.
    pub fn graph_constant(&self, i: usize) -> Option<&Tensor> {
        self.node
            .input(i)
            .filter(|n| !self.folded.contains(*n))
            .and_then(|n| self.initializers.get(n))
    }

    /// The constant value of input `i`, if that input is an initializer.
    pub fn const_input(&self, i: usize) -> Option<&Tensor> {
        self.node.input(i).and_then(|n| self.initializers.get(n))
    }

    /// Which of the two `choices` the node's string attribute `name`
    /// (`default` when absent) is: 0 or 1; any other value is refused.
    pub fn attr_choice(&self, name: &str, default: &str, choices: [&str; 2]) -> OpResult<usize> {
        let v = self.node.attr_string(name, default)?;
        choices.iter().position(|&c| c == v).ok_or_else(|| {
            OpError::invalid(format!(
                "attribute {name} is '{v}', expected '{}' or '{}'",
                choices[0], choices[1]
            ))
        })
    }

    /// The node's `int` attribute `name`, `None` when absent (for
    /// attributes whose absence means something other than a default).
    pub fn opt_int(&self, name: &str) -> OpResult<Option<i64>> {
        Ok(self
            .node
            .attr(name)
            .map(|_| self.node.attr_int(name, 0))
            .transpose()?)
    }
}

/// Builds an [`Op`] from a node.
pub type OpBuilder = fn(&BuildCtx) -> OpResult<Box<dyn Op>>;

/// An [`Op`] defined by a closure, for operators with no plan-time state
/// beyond captured attributes.
pub struct FnOp<F>(pub F);

impl<F> Op for FnOp<F>
where
    F: Fn(&[Option<&Tensor>]) -> OpResult<Vec<Tensor>> + Send + Sync,
{
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
        (self.0)(inputs)
    }
}

/// Boxes a closure as an [`Op`].
pub fn fn_op<F>(f: F) -> Box<dyn Op>
where
    F: Fn(&[Option<&Tensor>]) -> OpResult<Vec<Tensor>> + Send + Sync + 'static,
{
    Box::new(FnOp(f))
}

/// Operator builders keyed by (domain, op type).
#[derive(Default)]
pub struct Registry {
    map: HashMap<(String, String), OpBuilder>,
}

impl Registry {
    /// Registers a builder for an op type of the default ONNX domain.
    pub fn register(&mut self, op_type: &str, builder: OpBuilder) {
        self.register_in("", op_type, builder);
    }

    /// Registers a builder for an op type of `domain`.
    pub fn register_in(&mut self, domain: &str, op_type: &str, builder: OpBuilder) {
        self.map
            .insert((normalize_domain(domain).into(), op_type.into()), builder);
    }

    /// Registers each `(op type, builder)` pair for `domain`.
    pub fn register_all(&mut self, domain: &str, builders: &[(&str, OpBuilder)]) {
        for &(op_type, builder) in builders {
            self.register_in(domain, op_type, builder);
        }
    }

    /// The builder for `op_type` in `domain`, if supported.
    pub fn get(&self, domain: &str, op_type: &str) -> Option<OpBuilder> {
        self.map
            .get(&(normalize_domain(domain).into(), op_type.into()))
            .copied()
    }

    /// All supported `(domain, op_type)` pairs, sorted.
    pub fn supported(&self) -> Vec<(String, String)> {
        let mut v: Vec<_> = self.map.keys().cloned().collect();
        v.sort();
        v
    }
}

/// The global registry with every operator qport implements.
pub fn registry() -> &'static Registry {
    static REG: OnceLock<Registry> = OnceLock::new();
    REG.get_or_init(|| {
        let mut r = Registry::default();
        elementwise::register(&mut r);
        reduce::register(&mut r);
        nn::register(&mut r);
        shape::register(&mut r);
        quant::register(&mut r);
        r
    })
}

/// Input `i`, which must be present.
pub fn input<'a>(inputs: &[Option<&'a Tensor>], i: usize) -> OpResult<&'a Tensor> {
    inputs
        .get(i)
        .copied()
        .flatten()
        .ok_or_else(|| OpError::invalid(format!("required input {i} is missing")))
}

/// Input `i` if present.
pub fn opt_input<'a>(inputs: &[Option<&'a Tensor>], i: usize) -> Option<&'a Tensor> {
    inputs.get(i).copied().flatten()
}
