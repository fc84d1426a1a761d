//! qport's in-memory graph IR: owned, validated, independent of protobuf.
//!
//! A [`Model`] holds one [`Graph`]; nodes refer to values by name; an empty
//! input name means an omitted optional input, as in ONNX.

use crate::error::{OnnxError, Result};
use qport_core::{DType, Tensor};
use std::collections::BTreeMap;

/// A loaded ONNX model.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    /// ONNX IR version of the file.
    pub ir_version: i64,
    /// Opset imports: (domain, version); the default domain is `""`.
    pub opset_imports: Vec<(String, i64)>,
    /// Producer name (e.g. `pytorch`, `onnx.quantize`).
    pub producer_name: String,
    /// Producer version.
    pub producer_version: String,
    /// Model domain.
    pub domain: String,
    /// Model version.
    pub model_version: i64,
    /// Free-form documentation string.
    pub doc_string: String,
    /// Metadata key/value pairs (qport records provenance here).
    pub metadata: Vec<(String, String)>,
    /// The main graph.
    pub graph: Graph,
}

impl Model {
    /// The opset version imported for `domain` (`""` and `"ai.onnx"` are the
    /// default domain).
    pub fn opset(&self, domain: &str) -> Option<i64> {
        use crate::graph::normalize_domain;
        let want = normalize_domain(domain);
        self.opset_imports
            .iter()
            .find(|(d, _)| normalize_domain(d) == want)
            .map(|(_, v)| *v)
    }
}

/// A computation graph: nodes in topological order after loading.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Graph {
    /// Graph name.
    pub name: String,
    /// Nodes, in topological order.
    pub nodes: Vec<Node>,
    /// Graph inputs that are not initializers (what a caller feeds).
    pub inputs: Vec<ValueInfo>,
    /// Graph outputs.
    pub outputs: Vec<ValueInfo>,
    /// Constant tensors by name (initializers and folded Constant nodes).
    pub initializers: BTreeMap<String, Tensor>,
    /// Type/shape annotations of intermediate values, when the file has them.
    pub value_info: Vec<ValueInfo>,
    /// Documentation string.
    pub doc_string: String,
}

/// One operator application.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Node name (unique after loading: unnamed nodes get `<op>_<index>`).
    pub name: String,
    /// Operator type, e.g. `Conv`.
    pub op_type: String,
    /// Operator domain (`""` for the default ONNX domain).
    pub domain: String,
    /// Input value names; `""` marks an omitted optional input.
    pub inputs: Vec<String>,
    /// Output value names; `""` marks an unused optional output.
    pub outputs: Vec<String>,
    /// Attributes by name.
    pub attributes: BTreeMap<String, Attribute>,
    /// Documentation string.
    pub doc_string: String,
}

/// A node attribute value.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub enum Attribute {
    Float(f32),
    Int(i64),
    String(Vec<u8>),
    Tensor(Tensor),
    Graph(Box<Graph>),
    Floats(Vec<f32>),
    Ints(Vec<i64>),
    Strings(Vec<Vec<u8>>),
    Tensors(Vec<Tensor>),
    Graphs(Vec<Graph>),
}

impl Attribute {
    /// Short name of the attribute's kind, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Attribute::Float(_) => "float",
            Attribute::Int(_) => "int",
            Attribute::String(_) => "string",
            Attribute::Tensor(_) => "tensor",
            Attribute::Graph(_) => "graph",
            Attribute::Floats(_) => "floats",
            Attribute::Ints(_) => "ints",
            Attribute::Strings(_) => "strings",
            Attribute::Tensors(_) => "tensors",
            Attribute::Graphs(_) => "graphs",
        }
    }
}

/// A tensor dimension as declared in a value's type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Dim {
    /// A fixed size.
    Known(u64),
    /// A named symbolic size (e.g. `N`, `batch`), resolved at run time.
    Param(String),
    /// Unknown and unnamed.
    Unknown,
}

impl std::fmt::Display for Dim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dim::Known(n) => write!(f, "{n}"),
            Dim::Param(p) => f.write_str(p),
            Dim::Unknown => f.write_str("?"),
        }
    }
}

/// Name, element type and (possibly symbolic) shape of a value.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueInfo {
    /// Value name.
    pub name: String,
    /// Element type, when declared as a tensor.
    pub dtype: Option<DType>,
    /// Shape, when declared (`None` = rank unknown).
    pub shape: Option<Vec<Dim>>,
}

impl ValueInfo {
    /// A value with dtype and fully known shape.
    pub fn known(name: &str, dtype: DType, shape: &[usize]) -> ValueInfo {
        ValueInfo {
            name: name.to_string(),
            dtype: Some(dtype),
            shape: Some(shape.iter().map(|&d| Dim::Known(d as u64)).collect()),
        }
    }

    /// Checks a concrete shape against the declared one: rank must match and
    /// every known dimension must be equal. Symbolic dimensions accept any size.
    pub fn accepts_shape(&self, shape: &[usize]) -> bool {
        match &self.shape {
            None => true,
            Some(dims) => {
                dims.len() == shape.len()
                    && dims.iter().zip(shape).all(|(d, &s)| match d {
                        Dim::Known(k) => *k == s as u64,
                        _ => true,
                    })
            }
        }
    }

    /// The declared shape as text, e.g. `[N,3,224,224]`.
    pub fn shape_string(&self) -> String {
        match &self.shape {
            None => "[?..]".into(),
            Some(d) => format!(
                "[{}]",
                d.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        }
    }
}

impl Node {
    fn attr_err(&self, attr: &str, reason: impl Into<String>) -> OnnxError {
        OnnxError::Attribute {
            node: self.name.clone(),
            op: self.op_type.clone(),
            attr: attr.to_string(),
            reason: reason.into(),
        }
    }

    /// The attribute named `name`, if present.
    pub fn attr(&self, name: &str) -> Option<&Attribute> {
        self.attributes.get(name)
    }

    /// An `int` attribute, or `default` when absent.
    pub fn attr_int(&self, name: &str, default: i64) -> Result<i64> {
        match self.attr(name) {
            None => Ok(default),
            Some(Attribute::Int(v)) => Ok(*v),
            Some(a) => Err(self.attr_err(name, format!("expected int, found {}", a.kind()))),
        }
    }

    /// A required `int` attribute.
    pub fn req_int(&self, name: &str) -> Result<i64> {
        match self.attr(name) {
            None => Err(self.attr_err(name, "required but missing")),
            Some(_) => self.attr_int(name, 0),
        }
    }

    /// A `float` attribute, or `default` when absent.
    pub fn attr_float(&self, name: &str, default: f32) -> Result<f32> {
        match self.attr(name) {
            None => Ok(default),
            Some(Attribute::Float(v)) => Ok(*v),
            Some(a) => Err(self.attr_err(name, format!("expected float, found {}", a.kind()))),
        }
    }

    /// A `string` attribute (UTF-8), or `default` when absent.
    pub fn attr_string(&self, name: &str, default: &str) -> Result<String> {
        match self.attr(name) {
            None => Ok(default.to_string()),
            Some(Attribute::String(v)) => String::from_utf8(v.clone())
                .map_err(|_| self.attr_err(name, "string is not valid UTF-8")),
            Some(a) => Err(self.attr_err(name, format!("expected string, found {}", a.kind()))),
        }
    }

    /// An `ints` attribute, or `None` when absent.
    pub fn attr_ints(&self, name: &str) -> Result<Option<Vec<i64>>> {
        match self.attr(name) {
            None => Ok(None),
            Some(Attribute::Ints(v)) => Ok(Some(v.clone())),
            Some(a) => Err(self.attr_err(name, format!("expected ints, found {}", a.kind()))),
        }
    }

    /// A `floats` attribute, or `None` when absent.
    pub fn attr_floats(&self, name: &str) -> Result<Option<Vec<f32>>> {
        match self.attr(name) {
            None => Ok(None),
            Some(Attribute::Floats(v)) => Ok(Some(v.clone())),
            Some(a) => Err(self.attr_err(name, format!("expected floats, found {}", a.kind()))),
        }
    }

    /// A `tensor` attribute, or `None` when absent.
    pub fn attr_tensor(&self, name: &str) -> Result<Option<&Tensor>> {
        match self.attr(name) {
            None => Ok(None),
            Some(Attribute::Tensor(t)) => Ok(Some(t)),
            Some(a) => Err(self.attr_err(name, format!("expected tensor, found {}", a.kind()))),
        }
    }

    /// The `i`-th input name if present and non-empty.
    pub fn input(&self, i: usize) -> Option<&str> {
        self.inputs
            .get(i)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }
}
