//! Raising a model's default-domain opset for the export: per-channel
//! DequantizeLinear needs opset 13, 16-bit QuantizeLinear / DequantizeLinear
//! need 21. Only the operator changes between opset 11 and 21 that alter
//! how a node is written are handled: axes and split sizes moving from
//! attributes to inputs (13 and 18), Split's `num_outputs` (18), the
//! GridSample mode names (20), and Softmax-family axis semantics (13, where
//! the node is kept only if it already normalises over the last axis).
//! Anything else that cannot be upgraded is an error naming the node.

use crate::QuantError;
use qport_core::Tensor;
use qport_onnx::{Attribute, Model, Node};
use std::collections::HashMap;

fn attr_to_input(
    model_inits: &mut std::collections::BTreeMap<String, Tensor>,
    n: &mut Node,
    attr: &str,
    index: usize,
) -> Result<(), QuantError> {
    if let Some(Attribute::Ints(v)) = n.attributes.remove(attr) {
        let name = format!(
            "{}_{attr}",
            if n.name.is_empty() {
                &n.op_type
            } else {
                &n.name
            }
        );
        let t = Tensor::from_vec(vec![v.len()], v)?;
        model_inits.insert(name.clone(), t);
        while n.inputs.len() < index {
            n.inputs.push(String::new());
        }
        if n.inputs.len() == index {
            n.inputs.push(name);
        } else {
            n.inputs[index] = name;
        }
    }
    Ok(())
}

/// Raises the default-domain opset of `model` to `target` (no-op when it is
/// already there). `ranks` gives the rank of run-time values (from a
/// calibration run), used to check Softmax-family nodes.
pub fn upgrade(
    model: &mut Model,
    target: i64,
    ranks: &HashMap<String, usize>,
) -> Result<(), QuantError> {
    let from = model.opset("").unwrap_or(target);
    if from >= target {
        return Ok(());
    }
    let err = |n: &Node, reason: &str| QuantError::Opset {
        node: n.name.clone(),
        op: n.op_type.clone(),
        from,
        to: target,
        reason: reason.into(),
    };
    if from < 11 {
        let n = model
            .graph
            .nodes
            .first()
            .cloned()
            .unwrap_or_else(|| Node::new("", "", Vec::<String>::new(), Vec::<String>::new()));
        return Err(err(
            &n,
            "models below opset 11 are not supported for export",
        ));
    }
    let mut inits = std::mem::take(&mut model.graph.initializers);
    let mut nodes = std::mem::take(&mut model.graph.nodes);
    for n in nodes.iter_mut().filter(|n| n.in_default_domain()) {
        let op = n.op_type.clone();
        if from < 13 && target >= 13 {
            match op.as_str() {
                "Squeeze" | "Unsqueeze" | "ReduceSum" => attr_to_input(&mut inits, n, "axes", 1)?,
                "Split" => attr_to_input(&mut inits, n, "split", 1)?,
                "Softmax" | "LogSoftmax" | "Hardmax" => {
                    let axis = n.attr_int("axis", 1).unwrap_or(1);
                    let rank = n.inputs.first().and_then(|x| ranks.get(x)).copied();
                    let last = match rank {
                        Some(r) => axis == -1 || axis == r as i64 - 1,
                        None => axis == -1,
                    };
                    if !last {
                        return Err(err(
                            n,
                            "the axis semantics changed at opset 13 and this node does not use the last axis",
                        ));
                    }
                }
                _ => {}
            }
        }
        if from < 18 && target >= 18 {
            match op.as_str() {
                "ReduceMean" | "ReduceMax" | "ReduceMin" | "ReduceProd" | "ReduceL1"
                | "ReduceL2" | "ReduceLogSum" | "ReduceLogSumExp" | "ReduceSumSquare" => {
                    attr_to_input(&mut inits, n, "axes", 1)?
                }
                "Split" if n.inputs.get(1).is_none_or(|s| s.is_empty()) => {
                    n.attributes
                        .insert("num_outputs".into(), Attribute::Int(n.outputs.len() as i64));
                }
                _ => {}
            }
        }
        if from < 20 && target >= 20 && op == "GridSample" {
            if let Some(Attribute::String(m)) = n.attributes.get_mut("mode") {
                if m.as_slice() == b"bilinear" {
                    *m = b"linear".to_vec();
                } else if m.as_slice() == b"bicubic" {
                    *m = b"cubic".to_vec();
                }
            }
        }
    }
    model.graph.nodes = nodes;
    model.graph.initializers = inits;
    let mut found = false;
    for (d, v) in model.opset_imports.iter_mut() {
        if qport_onnx::is_default_domain(d) {
            *v = target;
            found = true;
        }
    }
    if !found {
        model.opset_imports.push((String::new(), target));
    }
    let ir = if target >= 21 { 10 } else { 7 };
    model.ir_version = model.ir_version.max(ir);
    Ok(())
}
