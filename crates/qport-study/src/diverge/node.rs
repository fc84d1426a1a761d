//! Re-running one layer of a lowered model on its own: a model of the
//! layer's node (or, under a profile that lowers the artifact otherwise,
//! of the nodes of that profile's lowered model that compute the layer's
//! outputs) with the values it reads as graph inputs and its constant
//! inputs copied, compiled once per (layer, profile variant) and cached.

use super::stage::Stage;
use crate::StudyError;
use qport_core::arith::ArithProfile;
use qport_core::Tensor;
use qport_engine::{Plan, PlanOptions};
use qport_onnx::graph::GraphIndex;
use qport_onnx::{Graph, Model, Node, ValueInfo};
use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap, HashSet};

/// The profile a single node is re-run under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Variant {
    /// Profile A.
    A,
    /// Profile B.
    B,
    /// Profile A with B's policy for one stage.
    Swap(Stage),
}

/// Op types whose results depend on the arithmetic profile (the quantized
/// operators and `QuantizeLinear`), in any domain.
pub(crate) fn is_quantized_op(op: &str) -> bool {
    op == "QuantizeLinear" || qport_onnx::opclass::is_integer_op(op)
}

/// The node's inputs that are values (not constants, not omitted), each
/// once, in order.
pub(crate) fn value_inputs<'n>(model: &Model, node: &'n Node) -> Vec<&'n str> {
    let mut out: Vec<&str> = vec![];
    for name in &node.inputs {
        if name.is_empty()
            || model.graph.initializers.contains_key(name)
            || out.contains(&name.as_str())
        {
            continue;
        }
        out.push(name);
    }
    out
}

/// The part of a lowered model a layer is re-run as: one node of profile
/// A's lowered model, or, under a profile that lowers otherwise, the nodes
/// of that profile's lowered model that compute the layer's outputs from
/// the values A computed.
pub(crate) enum Part<'m> {
    /// Node `index` of this model.
    Node(&'m Model, usize),
    /// The nodes of this model that compute `outputs` from A's values.
    Computing(&'m Model, &'m [String]),
}

/// Single-node (and layer-part) plans of one localization, compiled on
/// first use.
pub(crate) struct NodeRunner {
    /// Per (layer index in A's lowered model, variant): the plan and the
    /// names of the values it reads.
    cache: HashMap<(usize, Variant), (Plan, Vec<String>)>,
}

impl NodeRunner {
    pub(crate) fn new() -> NodeRunner {
        NodeRunner {
            cache: HashMap::new(),
        }
    }

    /// Runs `part` (of layer `index` of A's lowered model) alone under
    /// `profile` (the profile of `variant`), its value inputs taken from
    /// `values` (A's run); returns its outputs by name.
    pub(crate) fn run(
        &mut self,
        part: Part,
        index: usize,
        variant: Variant,
        profile: &ArithProfile,
        values: &HashMap<String, Tensor>,
    ) -> Result<Vec<(String, Tensor)>, StudyError> {
        let (plan, reads) = match self.cache.entry((index, variant)) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let (model, nodes, outputs) = match part {
                    Part::Node(m, i) => {
                        let n = &m.graph.nodes[i];
                        let outs = n.outputs.iter().filter(|o| !o.is_empty()).cloned();
                        (m, vec![i], outs.collect())
                    }
                    Part::Computing(m, outs) => {
                        let nodes = computing(m, outs, values).ok_or_else(|| {
                            StudyError::Inconsistent(format!(
                                "profile `{}` computes '{}' from values the run under profile A did not produce",
                                profile.name,
                                outs.join("', '")
                            ))
                        })?;
                        (m, nodes, outs.to_vec())
                    }
                };
                let reads = value_reads(model, &nodes);
                let one = part_model(model, &nodes, &outputs, &reads, values);
                let plan = Plan::with_options(
                    &one,
                    PlanOptions {
                        fuse: false,
                        arith: profile.clone(),
                        blocked: false,
                    },
                )?;
                e.insert((plan, reads))
            }
        };
        let mut feed = Vec::with_capacity(reads.len());
        for name in reads.iter() {
            let t = values.get(name).ok_or_else(|| {
                StudyError::Input(format!(
                    "layer {index} reads '{name}', which the run under profile A did not produce"
                ))
            })?;
            feed.push((name.clone(), t.clone()));
        }
        Ok(plan.run(feed)?)
    }
}

/// The nodes of `model` that compute `outputs` from the values in `have`
/// and constants, in graph order: walking back from each output through
/// producers until a value `have` holds (the outputs themselves are always
/// computed). `None` when a needed value is neither produced in `model`
/// nor in `have`.
fn computing(
    model: &Model,
    outputs: &[String],
    have: &HashMap<String, Tensor>,
) -> Option<Vec<usize>> {
    let index = GraphIndex::new(&model.graph);
    let mut need: Vec<&str> = outputs.iter().map(String::as_str).collect();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut picked: BTreeSet<usize> = BTreeSet::new();
    while let Some(v) = need.pop() {
        if v.is_empty() || !seen.insert(v) || model.graph.initializers.contains_key(v) {
            continue;
        }
        if have.contains_key(v) && !outputs.iter().any(|o| o == v) {
            continue;
        }
        let p = index.producer(v)?;
        if picked.insert(p) {
            need.extend(model.graph.nodes[p].inputs.iter().map(String::as_str));
        }
    }
    Some(picked.into_iter().collect())
}

/// The values `nodes` read that are neither constants nor computed by
/// `nodes` themselves, each once, in order.
fn value_reads(model: &Model, nodes: &[usize]) -> Vec<String> {
    let made: HashSet<&str> = nodes
        .iter()
        .flat_map(|&i| model.graph.nodes[i].outputs.iter().map(String::as_str))
        .collect();
    let mut out: Vec<String> = vec![];
    for &i in nodes {
        for name in value_inputs(model, &model.graph.nodes[i]) {
            if !made.contains(name) && !out.iter().any(|o| o == name) {
                out.push(name.to_string());
            }
        }
    }
    out
}

/// A model holding only `nodes` of `model`: the values they read (`reads`,
/// typed as in `values`) are graph inputs, their constant inputs are
/// copied, `outputs` are graph outputs. Opsets and metadata come from
/// `model`.
fn part_model(
    model: &Model,
    nodes: &[usize],
    outputs: &[String],
    reads: &[String],
    values: &HashMap<String, Tensor>,
) -> Model {
    let nodes: Vec<Node> = nodes
        .iter()
        .map(|&i| model.graph.nodes[i].clone())
        .collect();
    let initializers = nodes
        .iter()
        .flat_map(|n| n.inputs.iter())
        .filter_map(|n| {
            model
                .graph
                .initializers
                .get(n)
                .map(|t| (n.clone(), t.clone()))
        })
        .collect();
    let name = nodes.last().map_or("", |n| n.name.as_str());
    let graph = Graph {
        name: format!("{}/{name}", model.graph.name),
        nodes,
        inputs: reads
            .iter()
            .map(|n| ValueInfo {
                name: n.clone(),
                dtype: values.get(n).map(|t| t.dtype()),
                shape: None,
            })
            .collect(),
        outputs: outputs
            .iter()
            .map(|o| ValueInfo {
                name: o.clone(),
                dtype: None,
                shape: None,
            })
            .collect(),
        initializers,
        value_info: vec![],
        doc_string: String::new(),
    };
    Model {
        ir_version: model.ir_version,
        opset_imports: model.opset_imports.clone(),
        producer_name: model.producer_name.clone(),
        producer_version: model.producer_version.clone(),
        domain: model.domain.clone(),
        model_version: model.model_version,
        doc_string: String::new(),
        metadata: vec![],
        graph,
    }
}
