//! Reading ONNX files into the IR.
//!
//! [`load`] / [`from_bytes`] / [`from_vec`] decode a `ModelProto` and convert it with
//! [`model_from_proto`]:
//!
//! - initializers become [`qport_core::Tensor`]s (see
//!   [`crate::tensor::tensor_from_proto`] for data layouts and external data);
//! - `Constant` nodes are folded into initializers (attributes `value`,
//!   `value_float(s)`, `value_int(s)`, `value_string(s)`), in subgraphs too;
//! - graph inputs that are also initializers are dropped from
//!   [`Graph::inputs`](crate::Graph::inputs) (they are constants);
//! - unnamed nodes are named `<op_type>_<index>` (index in the file's node
//!   list), and duplicate names get a suffix, so names are unique;
//! - the graph is validated and put in topological order
//!   ([`crate::validate::sort_topologically`]).
//!
//! Any malformed input gives an [`OnnxError`]; nothing panics and no size
//! declared in the file is allocated before it is checked against the data
//! actually present.

use crate::error::{OnnxError, Result};
use crate::model::{Attribute, Dim, Graph, Model, Node, ValueInfo};
use crate::proto::attribute_proto::AttributeType;
use crate::proto::{self, type_proto, ModelProto};
use crate::tensor::{parent_dir, tensor_from_proto};
use prost::Message;
use qport_core::{DType, Tensor};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

/// Reads and converts the ONNX model at `path`. External tensor data is
/// resolved relative to the file's directory.
pub fn load(path: impl AsRef<Path>) -> Result<Model> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|source| OnnxError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    from_vec(bytes, Some(parent_dir(path)))
}

/// Decodes and converts a serialized ONNX model. `base_dir` is where
/// external tensor data files live; without it, a model with external
/// data is refused.
pub fn from_bytes(bytes: &[u8], base_dir: Option<&Path>) -> Result<Model> {
    decode(bytes, bytes, base_dir)
}

/// [`from_bytes`] taking the buffer: the decoded tensor payloads are
/// slices of it rather than copies, so loading holds the weights twice at
/// most (the file and the model), not three times.
///
/// ```
/// use qport_core::{DType, Tensor, TensorData};
/// use qport_onnx::ModelBuilder;
/// let w = Tensor::new(vec![2], TensorData::F32(vec![1.5, -2.0])).unwrap();
/// let model = ModelBuilder::new(13)
///     .input("x", DType::F32, &[2])
///     .initializer("w", w.clone())
///     .op("Add", ["x", "w"], ["y"])
///     .output("y", DType::F32, &[2])
///     .build();
/// let back = qport_onnx::load::from_vec(qport_onnx::to_bytes(&model), None).unwrap();
/// assert_eq!(back.graph.initializers["w"], w);
/// ```
pub fn from_vec(bytes: Vec<u8>, base_dir: Option<&Path>) -> Result<Model> {
    let buf = prost::bytes::Bytes::from(bytes);
    decode(&buf, buf.clone(), base_dir)
}

/// Decodes `buf` (the same bytes as `bytes`) and converts the model.
fn decode(bytes: &[u8], buf: impl prost::bytes::Buf, base_dir: Option<&Path>) -> Result<Model> {
    if bytes.is_empty() {
        return Err(OnnxError::Decode("the input is empty (0 bytes)".into()));
    }
    let text_hint = if looks_like_text(bytes) {
        "; the input looks like a text file, not a binary ONNX protobuf"
    } else {
        ""
    };
    let proto = ModelProto::decode(buf)
        .map_err(|e| OnnxError::Decode(format!("{e} (truncated or corrupted file?){text_hint}")))?;
    if proto.graph.is_none() {
        let what = if proto.ir_version.is_none() && proto.opset_import.is_empty() {
            "it has no graph, ir_version or opset_import: this is not an ONNX model"
        } else {
            "the model has no graph"
        };
        return Err(OnnxError::Malformed(format!("{what}{text_hint}")));
    }
    model_from_proto(&proto, base_dir).map_err(|e| {
        if text_hint.is_empty() {
            e
        } else {
            OnnxError::Malformed(format!("{e}{text_hint}"))
        }
    })
}

/// True when the first bytes are printable text (ASCII or UTF-8).
fn looks_like_text(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(512)];
    let s = match std::str::from_utf8(head) {
        Ok(s) => s,
        // A multi-byte character may be cut at the end of the window.
        Err(e) if e.valid_up_to() + 4 > head.len() => {
            std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or("")
        }
        Err(_) => return false,
    };
    !s.is_empty()
        && s.chars()
            .all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t'))
}

/// Converts a decoded `ModelProto` to the IR, validating and ordering the
/// graph. See the module docs for what the conversion does.
pub fn model_from_proto(proto: &ModelProto, base_dir: Option<&Path>) -> Result<Model> {
    let g = proto
        .graph
        .as_ref()
        .ok_or_else(|| OnnxError::Malformed("the model has no graph".into()))?;
    let functions: HashSet<(String, String)> = proto
        .functions
        .iter()
        .map(|f| (norm_domain(f.domain()), f.name().to_string()))
        .collect();
    let ctx = Ctx {
        base_dir,
        functions,
    };
    let mut graph = ctx.graph(g)?;
    crate::validate::sort_topologically(&mut graph)?;
    Ok(Model {
        ir_version: proto.ir_version(),
        opset_imports: proto
            .opset_import
            .iter()
            .map(|o| (o.domain().to_string(), o.version()))
            .collect(),
        producer_name: proto.producer_name().to_string(),
        producer_version: proto.producer_version().to_string(),
        domain: proto.domain().to_string(),
        model_version: proto.model_version(),
        doc_string: proto.doc_string().to_string(),
        metadata: proto
            .metadata_props
            .iter()
            .map(|kv| (kv.key().to_string(), kv.value().to_string()))
            .collect(),
        graph,
    })
}

fn norm_domain(d: &str) -> String {
    crate::graph::normalize_domain(d).to_string()
}

/// Converts a `ValueInfoProto`: tensor types give dtype and shape; other
/// types (sequences, maps, optionals) and unsupported element types leave
/// them `None`.
pub fn value_info_from_proto(v: &proto::ValueInfoProto) -> ValueInfo {
    let mut out = ValueInfo {
        name: v.name().to_string(),
        dtype: None,
        shape: None,
    };
    if let Some(type_proto::Value::TensorType(t)) = v.r#type.as_ref().and_then(|t| t.value.as_ref())
    {
        out.dtype = DType::from_onnx_code(t.elem_type());
        out.shape = t.shape.as_ref().map(|s| {
            s.dim
                .iter()
                .map(|d| match &d.value {
                    Some(proto::tensor_shape_proto::dimension::Value::DimValue(v)) if *v >= 0 => {
                        Dim::Known(*v as u64)
                    }
                    Some(proto::tensor_shape_proto::dimension::Value::DimParam(p))
                        if !p.is_empty() =>
                    {
                        Dim::Param(p.clone())
                    }
                    _ => Dim::Unknown,
                })
                .collect()
        });
    }
    out
}

/// Conversion context shared by a model's graph and its subgraphs.
struct Ctx<'a> {
    base_dir: Option<&'a Path>,
    /// Model-local functions as (domain, name); not supported.
    functions: HashSet<(String, String)>,
}

impl Ctx<'_> {
    fn graph(&self, g: &proto::GraphProto) -> Result<Graph> {
        let gname = g.name();
        if let Some(sp) = g.sparse_initializer.first() {
            let name = sp.values.as_ref().map(|v| v.name()).unwrap_or("");
            return Err(OnnxError::Malformed(format!(
                "graph '{gname}': sparse initializer '{name}' is not supported \
                 (store it as a dense initializer)"
            )));
        }
        let mut initializers = BTreeMap::new();
        for (i, tp) in g.initializer.iter().enumerate() {
            if tp.name().is_empty() {
                return Err(OnnxError::Malformed(format!(
                    "graph '{gname}': initializer #{i} has no name"
                )));
            }
            let t = tensor_from_proto(tp, self.base_dir)?;
            if initializers.insert(tp.name().to_string(), t).is_some() {
                return Err(OnnxError::Invalid(format!(
                    "graph '{gname}': initializer '{}' is defined twice",
                    tp.name()
                )));
            }
        }
        let inputs: Vec<ValueInfo> = g
            .input
            .iter()
            .map(value_info_from_proto)
            .filter(|v| !initializers.contains_key(&v.name))
            .collect();
        let input_names: HashSet<&str> = inputs.iter().map(|v| v.name.as_str()).collect();

        let names = unique_names(&g.node);
        let mut nodes = Vec::with_capacity(g.node.len());
        for (np, name) in g.node.iter().zip(names) {
            let node = self.node(np, name)?;
            if node.is_onnx("Constant") {
                let (out, t) = fold_constant(&node)?;
                if input_names.contains(out.as_str()) || initializers.contains_key(&out) {
                    return Err(OnnxError::Invalid(format!(
                        "value '{out}' has two producers: Constant node '{}' and {}",
                        node.name,
                        if input_names.contains(out.as_str()) {
                            "the graph input"
                        } else {
                            "an initializer"
                        }
                    )));
                }
                initializers.insert(out, t);
            } else {
                nodes.push(node);
            }
        }
        Ok(Graph {
            name: gname.to_string(),
            nodes,
            inputs,
            outputs: g.output.iter().map(value_info_from_proto).collect(),
            initializers,
            value_info: g
                .value_info
                .iter()
                .filter(|v| !v.name().is_empty())
                .map(value_info_from_proto)
                .collect(),
            doc_string: g.doc_string().to_string(),
        })
    }

    fn node(&self, np: &proto::NodeProto, name: String) -> Result<Node> {
        let domain = norm_domain(np.domain());
        let op_type = np.op_type().to_string();
        if self.functions.contains(&(domain.clone(), op_type.clone())) {
            let d = if domain.is_empty() {
                String::new()
            } else {
                format!("{domain}.")
            };
            return Err(OnnxError::Malformed(format!(
                "node '{name}' calls the model-local function '{d}{op_type}'; ONNX functions \
                 are not supported (inline them first, e.g. with onnx.inliner)"
            )));
        }
        let mut node = Node {
            name,
            op_type,
            domain,
            inputs: np.input.clone(),
            outputs: np.output.clone(),
            attributes: BTreeMap::new(),
            doc_string: np.doc_string().to_string(),
        };
        for a in &np.attribute {
            let value = self.attribute(a).map_err(|reason| OnnxError::Attribute {
                node: node.name.clone(),
                op: node.op_type.clone(),
                attr: a.name().to_string(),
                reason,
            })?;
            if node
                .attributes
                .insert(a.name().to_string(), value)
                .is_some()
            {
                return Err(OnnxError::Attribute {
                    node: node.name,
                    op: node.op_type,
                    attr: a.name().to_string(),
                    reason: "given twice".into(),
                });
            }
        }
        Ok(node)
    }

    /// One attribute; errors are reasons, wrapped by the caller.
    fn attribute(&self, a: &proto::AttributeProto) -> std::result::Result<Attribute, String> {
        if a.name().is_empty() {
            return Err("attribute has no name".into());
        }
        if a.ref_attr_name.is_some() {
            return Err(
                "refers to a function attribute (ref_attr_name), valid only inside functions"
                    .into(),
            );
        }
        let ty = match a.r#type {
            Some(t) if t != 0 => {
                AttributeType::try_from(t).map_err(|_| format!("unknown attribute type {t}"))?
            }
            _ => infer_attr_type(a)?,
        };
        let tensor = |t: &proto::TensorProto| {
            tensor_from_proto(t, self.base_dir).map_err(|e| match e {
                OnnxError::Tensor { reason, .. } => reason,
                other => other.to_string(),
            })
        };
        let graph = |g: &proto::GraphProto| self.graph(g).map_err(|e| format!("in subgraph: {e}"));
        Ok(match ty {
            AttributeType::Float => Attribute::Float(a.f()),
            AttributeType::Int => Attribute::Int(a.i()),
            AttributeType::String => Attribute::String(a.s().to_vec()),
            AttributeType::Tensor => Attribute::Tensor(tensor(
                a.t.as_ref().ok_or("type TENSOR but no tensor given")?,
            )?),
            AttributeType::Graph => Attribute::Graph(Box::new(graph(
                a.g.as_ref().ok_or("type GRAPH but no graph given")?,
            )?)),
            AttributeType::Floats => Attribute::Floats(a.floats.clone()),
            AttributeType::Ints => Attribute::Ints(a.ints.clone()),
            AttributeType::Strings => Attribute::Strings(a.strings.clone()),
            AttributeType::Tensors => {
                Attribute::Tensors(a.tensors.iter().map(tensor).collect::<Result<_, _>>()?)
            }
            AttributeType::Graphs => {
                Attribute::Graphs(a.graphs.iter().map(graph).collect::<Result<_, _>>()?)
            }
            other => {
                return Err(format!(
                    "attribute type {} is not supported",
                    other.as_str_name()
                ))
            }
        })
    }
}

/// The type of an attribute written without `type` (IR version 1 files):
/// whichever value field is set.
fn infer_attr_type(a: &proto::AttributeProto) -> std::result::Result<AttributeType, String> {
    Ok(if a.f.is_some() {
        AttributeType::Float
    } else if a.i.is_some() {
        AttributeType::Int
    } else if a.s.is_some() {
        AttributeType::String
    } else if a.t.is_some() {
        AttributeType::Tensor
    } else if a.g.is_some() {
        AttributeType::Graph
    } else if !a.floats.is_empty() {
        AttributeType::Floats
    } else if !a.ints.is_empty() {
        AttributeType::Ints
    } else if !a.strings.is_empty() {
        AttributeType::Strings
    } else if !a.tensors.is_empty() {
        AttributeType::Tensors
    } else if !a.graphs.is_empty() {
        AttributeType::Graphs
    } else {
        return Err("has no type and no value".into());
    })
}

/// Unique node names: explicit names are kept (first use wins), unnamed
/// nodes become `<op_type>_<index>`, repeats get `_<k>` appended.
fn unique_names(nodes: &[proto::NodeProto]) -> Vec<String> {
    let explicit: HashSet<&str> = nodes
        .iter()
        .map(|n| n.name())
        .filter(|n| !n.is_empty())
        .collect();
    let mut taken: HashSet<String> = HashSet::with_capacity(nodes.len());
    let mut out = Vec::with_capacity(nodes.len());
    for (i, n) in nodes.iter().enumerate() {
        if !n.name().is_empty() && taken.insert(n.name().to_string()) {
            out.push(n.name().to_string());
            continue;
        }
        let base = if n.name().is_empty() {
            let op = if n.op_type().is_empty() {
                "node"
            } else {
                n.op_type()
            };
            format!("{op}_{i}")
        } else {
            format!("{}_{i}", n.name())
        };
        let mut cand = base.clone();
        let mut k = 1;
        while explicit.contains(cand.as_str()) || taken.contains(&cand) {
            cand = format!("{base}_{k}");
            k += 1;
        }
        taken.insert(cand.clone());
        out.push(cand);
    }
    out
}

/// The output name and value of a `Constant` node.
fn fold_constant(node: &Node) -> Result<(String, Tensor)> {
    let err = |attr: &str, reason: String| OnnxError::Attribute {
        node: node.name.clone(),
        op: node.op_type.clone(),
        attr: attr.to_string(),
        reason,
    };
    let out = match node.outputs.as_slice() {
        [o] if !o.is_empty() => o.clone(),
        _ => {
            return Err(OnnxError::Invalid(format!(
                "Constant node '{}' must have exactly one named output, has {:?}",
                node.name, node.outputs
            )))
        }
    };
    if node.inputs.iter().any(|i| !i.is_empty()) {
        return Err(OnnxError::Invalid(format!(
            "Constant node '{}' must have no inputs, has {:?}",
            node.name, node.inputs
        )));
    }
    let mut attrs = node.attributes.iter();
    let (name, a) = match (attrs.next(), attrs.next()) {
        (Some(first), None) => first,
        _ => {
            let names: Vec<&String> = node.attributes.keys().collect();
            return Err(err(
                "value",
                format!("a Constant needs exactly one value attribute, found {names:?}"),
            ));
        }
    };
    let strings = |v: &[Vec<u8>]| -> Result<Vec<String>> {
        v.iter()
            .map(|s| {
                String::from_utf8(s.clone())
                    .map_err(|_| err(name, "string is not valid UTF-8".into()))
            })
            .collect()
    };
    let t = match (name.as_str(), a) {
        ("value", Attribute::Tensor(t)) => Ok(t.clone()),
        ("value_float", Attribute::Float(f)) => Ok(Tensor::scalar(*f)),
        ("value_floats", Attribute::Floats(v)) => Tensor::from_vec(vec![v.len()], v.clone()),
        ("value_int", Attribute::Int(i)) => Ok(Tensor::scalar(*i)),
        ("value_ints", Attribute::Ints(v)) => Tensor::from_vec(vec![v.len()], v.clone()),
        ("value_string", Attribute::String(s)) => {
            Ok(Tensor::scalar(strings(std::slice::from_ref(s))?.remove(0)))
        }
        ("value_strings", Attribute::Strings(v)) => Tensor::from_vec(vec![v.len()], strings(v)?),
        (n, a) => {
            return Err(err(
                n,
                format!(
                    "unsupported Constant attribute of type {} (sparse_value is not supported)",
                    a.kind()
                ),
            ))
        }
    }
    .map_err(|e| err(name, e.to_string()))?;
    Ok((out, t))
}
