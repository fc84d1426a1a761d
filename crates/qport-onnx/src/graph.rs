//! The graph toolkit every pass over the IR shares: domains, node and model
//! constructors, a producer/consumer index, fresh names, pruning, and a
//! small [`ModelBuilder`] for tests and examples.
//!
//! - Domains: [`is_default_domain`] (`""` and `"ai.onnx"` are both the
//!   default ONNX domain), [`Node::is`], [`Node::is_onnx`],
//!   [`qualified_op`] (`domain:Op` outside the default domain).
//! - Constructors: [`Node::new`], [`Node::in_domain`], [`Node::with_attr`],
//!   [`Model::new`], [`Graph::new`].
//! - [`GraphIndex`]: which node produces a value and which nodes read it.
//! - [`fresh_name`]: a name not yet taken.
//! - [`Graph::drop_unread_initializers`], [`Graph::drop_stale_value_info`]:
//!   the clean-up after a rewrite.
//!
//! ```
//! use qport_core::DType;
//! use qport_onnx::graph::{GraphIndex, ModelBuilder};
//! let model = ModelBuilder::new(13)
//!     .input("x", DType::F32, &[1, 4])
//!     .op("Relu", ["x"], ["r"])
//!     .op("Sigmoid", ["r"], ["y"])
//!     .output("y", DType::F32, &[1, 4])
//!     .build();
//! let index = GraphIndex::new(&model.graph);
//! assert_eq!(index.producer("r"), Some(0));
//! assert_eq!(index.sole_consumer("r"), Some(1));
//! assert!(model.graph.nodes[1].is_onnx("Sigmoid"));
//! ```

use crate::model::{Attribute, Graph, Model, Node, ValueInfo};
use qport_core::{DType, Tensor};
use std::collections::{BTreeMap, HashMap, HashSet};

/// onnxruntime's contrib-op domain (`QLinearAdd`, `QGemm`, ...).
pub const MS_DOMAIN: &str = "com.microsoft";

/// True for the default ONNX domain, spelled `""` or `"ai.onnx"`.
///
/// ```
/// use qport_onnx::graph::is_default_domain;
/// assert!(is_default_domain("") && is_default_domain("ai.onnx"));
/// assert!(!is_default_domain("com.microsoft"));
/// ```
pub fn is_default_domain(domain: &str) -> bool {
    domain.is_empty() || domain == "ai.onnx"
}

/// The canonical spelling of `domain`: `""` for the default domain.
///
/// ```
/// assert_eq!(qport_onnx::graph::normalize_domain("ai.onnx"), "");
/// assert_eq!(qport_onnx::graph::normalize_domain("com.microsoft"), "com.microsoft");
/// ```
pub fn normalize_domain(domain: &str) -> &str {
    if is_default_domain(domain) {
        ""
    } else {
        domain
    }
}

/// `op` in the default domain, `domain:op` elsewhere (for messages and
/// op-type histograms).
///
/// ```
/// use qport_onnx::graph::qualified_op;
/// assert_eq!(qualified_op("ai.onnx", "Conv"), "Conv");
/// assert_eq!(qualified_op("com.microsoft", "QGemm"), "com.microsoft:QGemm");
/// ```
pub fn qualified_op(domain: &str, op: &str) -> String {
    if is_default_domain(domain) {
        op.to_string()
    } else {
        format!("{domain}:{op}")
    }
}

/// `base` if `taken(base)` is false, else the first of `base.1`, `base.2`,
/// ... that is free.
///
/// ```
/// let taken = ["w", "w.1"];
/// assert_eq!(qport_onnx::graph::fresh_name("w", |n| taken.contains(&n)), "w.2");
/// assert_eq!(qport_onnx::graph::fresh_name("b", |n| taken.contains(&n)), "b");
/// ```
pub fn fresh_name(base: &str, taken: impl Fn(&str) -> bool) -> String {
    let mut name = base.to_string();
    let mut i = 1;
    while taken(&name) {
        name = format!("{base}.{i}");
        i += 1;
    }
    name
}

fn strings<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> Vec<String> {
    names.into_iter().map(|s| s.as_ref().to_string()).collect()
}

impl Node {
    /// A node of the default domain with no attributes.
    ///
    /// ```
    /// let n = qport_onnx::Node::new("add1", "Add", ["a", "b"], ["y"]);
    /// assert!(n.is_onnx("Add") && n.inputs == ["a", "b"]);
    /// ```
    pub fn new<I: AsRef<str>, O: AsRef<str>>(
        name: impl Into<String>,
        op_type: impl Into<String>,
        inputs: impl IntoIterator<Item = I>,
        outputs: impl IntoIterator<Item = O>,
    ) -> Node {
        Node {
            name: name.into(),
            op_type: op_type.into(),
            domain: String::new(),
            inputs: strings(inputs),
            outputs: strings(outputs),
            attributes: BTreeMap::new(),
            doc_string: String::new(),
        }
    }

    /// The node moved to `domain`.
    pub fn in_domain(mut self, domain: &str) -> Node {
        self.domain = domain.to_string();
        self
    }

    /// The node with attribute `name` set to `value`.
    ///
    /// ```
    /// use qport_onnx::{Attribute, Node};
    /// let n = Node::new("f", "Flatten", ["x"], ["y"]).with_attr("axis", Attribute::Int(1));
    /// assert_eq!(n.attr_int("axis", 0).unwrap(), 1);
    /// ```
    pub fn with_attr(mut self, name: &str, value: Attribute) -> Node {
        self.attributes.insert(name.to_string(), value);
        self
    }

    /// The node with every `(name, value)` of `attrs` set.
    ///
    /// ```
    /// use qport_onnx::{Attribute, Node};
    /// let n = Node::new("c", "Clip", ["x"], ["y"])
    ///     .with_attrs([("min", Attribute::Float(0.0)), ("max", Attribute::Float(6.0))]);
    /// assert_eq!(n.attr_float("max", 0.0).unwrap(), 6.0);
    /// ```
    pub fn with_attrs<'a>(mut self, attrs: impl IntoIterator<Item = (&'a str, Attribute)>) -> Node {
        self.attributes
            .extend(attrs.into_iter().map(|(k, v)| (k.to_string(), v)));
        self
    }

    /// True when the node is `op_type` of `domain` (the two spellings of
    /// the default domain are the same domain).
    ///
    /// ```
    /// let n = qport_onnx::Node::new("q", "QGemm", ["a"], ["y"]).in_domain("com.microsoft");
    /// assert!(n.is("com.microsoft", "QGemm") && !n.is("", "QGemm"));
    /// ```
    pub fn is(&self, domain: &str, op_type: &str) -> bool {
        self.op_type == op_type && normalize_domain(&self.domain) == normalize_domain(domain)
    }

    /// True when the node is `op_type` of the default ONNX domain.
    pub fn is_onnx(&self, op_type: &str) -> bool {
        self.op_type == op_type && is_default_domain(&self.domain)
    }

    /// True when the node belongs to the default ONNX domain.
    pub fn in_default_domain(&self) -> bool {
        is_default_domain(&self.domain)
    }

    /// The op type as [`qualified_op`] writes it.
    pub fn qualified_op(&self) -> String {
        qualified_op(&self.domain, &self.op_type)
    }
}

impl Graph {
    /// How many nodes have op type `op_type` (in any domain).
    ///
    /// ```
    /// use qport_onnx::{Graph, Node};
    /// let relu = |i: &str, o: &str| Node::new(o, "Relu", [i], [o]);
    /// let g = Graph::new("g", vec![relu("x", "y"), relu("y", "z")], vec![], vec![]);
    /// assert_eq!((g.count_op("Relu"), g.count_op("Conv")), (2, 0));
    /// ```
    pub fn count_op(&self, op_type: &str) -> usize {
        self.nodes.iter().filter(|n| n.op_type == op_type).count()
    }

    /// A graph named `name` with these nodes, inputs and outputs and no
    /// initializers.
    pub fn new(
        name: &str,
        nodes: Vec<Node>,
        inputs: Vec<ValueInfo>,
        outputs: Vec<ValueInfo>,
    ) -> Graph {
        Graph {
            name: name.to_string(),
            nodes,
            inputs,
            outputs,
            ..Graph::default()
        }
    }

    /// Names of the values some node produces (omitted outputs excluded).
    pub fn produced_values(&self) -> HashSet<&str> {
        self.nodes
            .iter()
            .flat_map(|n| n.outputs.iter().map(String::as_str))
            .filter(|s| !s.is_empty())
            .collect()
    }

    /// Removes the initializers that no node reads and that are not graph
    /// outputs (the constants a rewrite folded away).
    pub fn drop_unread_initializers(&mut self) {
        let read: HashSet<&str> = self
            .nodes
            .iter()
            .flat_map(|n| n.inputs.iter().map(String::as_str))
            .chain(self.outputs.iter().map(|o| o.name.as_str()))
            .collect();
        self.initializers.retain(|k, _| read.contains(k.as_str()));
    }

    /// Removes the `value_info` annotations of values no node produces any
    /// more.
    pub fn drop_stale_value_info(&mut self) {
        let produced: HashSet<String> = self
            .produced_values()
            .into_iter()
            .map(String::from)
            .collect();
        self.value_info.retain(|v| produced.contains(&v.name));
    }

    /// The quantization step of `value` when it holds dequantized
    /// integers: the output of a DequantizeLinear with one (per-tensor)
    /// constant scale, directly or through operators that keep values on
    /// its grid ([`crate::opclass::moves_integers`], Identity). `None`
    /// otherwise.
    ///
    /// ```
    /// use qport_core::{DType, Tensor};
    /// use qport_onnx::graph::ModelBuilder;
    /// let m = ModelBuilder::new(13)
    ///     .input("q", DType::U8, &[1, 4])
    ///     .initializer("s", Tensor::scalar(0.25f32))
    ///     .initializer("z", Tensor::scalar(128u8))
    ///     .op("DequantizeLinear", ["q", "s", "z"], ["d"])
    ///     .op("Flatten", ["d"], ["y"])
    ///     .op("Relu", ["d"], ["r"])
    ///     .build();
    /// assert_eq!(m.graph.dequantize_step("y"), Some(0.25));
    /// assert_eq!(m.graph.dequantize_step("r"), None);
    /// ```
    pub fn dequantize_step(&self, value: &str) -> Option<f64> {
        let mut v = value;
        // each step moves to an earlier node: at most one per node
        for _ in 0..=self.nodes.len() {
            let n = self
                .nodes
                .iter()
                .find(|n| n.outputs.iter().any(|o| o == v))?;
            if n.is_onnx("DequantizeLinear") {
                let s = self.initializers.get(n.inputs.get(1)?)?;
                if s.len() != 1 {
                    return None;
                }
                return s.to_f32_vec().ok()?.first().map(|&x| f64::from(x));
            }
            if !(n.is_onnx("Identity")
                || (n.in_default_domain() && crate::opclass::moves_integers(&n.op_type)))
            {
                return None;
            }
            v = n.inputs.first()?;
        }
        None
    }
}

impl Model {
    /// A model around `graph` importing the default domain at `opset`
    /// (IR version 8, no producer, no metadata).
    ///
    /// ```
    /// use qport_onnx::{Graph, Model};
    /// let m = Model::new(Graph::default(), 17);
    /// assert_eq!((m.ir_version, m.opset("")), (8, Some(17)));
    /// ```
    pub fn new(graph: Graph, opset: i64) -> Model {
        Model {
            ir_version: 8,
            opset_imports: vec![(String::new(), opset)],
            producer_name: String::new(),
            producer_version: String::new(),
            domain: String::new(),
            model_version: 0,
            doc_string: String::new(),
            metadata: vec![],
            graph,
        }
    }
}

/// Which node produces each value and which nodes read it, by value name.
///
/// Node positions index `graph.nodes`; a node reading a value twice is
/// listed twice among its consumers. Omitted (empty) names are not values.
#[derive(Debug, Clone)]
pub struct GraphIndex<'g> {
    producers: HashMap<&'g str, usize>,
    consumers: HashMap<&'g str, Vec<usize>>,
    outputs: HashSet<&'g str>,
}

impl<'g> GraphIndex<'g> {
    /// Indexes `graph`.
    pub fn new(graph: &'g Graph) -> GraphIndex<'g> {
        let mut producers = HashMap::new();
        let mut consumers: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, n) in graph.nodes.iter().enumerate() {
            for o in n.outputs.iter().filter(|s| !s.is_empty()) {
                producers.insert(o.as_str(), i);
            }
            for x in n.inputs.iter().filter(|s| !s.is_empty()) {
                consumers.entry(x.as_str()).or_default().push(i);
            }
        }
        GraphIndex {
            producers,
            consumers,
            outputs: graph.outputs.iter().map(|o| o.name.as_str()).collect(),
        }
    }

    /// The node producing `value`, if a node does.
    pub fn producer(&self, value: &str) -> Option<usize> {
        self.producers.get(value).copied()
    }

    /// The nodes reading `value`, in node order (empty when none).
    pub fn consumers(&self, value: &str) -> &[usize] {
        self.consumers.get(value).map_or(&[], Vec::as_slice)
    }

    /// True when `value` is a graph output.
    pub fn is_output(&self, value: &str) -> bool {
        self.outputs.contains(value)
    }

    /// The graph output names.
    pub fn outputs(&self) -> &HashSet<&'g str> {
        &self.outputs
    }

    /// The only node reading `value`, once, when `value` is not a graph
    /// output: the condition for fusing its producer into that reader.
    pub fn sole_consumer(&self, value: &str) -> Option<usize> {
        if self.is_output(value) {
            return None;
        }
        match self.consumers(value) {
            [j] => Some(*j),
            _ => None,
        }
    }
}

/// Builds small models in code, for tests and examples.
///
/// ```
/// use qport_core::{DType, Tensor};
/// use qport_onnx::{graph::ModelBuilder, Node};
/// let m = ModelBuilder::new(17)
///     .input("x", DType::F32, &[2])
///     .initializer("b", Tensor::scalar(1.0f32))
///     .node(Node::new("add", "Add", ["x", "b"], ["y"]))
///     .output("y", DType::F32, &[2])
///     .build();
/// assert_eq!(m.graph.nodes[0].name, "add");
/// assert!(m.graph.initializers.contains_key("b"));
/// ```
#[derive(Debug, Clone)]
pub struct ModelBuilder {
    model: Model,
}

impl ModelBuilder {
    /// An empty model (graph `g`) importing the default domain at `opset`.
    pub fn new(opset: i64) -> ModelBuilder {
        ModelBuilder {
            model: Model::new(Graph::new("g", vec![], vec![], vec![]), opset),
        }
    }

    /// Appends `node`.
    pub fn node(mut self, node: Node) -> ModelBuilder {
        self.model.graph.nodes.push(node);
        self
    }

    /// Appends every node of `nodes`.
    pub fn nodes(mut self, nodes: impl IntoIterator<Item = Node>) -> ModelBuilder {
        self.model.graph.nodes.extend(nodes);
        self
    }

    /// Appends a default-domain `op` node named `<op>_<first output>`.
    pub fn op<I: AsRef<str>, O: AsRef<str>>(
        self,
        op: &str,
        inputs: impl IntoIterator<Item = I>,
        outputs: impl IntoIterator<Item = O>,
    ) -> ModelBuilder {
        let outputs = strings(outputs);
        let name = format!("{op}_{}", outputs.first().map_or("", String::as_str));
        self.node(Node::new(name, op, inputs, outputs))
    }

    /// Adds a graph input of known dtype and shape.
    pub fn input(mut self, name: &str, dtype: DType, shape: &[usize]) -> ModelBuilder {
        self.model
            .graph
            .inputs
            .push(ValueInfo::known(name, dtype, shape));
        self
    }

    /// Adds a graph output of known dtype and shape.
    pub fn output(mut self, name: &str, dtype: DType, shape: &[usize]) -> ModelBuilder {
        self.model
            .graph
            .outputs
            .push(ValueInfo::known(name, dtype, shape));
        self
    }

    /// Adds (or replaces) the constant `name`.
    pub fn initializer(mut self, name: &str, value: Tensor) -> ModelBuilder {
        self.model.graph.initializers.insert(name.into(), value);
        self
    }

    /// Sets the producer name and version.
    pub fn producer(mut self, name: &str, version: &str) -> ModelBuilder {
        self.model.producer_name = name.into();
        self.model.producer_version = version.into();
        self
    }

    /// Imports `domain` at `version` besides the default domain.
    pub fn opset_import(mut self, domain: &str, version: i64) -> ModelBuilder {
        self.model.opset_imports.push((domain.into(), version));
        self
    }

    /// The model.
    pub fn build(self) -> Model {
        self.model
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_counts_every_read_and_skips_omitted_names() {
        let m = ModelBuilder::new(13)
            .node(Node::new("a", "Add", ["x", "x"], ["s"]))
            .node(Node::new("c", "Clip", ["s", "", "hi"], ["y", ""]))
            .node(Node::new("r", "Relu", ["y"], ["z"]))
            .output("z", DType::F32, &[1])
            .build();
        let ix = GraphIndex::new(&m.graph);
        assert_eq!(ix.consumers("x"), [0, 0]);
        assert_eq!(ix.sole_consumer("x"), None);
        assert_eq!(ix.sole_consumer("s"), Some(1));
        assert_eq!(ix.sole_consumer("z"), None);
        assert_eq!(ix.producer(""), None);
        assert!(ix.consumers("").is_empty());
        assert_eq!(ix.producer("y"), Some(1));
    }

    #[test]
    fn pruning_keeps_what_is_read_or_produced() {
        let mut m = ModelBuilder::new(13)
            .initializer("w", Tensor::scalar(1.0f32))
            .initializer("unused", Tensor::scalar(2.0f32))
            .initializer("out", Tensor::scalar(3.0f32))
            .op("Mul", ["x", "w"], ["y"])
            .output("out", DType::F32, &[])
            .build();
        m.graph.value_info = vec![
            ValueInfo::known("y", DType::F32, &[1]),
            ValueInfo::known("gone", DType::F32, &[1]),
        ];
        m.graph.drop_unread_initializers();
        m.graph.drop_stale_value_info();
        let keys: Vec<&str> = m.graph.initializers.keys().map(String::as_str).collect();
        assert_eq!(keys, ["out", "w"]);
        assert_eq!(m.graph.value_info.len(), 1);
        assert_eq!(m.graph.nodes[0].name, "Mul_y");
    }

    #[test]
    fn domains_compare_by_meaning() {
        let n = Node::new("n", "Conv", ["x"], ["y"]).in_domain("ai.onnx");
        assert!(n.is("", "Conv") && n.is_onnx("Conv") && n.in_default_domain());
        assert_eq!(n.qualified_op(), "Conv");
        let m = n.in_domain("ai.qport");
        assert!(!m.is_onnx("Conv") && m.is("ai.qport", "Conv"));
        assert_eq!(m.qualified_op(), "ai.qport:Conv");
    }
}
