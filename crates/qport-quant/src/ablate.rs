//! Scope ablation: quantize one part of a model at a time, the rest in
//! float, and see whether the losses of the parts add up to the loss of the
//! whole (the study's Table 6: a backbone alone and a transformer alone
//! each cost about nothing, all of it at int8 cost 5.7 points).
//!
//! A scope is a named set of nodes ([`parse_scopes`]): node-name globs
//! (`blocks.*`), op types (`op:Conv`) or the nodes between two tensors
//! (`input..feat`: downstream of the first, upstream of the second),
//! separated by commas. [`ablate`] scores FP32 (by definition exact), each
//! scope alone at the base config's precisions with every other node in
//! float, the quantized nodes no scope names (when there are any), and the
//! whole base config.
//!
//! ```
//! use qport_quant::ablate::{parse_scopes, Selector};
//! let s = parse_scopes("stem=stem*;head=op:Gemm,fc*").unwrap();
//! assert_eq!(s[1].name, "head");
//! assert_eq!(s[1].selectors, vec![Selector::Op("Gemm".into()), Selector::Glob("fc*".into())]);
//! ```

use crate::measure::{mac_shares, Metric, Score, Scorer};
use crate::sensitivity::promote_where;
use crate::types::Precision;
use crate::QuantError;
use qport_core::pattern::glob;
use qport_onnx::graph::GraphIndex;
use qport_onnx::Model;
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};

/// One way of naming nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "lowercase")]
pub enum Selector {
    /// Node names matching a `*` glob.
    Glob(String),
    /// Nodes of one op type.
    Op(String),
    /// Nodes downstream of tensor `.0` and upstream of tensor `.1`
    /// (inclusive of the nodes that read the first and make the second).
    Between(String, String),
}

/// A named set of nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Scope {
    /// The name given before `=`.
    pub name: String,
    /// Its selectors (a node is in the scope when any matches).
    pub selectors: Vec<Selector>,
}

/// Errors of scope parsing and matching.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScopeError {
    /// The scope list does not parse.
    #[error("cannot parse scopes '{0}'; write NAME=SELECTOR[,SELECTOR...];NAME=..., a selector being a node-name glob (blocks.*), op:TYPE or FROM..TO (tensor names)")]
    Syntax(String),
    /// Two scopes share a name.
    #[error("scope '{0}' is named twice")]
    Duplicate(String),
    /// A scope names no node.
    #[error("scope '{scope}' matches no node of the model; some node names: {examples}")]
    Empty {
        /// The scope.
        scope: String,
        /// A few node names (and op types) of the model.
        examples: String,
    },
    /// A `FROM..TO` selector names a tensor the graph does not have.
    #[error("scope '{scope}': the model has no tensor '{tensor}'")]
    NoTensor {
        /// The scope.
        scope: String,
        /// The tensor name.
        tensor: String,
    },
}

/// Parses `NAME=SEL[,SEL...];NAME=...` (see the [module docs](self)).
pub fn parse_scopes(text: &str) -> Result<Vec<Scope>, ScopeError> {
    let bad = || ScopeError::Syntax(text.to_string());
    let mut out: Vec<Scope> = Vec::new();
    for part in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, sels) = part.split_once('=').ok_or_else(bad)?;
        let name = name.trim();
        if name.is_empty() {
            return Err(bad());
        }
        let mut selectors = Vec::new();
        for s in sels.split(',').map(str::trim) {
            if s.is_empty() {
                return Err(bad());
            }
            selectors.push(if let Some(op) = s.strip_prefix("op:") {
                if op.is_empty() {
                    return Err(bad());
                }
                Selector::Op(op.to_string())
            } else if let Some((a, b)) = s.split_once("..") {
                if a.is_empty() || b.is_empty() {
                    return Err(bad());
                }
                Selector::Between(a.to_string(), b.to_string())
            } else {
                Selector::Glob(s.to_string())
            });
        }
        if out.iter().any(|o| o.name == name) {
            return Err(ScopeError::Duplicate(name.to_string()));
        }
        out.push(Scope {
            name: name.to_string(),
            selectors,
        });
    }
    if out.is_empty() {
        return Err(bad());
    }
    Ok(out)
}

/// The node indices of `model` in `scope`, in graph order. Unnamed nodes
/// go by the names `quant_config` gives them ([`crate::resolve::node_names`]).
pub fn scope_nodes(model: &Model, scope: &Scope) -> Result<Vec<usize>, ScopeError> {
    let g = &model.graph;
    let index = GraphIndex::new(g);
    let names = crate::resolve::node_names(model);
    let mut hit = vec![false; g.nodes.len()];
    for sel in &scope.selectors {
        match sel {
            Selector::Glob(p) => {
                for (k, n) in names.iter().enumerate() {
                    hit[k] |= glob(p, n);
                }
            }
            Selector::Op(op) => {
                for (k, n) in g.nodes.iter().enumerate() {
                    hit[k] |= &n.op_type == op;
                }
            }
            Selector::Between(from, to) => {
                let known = |t: &str| {
                    index.producer(t).is_some()
                        || !index.consumers(t).is_empty()
                        || g.inputs.iter().any(|v| v.name == t)
                };
                for t in [from, to] {
                    if !known(t) {
                        return Err(ScopeError::NoTensor {
                            scope: scope.name.clone(),
                            tensor: t.clone(),
                        });
                    }
                }
                let down = reach(&index, g, from, true);
                let up = reach(&index, g, to, false);
                for (k, h) in hit.iter_mut().enumerate() {
                    *h |= down.contains(&k) && up.contains(&k);
                }
            }
        }
    }
    let nodes: Vec<usize> = (0..hit.len()).filter(|&k| hit[k]).collect();
    if nodes.is_empty() {
        let examples: Vec<String> = names
            .iter()
            .zip(&g.nodes)
            .take(6)
            .map(|(name, n)| format!("{name} ({})", n.op_type))
            .collect();
        return Err(ScopeError::Empty {
            scope: scope.name.clone(),
            examples: examples.join(", "),
        });
    }
    Ok(nodes)
}

/// Nodes reachable from tensor `t`: downstream (its readers and theirs) or
/// upstream (its producer and the producers of its inputs).
fn reach(index: &GraphIndex, g: &qport_onnx::Graph, t: &str, down: bool) -> HashSet<usize> {
    let mut seen = HashSet::new();
    let mut stack: Vec<usize> = if down {
        index.consumers(t).to_vec()
    } else {
        index.producer(t).into_iter().collect()
    };
    while let Some(k) = stack.pop() {
        if !seen.insert(k) {
            continue;
        }
        let n = &g.nodes[k];
        if down {
            for o in &n.outputs {
                stack.extend(index.consumers(o).iter().copied());
            }
        } else {
            for i in n.inputs.iter().filter(|s| !s.is_empty()) {
                stack.extend(index.producer(i));
            }
        }
    }
    seen
}

/// One configuration of the ablation.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// `fp32`, a scope's name, `(unscoped)` or `all`.
    pub name: String,
    /// Nodes quantized (at a precision other than float32) in this row.
    pub quantized_nodes: usize,
    /// Share of the model's MACs per precision in this row.
    pub mac_share: BTreeMap<String, f64>,
    /// Against FP32.
    pub score: Score,
    /// The metric's loss ([`Metric::loss`]) above FP32's: `1 − cosine`,
    /// `1 − top-1`, MSE, FP32's accuracy minus this row's.
    pub loss: f64,
}

/// The ablation table.
#[derive(Debug, Clone, Serialize)]
pub struct Ablation {
    /// The metric the losses are in.
    pub metric: Metric,
    /// Samples scored on.
    pub samples: usize,
    /// The scopes as parsed, each with its node count.
    pub scopes: Vec<(Scope, usize)>,
    /// Nodes named by more than one scope.
    pub overlapping_nodes: usize,
    /// `fp32`, each scope alone, `(unscoped)` when some quantized node is in
    /// no scope, then `all`.
    pub rows: Vec<Row>,
    /// Sum of the losses of the parts (scopes and unscoped).
    pub sum_of_parts: f64,
    /// The loss of `all` divided by the sum of the parts (`None` when the
    /// parts cost nothing): near 1 the losses add up, far above 1 they
    /// compound.
    pub interaction: Option<f64>,
}

/// Runs the ablation of `scopes` (see the [module docs](self));
/// `progress(0, total)` before the first scored row, `progress(done,
/// total)` after each (`total`: one row per scope, the unscoped rest if
/// any, and the whole model).
pub fn ablate(
    scorer: &Scorer<'_>,
    scopes: &[Scope],
    metric: Metric,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Ablation, QuantError> {
    if metric == Metric::Sqnr {
        return Err(QuantError::Outputs(
            "ablation adds losses, and SQNR in dB does not add: use cosine, mse, top1 or accuracy"
                .into(),
        ));
    }
    scorer.check_metric(metric)?;
    let model = scorer.model();
    let base = scorer.base_precisions();
    let macs = scorer.node_macs();
    let mut members: Vec<Vec<usize>> = Vec::with_capacity(scopes.len());
    for s in scopes {
        members.push(scope_nodes(model, s).map_err(|e| QuantError::Outputs(e.to_string()))?);
    }
    let mut count = vec![0usize; base.len()];
    for m in &members {
        m.iter().for_each(|&k| count[k] += 1);
    }
    let quantized = |k: usize| base[k].qtype != Precision::Float32;
    let unscoped: Vec<usize> = (0..base.len())
        .filter(|&k| count[k] == 0 && quantized(k))
        .collect();
    let mut parts: Vec<(String, Vec<usize>)> = scopes
        .iter()
        .zip(&members)
        .map(|(s, m)| (s.name.clone(), m.clone()))
        .collect();
    if !unscoped.is_empty() {
        parts.push(("(unscoped)".into(), unscoped));
    }
    let total = parts.len() + 1;
    progress(0, total);
    let fp32_score = Score {
        cosine: 1.0,
        sqnr_db: None,
        mse: 0.0,
        top1: scorer.has_top1().then_some(1.0),
        accuracy: scorer.fp32_accuracy(),
        non_finite_samples: 0,
    };
    // losses are measured from FP32's (not 0 for accuracy)
    let fp32_loss = metric.loss(&fp32_score);
    let mut rows = vec![Row {
        name: "fp32".into(),
        quantized_nodes: 0,
        mac_share: mac_shares(&promote_where(&base, Precision::Float32, |_| true), &macs),
        score: fp32_score,
        loss: 0.0,
    }];
    let row = |name: &str, prec: Vec<crate::qdq::NodePrecision>| -> Result<Row, QuantError> {
        let score = scorer.score(&prec)?;
        Ok(Row {
            name: name.to_string(),
            quantized_nodes: prec
                .iter()
                .filter(|p| p.qtype != Precision::Float32)
                .count(),
            mac_share: mac_shares(&prec, &macs),
            score,
            loss: metric.loss(&score) - fp32_loss,
        })
    };
    for (i, (name, nodes)) in parts.iter().enumerate() {
        let inside: HashSet<usize> = nodes.iter().copied().collect();
        let prec = promote_where(&base, Precision::Float32, |k| !inside.contains(&k));
        rows.push(row(name, prec)?);
        progress(i + 1, total);
    }
    rows.push(row("all", base.clone())?);
    progress(total, total);
    let sum_of_parts: f64 = rows[1..rows.len() - 1].iter().map(|r| r.loss).sum();
    let all = rows[rows.len() - 1].loss;
    Ok(Ablation {
        metric,
        samples: scorer.samples(),
        scopes: scopes
            .iter()
            .cloned()
            .zip(members.iter().map(Vec::len))
            .collect(),
        overlapping_nodes: count.iter().filter(|&&c| c > 1).count(),
        interaction: (sum_of_parts > 0.0).then(|| all / sum_of_parts),
        sum_of_parts,
        rows,
    })
}
