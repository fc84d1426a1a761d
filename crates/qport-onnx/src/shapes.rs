//! Static shape inference through the graph, and fixing a model's input
//! shapes.
//!
//! [`infer_shapes`] walks the nodes in order and derives the element type
//! and dimensions of every value from the graph inputs, the initializers and
//! the operators' attributes, without running anything. Small integer
//! tensors (shape vectors: `Shape`, `Gather`, `Concat`, `Slice`, constants)
//! are followed by value, so `Shape → Gather → Concat → Reshape` chains
//! resolve once the input shapes are fixed. Symbolic dimensions (`N`,
//! `seq`) pass through operators that keep them (elementwise, transpose,
//! concatenation on another axis, ...); where a dimension cannot be
//! derived, [`ShapeInference::origin`] says why: a dynamic dimension of a
//! graph input, or the node that stops inference and its reason (an
//! operator without a static rule, a non-constant `Reshape` shape, ...).
//!
//! [`fix_input_shapes`] is what onnxruntime's `make_dynamic_shape_fixed`
//! and vendor compilers' `input_shape` do: it sets the dimensions of named
//! graph inputs (checking rank and every fixed dimension), substitutes each
//! symbolic dimension it binds everywhere it is declared, infers the rest
//! and writes the inferred shapes into the declared graph outputs and
//! `value_info`.
//!
//! ```
//! use qport_core::DType;
//! use qport_onnx::{graph::ModelBuilder, shapes, Attribute, Dim, Node};
//! let mut m = ModelBuilder::new(13)
//!     .input("x", DType::F32, &[1, 3, 0, 0])
//!     .node(Node::new("pool", "MaxPool", ["x"], ["y"])
//!         .with_attr("kernel_shape", Attribute::Ints(vec![2, 2]))
//!         .with_attr("strides", Attribute::Ints(vec![2, 2])))
//!     .output("y", DType::F32, &[1, 3, 0, 0])
//!     .build();
//! m.graph.inputs[0].shape.as_mut().unwrap()[2] = Dim::Param("h".into());
//! m.graph.inputs[0].shape.as_mut().unwrap()[3] = Dim::Param("w".into());
//! m.graph.outputs[0].shape = None;
//! let given: Vec<shapes::InputShape> = vec!["x=1,3,64,48".parse().unwrap()];
//! let (fixed, inferred) = shapes::fix_input_shapes(&m, &given).unwrap();
//! assert_eq!(fixed.graph.outputs[0].shape_string(), "[1,3,32,24]");
//! assert_eq!(inferred.concrete("y"), Some(vec![1, 3, 32, 24]));
//! ```

mod ops;
pub mod window;

use crate::infer::{concrete_shape, value_types};
use crate::model::{Dim, Model, ValueInfo};
use std::collections::{BTreeMap, HashMap};

/// A fixed shape for one graph input, written `NAME=D0,D1,...`
/// (`images=1,3,640,640`); the name is everything before the last `=`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputShape {
    /// Graph input name.
    pub name: String,
    /// The dimensions.
    pub dims: Vec<u64>,
}

impl std::str::FromStr for InputShape {
    type Err = String;

    /// Parses `NAME=D0,D1,...`; every dimension a whole number, a scalar
    /// input written `NAME=`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, dims) = s
            .rsplit_once('=')
            .ok_or_else(|| format!("`{s}` is not NAME=D0,D1,... (e.g. images=1,3,640,640)"))?;
        let name = name.trim();
        if name.is_empty() {
            return Err(format!("`{s}` has no input name before `=`"));
        }
        let dims = dims
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(|d| {
                d.parse::<u64>().map_err(|_| {
                    format!("`{s}`: dimension `{d}` is not a whole number (sizes are >= 0)")
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(InputShape {
            name: name.to_string(),
            dims,
        })
    }
}

impl std::fmt::Display for InputShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.name, join(&self.dims))
    }
}

/// Why a value's shape is not fully known statically.
#[derive(Debug, Clone, PartialEq)]
pub enum Origin {
    /// A dynamic (symbolic or unknown) dimension of a graph input, or an
    /// input whose rank is not declared (`axis` `None`).
    Input {
        /// The graph input.
        input: String,
        /// The first dynamic axis.
        axis: Option<usize>,
        /// That dimension as declared.
        dim: Dim,
    },
    /// A node whose output shape cannot be derived statically.
    Node {
        /// Node name.
        node: String,
        /// Op type (`domain:Op` outside the default domain).
        op: String,
        /// Why, e.g. `input 1 (shape) is not a constant`.
        reason: String,
    },
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Input {
                input,
                axis: Some(a),
                dim,
            } => write!(f, "dimension {a} (`{dim}`) of input `{input}` is dynamic"),
            Origin::Input { input, .. } => write!(f, "the rank of input `{input}` is not declared"),
            Origin::Node { node, op, reason } => {
                write!(f, "node `{node}` ({op}) stops shape inference: {reason}")
            }
        }
    }
}

/// A node whose inferred input shapes contradict its operator (a
/// `Concat` of different heights, a `Reshape` to a different element
/// count, ...): the graph cannot run with these shapes.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflict {
    /// Node name.
    pub node: String,
    /// Op type.
    pub op: String,
    /// What contradicts what.
    pub reason: String,
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "node `{}` ({}): {}", self.node, self.op, self.reason)
    }
}

/// What [`infer_shapes`] found.
#[derive(Debug, Clone, Default)]
pub struct ShapeInference {
    values: BTreeMap<String, ValueInfo>,
    origins: HashMap<String, Origin>,
    conflicts: Vec<Conflict>,
}

impl ShapeInference {
    /// Dtype and (possibly partial) shape of every value seen: graph
    /// inputs, initializers and node outputs, by name.
    pub fn values(&self) -> &BTreeMap<String, ValueInfo> {
        &self.values
    }

    /// What is known about `name`.
    pub fn value(&self, name: &str) -> Option<&ValueInfo> {
        self.values.get(name)
    }

    /// The shape of `name` when every dimension is known.
    pub fn concrete(&self, name: &str) -> Option<Vec<usize>> {
        concrete_shape(self.values.get(name)?)
    }

    /// Why `name`'s shape is not fully known (`None` when it is, or when
    /// no node produces it).
    pub fn origin(&self, name: &str) -> Option<&Origin> {
        self.origins.get(name)
    }

    /// Nodes whose inferred shapes contradict their operator.
    pub fn conflicts(&self) -> &[Conflict] {
        &self.conflicts
    }
}

/// Why [`fix_input_shapes`] refused.
#[derive(Debug, thiserror::Error)]
pub enum ShapeError {
    /// The name is not a graph input.
    #[error("the model has no input `{name}`; its inputs: {inputs}")]
    UnknownInput {
        /// The name given.
        name: String,
        /// The graph inputs with their declared shapes.
        inputs: String,
    },
    /// The same input was given twice.
    #[error("input `{name}` is given two shapes")]
    Duplicate {
        /// The input.
        name: String,
    },
    /// The rank differs from the declared one.
    #[error("input `{name}` has rank {declared_rank} ({declared}), the shape given [{}] has rank {}", join(given), given.len())]
    Rank {
        /// The input.
        name: String,
        /// Declared shape, e.g. `[1,3,height,width]`.
        declared: String,
        /// Declared rank.
        declared_rank: usize,
        /// The dimensions given.
        given: Vec<u64>,
    },
    /// A fixed dimension was given another size.
    #[error("input `{name}` dimension {axis} is fixed at {declared} in the model ({shape}); the shape given has {given}")]
    Contradicts {
        /// The input.
        name: String,
        /// The axis.
        axis: usize,
        /// Its declared size.
        declared: u64,
        /// The size given.
        given: u64,
        /// Declared shape.
        shape: String,
    },
    /// One symbolic dimension was given two sizes.
    #[error("symbolic dimension `{param}` is {first} in input `{first_input}` but {second} in input `{second_input}`")]
    ParamConflict {
        /// The symbolic dimension.
        param: String,
        /// First size and where.
        first: u64,
        /// Input of the first size.
        first_input: String,
        /// Second size.
        second: u64,
        /// Input of the second size.
        second_input: String,
    },
    /// The shapes make a node inconsistent.
    #[error("with these input shapes the graph cannot run: {0}")]
    Inconsistent(Conflict),
    /// An inferred output shape contradicts the model's declaration.
    #[error("output `{name}` is declared {declared} but these input shapes give {inferred}")]
    Output {
        /// Output name.
        name: String,
        /// Declared shape.
        declared: String,
        /// Inferred shape.
        inferred: String,
    },
}

fn join(dims: &[u64]) -> String {
    let d: Vec<String> = dims.iter().map(u64::to_string).collect();
    d.join(",")
}

fn is_static(v: &ValueInfo) -> bool {
    concrete_shape(v).is_some()
}

fn first_dynamic(v: &ValueInfo) -> Option<Origin> {
    let Some(dims) = &v.shape else {
        return Some(Origin::Input {
            input: v.name.clone(),
            axis: None,
            dim: Dim::Unknown,
        });
    };
    dims.iter()
        .enumerate()
        .find(|(_, d)| !matches!(d, Dim::Known(_)))
        .map(|(a, d)| Origin::Input {
            input: v.name.clone(),
            axis: Some(a),
            dim: d.clone(),
        })
}

/// Integer constants followed by value: at most this many elements.
const MAX_TRACKED: usize = 1024;

/// Infers the dtype and shape of every value of `model`'s main graph; see
/// the [module docs](self). Never fails: what cannot be derived stays
/// unknown with an [`Origin`], contradictions are listed as
/// [`Conflict`]s. Declared `value_info` fills dimensions inference leaves
/// unknown.
pub fn infer_shapes(model: &Model) -> ShapeInference {
    let g = &model.graph;
    let declared = value_types(model);
    let mut st = ShapeInference::default();
    let mut consts: HashMap<String, Vec<i64>> = HashMap::new();
    let mut value_origins: HashMap<String, Origin> = HashMap::new();
    for (name, t) in &g.initializers {
        st.values
            .insert(name.clone(), ValueInfo::known(name, t.dtype(), t.shape()));
        if t.dtype().is_int() && t.len() <= MAX_TRACKED {
            if let Ok(v) = t.to_i64_vec() {
                consts.insert(name.clone(), v);
            }
        }
    }
    for vi in g
        .inputs
        .iter()
        .filter(|v| !g.initializers.contains_key(&v.name))
    {
        if let Some(o) = first_dynamic(vi) {
            st.origins.insert(vi.name.clone(), o);
        }
        st.values.insert(vi.name.clone(), vi.clone());
    }
    for node in &g.nodes {
        let opset = model
            .opset(&node.domain)
            .unwrap_or(if node.in_default_domain() { 21 } else { 1 });
        let ins: Vec<Option<&ValueInfo>> = node
            .inputs
            .iter()
            .map(|n| (!n.is_empty()).then(|| st.values.get(n)).flatten())
            .collect();
        let vals: Vec<Option<&[i64]>> = node
            .inputs
            .iter()
            .map(|n| consts.get(n).map(Vec::as_slice))
            .collect();
        let ctx = ops::Ctx {
            node,
            opset,
            ins,
            vals,
            inits: &g.initializers,
        };
        let op = node.qualified_op();
        let here = |reason: String| Origin::Node {
            node: node.name.clone(),
            op: op.clone(),
            reason,
        };
        // the origin inherited from the first input that is not static
        let inherited = node.inputs.iter().find_map(|n| st.origins.get(n)).cloned();
        let (outs, own) = match ops::infer(&ctx) {
            Ok(outs) => (outs, None),
            Err(ops::Fail::Unknown(cause)) => {
                let o = match cause {
                    ops::Cause::Node(reason) => here(reason),
                    ops::Cause::ShapeOf(i) => {
                        let input = node.inputs.get(i).map_or("", String::as_str);
                        st.origins.get(input).cloned().unwrap_or_else(|| {
                            here(format!("the shape of input {i} (`{input}`) is unknown"))
                        })
                    }
                    ops::Cause::ValueOf(i) => {
                        let input = node.inputs.get(i).map_or("", String::as_str);
                        value_origins
                            .get(input)
                            .or_else(|| st.origins.get(input))
                            .cloned()
                            .unwrap_or_else(|| {
                                here(format!("input {i} (`{input}`) is not a constant"))
                            })
                    }
                };
                (vec![], Some(o))
            }
            Err(ops::Fail::Invalid(reason)) => {
                st.conflicts.push(Conflict {
                    node: node.name.clone(),
                    op: op.clone(),
                    reason: reason.clone(),
                });
                (vec![], Some(here(reason)))
            }
        };
        let input_value_origin = node
            .inputs
            .iter()
            .find_map(|n| value_origins.get(n).or_else(|| st.origins.get(n)))
            .cloned();
        for (i, name) in node.outputs.iter().enumerate() {
            if name.is_empty() {
                continue;
            }
            let out = outs.get(i).cloned().unwrap_or_default();
            let mut vi = ValueInfo {
                name: name.clone(),
                dtype: out.dtype,
                shape: out.dims,
            };
            if let Some(d) = declared.get(name) {
                vi = fill_unknown(&vi, d);
            }
            if !is_static(&vi) {
                let o = own
                    .clone()
                    .or_else(|| inherited.clone())
                    .unwrap_or_else(|| {
                        here("its output shape is not determined statically".into())
                    });
                st.origins.insert(name.clone(), o);
            }
            match out.value {
                Some(v) if v.len() <= MAX_TRACKED => {
                    consts.insert(name.clone(), v);
                }
                _ => {
                    if let Some(o) = own.clone().or_else(|| input_value_origin.clone()) {
                        value_origins.insert(name.clone(), o);
                    }
                }
            }
            st.values.insert(name.clone(), vi);
        }
    }
    st
}

/// `inferred` with its unknown parts taken from `declared` (dtype, rank,
/// or single dimensions).
fn fill_unknown(inferred: &ValueInfo, declared: &ValueInfo) -> ValueInfo {
    let shape = match (&inferred.shape, &declared.shape) {
        (None, d) => d.clone(),
        (Some(i), Some(d)) if i.len() == d.len() => Some(
            i.iter()
                .zip(d)
                .map(|(a, b)| match (a, b) {
                    (Dim::Known(_), _) => a.clone(),
                    (_, Dim::Known(_)) => b.clone(),
                    (Dim::Unknown, Dim::Param(_)) => b.clone(),
                    _ => a.clone(),
                })
                .collect(),
        ),
        (i, _) => i.clone(),
    };
    ValueInfo {
        name: inferred.name.clone(),
        dtype: inferred.dtype.or(declared.dtype),
        shape,
    }
}

/// A model's graph inputs with their declared shapes, for messages:
/// `images [1,3,height,width], mask [1,seq]`.
pub fn describe_inputs(model: &Model) -> String {
    let g = &model.graph;
    let v: Vec<String> = g
        .inputs
        .iter()
        .filter(|i| !g.initializers.contains_key(&i.name))
        .map(|i| format!("{} {}", i.name, i.shape_string()))
        .collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

fn substitute(vi: &mut ValueInfo, bound: &HashMap<String, (u64, String)>) {
    for d in vi.shape.iter_mut().flatten() {
        if let Dim::Param(p) = d {
            if let Some((k, _)) = bound.get(p.as_str()) {
                *d = Dim::Known(*k);
            }
        }
    }
}

/// Checks `shapes` against `model`'s inputs, fixes them, and infers the
/// rest; see the [module docs](self). Returns the fixed model (inputs,
/// outputs and `value_info` with the fixed and inferred dimensions) and
/// the inference over it. With no `shapes` it only infers and fills in the
/// declared outputs.
///
/// Errors: an unknown or repeated input name, a wrong rank, a size that
/// contradicts a fixed dimension, one symbolic dimension bound to two
/// sizes, shapes under which a node's operator is inconsistent, or an
/// inferred output that contradicts the declared one.
pub fn fix_input_shapes(
    model: &Model,
    shapes: &[InputShape],
) -> Result<(Model, ShapeInference), ShapeError> {
    let mut fixed = model.clone();
    let g = &mut fixed.graph;
    let mut bound: HashMap<String, (u64, String)> = HashMap::new();
    for (k, s) in shapes.iter().enumerate() {
        if shapes[..k].iter().any(|p| p.name == s.name) {
            return Err(ShapeError::Duplicate {
                name: s.name.clone(),
            });
        }
        let Some(vi) = g
            .inputs
            .iter_mut()
            .find(|v| v.name == s.name && !model.graph.initializers.contains_key(&v.name))
        else {
            return Err(ShapeError::UnknownInput {
                name: s.name.clone(),
                inputs: describe_inputs(model),
            });
        };
        if let Some(dims) = &vi.shape {
            if dims.len() != s.dims.len() {
                return Err(ShapeError::Rank {
                    name: s.name.clone(),
                    declared: vi.shape_string(),
                    declared_rank: dims.len(),
                    given: s.dims.clone(),
                });
            }
            for (axis, (d, &want)) in dims.iter().zip(&s.dims).enumerate() {
                match d {
                    Dim::Known(k) if *k != want => {
                        return Err(ShapeError::Contradicts {
                            name: s.name.clone(),
                            axis,
                            declared: *k,
                            given: want,
                            shape: vi.shape_string(),
                        })
                    }
                    // exporters write `?` for an anonymous dynamic size
                    Dim::Param(p) if p != "?" => match bound.get(p) {
                        Some((k, first)) if *k != want => {
                            return Err(ShapeError::ParamConflict {
                                param: p.clone(),
                                first: *k,
                                first_input: first.clone(),
                                second: want,
                                second_input: s.name.clone(),
                            })
                        }
                        _ => {
                            bound.insert(p.clone(), (want, s.name.clone()));
                        }
                    },
                    _ => {}
                }
            }
        }
        vi.shape = Some(s.dims.iter().map(|&d| Dim::Known(d)).collect());
    }
    for vi in g
        .inputs
        .iter_mut()
        .chain(g.outputs.iter_mut())
        .chain(g.value_info.iter_mut())
    {
        substitute(vi, &bound);
    }
    let inferred = infer_shapes(&fixed);
    if let Some(c) = inferred.conflicts.first() {
        return Err(ShapeError::Inconsistent(c.clone()));
    }
    let g = &mut fixed.graph;
    for vi in g.outputs.iter_mut().chain(g.value_info.iter_mut()) {
        let Some(inf) = inferred.values.get(&vi.name) else {
            continue;
        };
        if let (Some(d), Some(i)) = (&vi.shape, &inf.shape) {
            let clash = d.len() != i.len()
                || d.iter()
                    .zip(i)
                    .any(|(a, b)| matches!((a, b), (Dim::Known(x), Dim::Known(y)) if x != y));
            if clash {
                return Err(ShapeError::Output {
                    name: vi.name.clone(),
                    declared: vi.shape_string(),
                    inferred: inf.shape_string(),
                });
            }
        }
        *vi = fill_unknown(inf, vi);
    }
    Ok((fixed, inferred))
}

#[cfg(test)]
mod tests;
