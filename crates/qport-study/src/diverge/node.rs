//! Re-running one node of a lowered model on its own: a one-node model with
//! the node's value inputs as graph inputs and its constant inputs copied,
//! compiled once per (node, profile variant) and cached.

use super::stage::Stage;
use crate::StudyError;
use qport_core::arith::ArithProfile;
use qport_core::Tensor;
use qport_engine::{Plan, PlanOptions};
use qport_onnx::{Graph, Model, Node, ValueInfo};
use std::collections::HashMap;

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

/// Single-node plans of one lowered model, compiled on first use.
pub(crate) struct NodeRunner {
    cache: HashMap<(usize, Variant), Plan>,
}

impl NodeRunner {
    pub(crate) fn new() -> NodeRunner {
        NodeRunner {
            cache: HashMap::new(),
        }
    }

    /// Runs node `index` of `model` alone under `profile` (the profile of
    /// `variant`), its value inputs taken from `values`; returns its outputs
    /// by name.
    pub(crate) fn run(
        &mut self,
        model: &Model,
        index: usize,
        variant: Variant,
        profile: &ArithProfile,
        values: &HashMap<String, Tensor>,
    ) -> Result<Vec<(String, Tensor)>, StudyError> {
        let node = &model.graph.nodes[index];
        let names = value_inputs(model, node);
        let mut feed = Vec::with_capacity(names.len());
        for name in &names {
            let t = values.get(*name).ok_or_else(|| {
                StudyError::Input(format!(
                    "node '{}' ({}) reads '{name}', which the run under profile A did not produce",
                    node.name, node.op_type
                ))
            })?;
            feed.push((name.to_string(), t.clone()));
        }
        let plan = match self.cache.entry((index, variant)) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let one = one_node_model(model, node, &feed);
                let plan = Plan::with_options(
                    &one,
                    PlanOptions {
                        fuse: false,
                        arith: profile.clone(),
                    },
                )?;
                e.insert(plan)
            }
        };
        Ok(plan.run(feed)?)
    }
}

/// A model holding only `node`: its value inputs (typed as in `feed`) are
/// graph inputs, its constant inputs are copied, its outputs are graph
/// outputs. Opsets and metadata come from `model`.
fn one_node_model(model: &Model, node: &Node, feed: &[(String, Tensor)]) -> Model {
    let initializers = node
        .inputs
        .iter()
        .filter_map(|n| {
            model
                .graph
                .initializers
                .get(n)
                .map(|t| (n.clone(), t.clone()))
        })
        .collect();
    let graph = Graph {
        name: format!("{}/{}", model.graph.name, node.name),
        nodes: vec![node.clone()],
        inputs: feed
            .iter()
            .map(|(n, t)| ValueInfo {
                name: n.clone(),
                dtype: Some(t.dtype()),
                shape: None,
            })
            .collect(),
        outputs: node
            .outputs
            .iter()
            .filter(|o| !o.is_empty())
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
