//! Per-node quantization sensitivity: which nodes cost accuracy, and which
//! gain from a higher precision.
//!
//! For every node a precision change affects (its inputs are quantized or
//! held in float16 at the base precision, see
//! [`Scorer::affected_nodes`]), two measurements against FP32, each a
//! full export and run with the shared calibration statistics:
//!
//! - **alone**: only this node at its base precision, every other node at
//!   float32: the error the node causes by itself;
//! - **promoted**: only this node at the high precision (int16), every
//!   other node at its base precision: what promoting it buys. Only for
//!   nodes whose base precision is int8 (the candidates of
//!   [`crate::tune`]).
//!
//! With [`Granularity::WeightActivation`] each of the two is also measured
//! for the node's constant inputs (weights) and its run-time inputs
//! (activations) separately, through the config's `InputTypeN`.
//!
//! Nodes are ranked by the *alone* error, largest first (ties in graph
//! order). [`analyze`] also reports the whole model at the base and at the
//! high precision, and the error of every node's output along the graph
//! with the base config ([`Scorer::layer_errors`]).

use crate::measure::{mac_shares, LayerError, Metric, Score, Scorer};
use crate::qdq::NodePrecision;
use crate::types::Precision;
use crate::QuantError;
use serde::Serialize;
use std::collections::BTreeMap;

/// What is measured per node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Granularity {
    /// The node as a whole.
    Node,
    /// The node, its weights alone and its activations alone.
    WeightActivation,
}

/// The input indices of node `k` of the scorer's model that are float
/// constants (weights, biases) and those computed at run time.
fn split_inputs(scorer: &Scorer<'_>, k: usize) -> (Vec<usize>, Vec<usize>) {
    let g = &scorer.model().graph;
    let n = &g.nodes[k];
    let (mut w, mut a) = (vec![], vec![]);
    for (i, name) in n.inputs.iter().enumerate() {
        if name.is_empty() {
            continue;
        }
        match g.initializers.get(name) {
            Some(_) => w.push(i),
            None => a.push(i),
        }
    }
    (w, a)
}

/// `prec` with node `k` at `q`, the inputs in `keep_float` pinned to
/// float32 and the others to `q`.
fn set_node(prec: &mut [NodePrecision], k: usize, q: Precision, inputs: &[usize], pin: Precision) {
    prec[k].qtype = q;
    prec[k].input_types = inputs.iter().map(|&i| (i, pin)).collect();
}

/// Sensitivity of one node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeSensitivity {
    /// Node name.
    pub node: String,
    /// Op type.
    pub op_type: String,
    /// Precision in the base config.
    pub base: Precision,
    /// Multiply-accumulates of the node.
    pub macs: u64,
    /// Its share of the model's MACs.
    pub mac_share: f64,
    /// Only this node at its base precision, the rest float32.
    pub alone: Score,
    /// [`NodeSensitivity::alone`]'s error on the chosen metric ([`Metric::loss`]).
    pub alone_loss: f64,
    /// Only this node at the high precision, the rest at base (int8 nodes only).
    pub promoted: Option<Score>,
    /// The metric's gain of [`NodeSensitivity::promoted`] over the base model
    /// (positive: better).
    pub promotion_gain: Option<f64>,
    /// Weights and activations separately (with [`Granularity::WeightActivation`]).
    pub split: Option<Split>,
}

/// A node's weights and activations measured separately.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Split {
    /// Only the node's weights at base precision, the rest float32 (`None`
    /// for a node without constant inputs).
    pub weights_alone: Option<Score>,
    /// Only the node's activations at base precision, the rest float32.
    pub activations_alone: Option<Score>,
    /// Only the node's weights promoted, the rest at base.
    pub weights_promoted: Option<Score>,
    /// Only the node's activations promoted, the rest at base.
    pub activations_promoted: Option<Score>,
}

/// Options of [`analyze`].
#[derive(Debug, Clone, Copy)]
pub struct SensitivityOptions {
    /// The metric nodes are ranked by.
    pub metric: Metric,
    /// Node, or weights and activations separately.
    pub granularity: Granularity,
    /// The precision nodes are promoted to (int16).
    pub high: Precision,
    /// Measure the error of every node's output along the graph.
    pub layers: bool,
}

/// The result of [`analyze`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sensitivity {
    /// The ranking metric.
    pub metric: Metric,
    /// The high precision.
    pub high: Precision,
    /// Samples scored on.
    pub samples: usize,
    /// The whole model at its base config.
    pub base: Score,
    /// Every int8 node at the high precision (the upper bound of promotion).
    pub high_all: Score,
    /// Share of MACs per precision in the base config.
    pub base_mac_share: BTreeMap<String, f64>,
    /// Nodes, most sensitive first.
    pub nodes: Vec<NodeSensitivity>,
    /// Error of every node's output along the graph, base config.
    pub layers: Vec<LayerError>,
}

/// Every node at `q` where `pred` holds, else as in `prec`.
pub fn promote_where(
    prec: &[NodePrecision],
    q: Precision,
    pred: impl Fn(usize) -> bool,
) -> Vec<NodePrecision> {
    prec.iter()
        .enumerate()
        .map(|(k, p)| {
            if pred(k) {
                NodePrecision {
                    qtype: q,
                    input_types: BTreeMap::new(),
                }
            } else {
                p.clone()
            }
        })
        .collect()
}

/// The nodes a promotion to `high` can change: affected by quantization
/// and at int8 in the base config.
pub fn promotion_candidates(scorer: &Scorer<'_>) -> Vec<usize> {
    let affected = scorer.affected_nodes(Precision::Int8);
    scorer
        .base()
        .nodes
        .iter()
        .enumerate()
        .filter(|(k, n)| affected[*k] && n.qtype == Precision::Int8)
        .map(|(k, _)| k)
        .collect()
}

/// The nodes [`analyze`] measures: affected by quantization and not
/// float32 in the base config, in graph order.
fn measured_nodes(scorer: &Scorer<'_>) -> Vec<usize> {
    let q = scorer.affected_nodes(Precision::Int8);
    scorer
        .base_precisions()
        .iter()
        .zip(q)
        .enumerate()
        .filter(|(_, (p, a))| *a && p.qtype != Precision::Float32)
        .map(|(k, _)| k)
        .collect()
}

/// How many measurements (each a full export and run on the scorer's
/// samples) [`analyze`] makes with `opts`: the base and the all-promoted
/// model; per measured node *alone*, and *promoted* for a promotion
/// candidate; with [`Granularity::WeightActivation`] each of those again
/// for the node's weights and for its activations, where it has that kind
/// of input; and the layer errors when asked for.
pub fn run_count(scorer: &Scorer<'_>, opts: &SensitivityOptions) -> usize {
    let promotable = promotion_candidates(scorer);
    let split = opts.granularity == Granularity::WeightActivation;
    let per_node: usize = measured_nodes(scorer)
        .into_iter()
        .map(|k| {
            let (w, a) = split_inputs(scorer, k);
            let parts =
                usize::from(split) * (usize::from(!w.is_empty()) + usize::from(!a.is_empty()));
            (1 + usize::from(promotable.contains(&k))) * (1 + parts)
        })
        .sum();
    2 + per_node + usize::from(opts.layers)
}

/// Measures every node's sensitivity (see the [module docs](self)).
/// `progress(0, total)` is called before the first measurement and
/// `progress(done, total)` after each, `total` being [`run_count`].
pub fn analyze(
    scorer: &Scorer<'_>,
    opts: &SensitivityOptions,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Sensitivity, QuantError> {
    scorer.check_metric(opts.metric)?;
    let base = scorer.base_precisions();
    let macs = scorer.node_macs();
    let total_macs: u64 = macs.iter().sum();
    let nodes = measured_nodes(scorer);
    let promotable = promotion_candidates(scorer);
    let float: Vec<NodePrecision> = promote_where(&base, Precision::Float32, |_| true);
    let split = opts.granularity == Granularity::WeightActivation;
    let total = run_count(scorer, opts);
    progress(0, total);
    let mut done = 0;
    let mut step = |done: &mut usize| {
        *done += 1;
        progress(*done, total);
    };
    let base_score = scorer.score(&base)?;
    step(&mut done);
    let high_all = scorer.score(&promote_where(&base, opts.high, |k| {
        promotable.contains(&k)
    }))?;
    step(&mut done);
    let m = opts.metric;
    let mut out = Vec::with_capacity(nodes.len());
    for &k in &nodes {
        let r = &scorer.base().nodes[k];
        let (w, a) = split_inputs(scorer, k);
        let mut alone = float.clone();
        alone[k] = base[k].clone();
        let alone_score = scorer.score(&alone)?;
        step(&mut done);
        let can_promote = promotable.contains(&k);
        let promoted = if can_promote {
            let mut p = base.clone();
            set_node(&mut p, k, opts.high, &[], opts.high);
            let s = scorer.score(&p)?;
            step(&mut done);
            Some(s)
        } else {
            None
        };
        let split = if split {
            // a part pinned to float32 (alone) or left at base (promoted)
            let mut measure = |pin: &[usize], promote: bool| -> Result<Option<Score>, QuantError> {
                if pin.len() == r_inputs(scorer, k) || (promote && !can_promote) {
                    return Ok(None);
                }
                let p = if promote {
                    let mut p = base.clone();
                    set_node(&mut p, k, opts.high, pin, base[k].qtype);
                    p
                } else {
                    let mut p = alone.clone();
                    set_node(&mut p, k, base[k].qtype, pin, Precision::Float32);
                    p
                };
                let s = scorer.score(&p)?;
                step(&mut done);
                Ok(Some(s))
            };
            Some(Split {
                weights_alone: measure(&a, false)?,
                activations_alone: measure(&w, false)?,
                weights_promoted: measure(&a, true)?,
                activations_promoted: measure(&w, true)?,
            })
        } else {
            None
        };
        out.push(NodeSensitivity {
            node: r.name.clone(),
            op_type: r.op_type.clone(),
            base: r.qtype,
            macs: macs[k],
            mac_share: crate::ptq::fraction(macs[k] as usize, total_macs as usize, 0.0),
            alone_loss: m.loss(&alone_score),
            alone: alone_score,
            promotion_gain: promoted.as_ref().map(|p| gain(m, &base_score, p)),
            promoted,
            split,
        });
    }
    // most sensitive first; the sort is stable, so ties keep graph order
    out.sort_by(|a, b| b.alone_loss.total_cmp(&a.alone_loss));
    let layers = if opts.layers {
        let l = scorer.layer_errors(&base)?;
        step(&mut done);
        l
    } else {
        vec![]
    };
    Ok(Sensitivity {
        metric: m,
        high: opts.high,
        samples: scorer.samples(),
        base: base_score,
        high_all,
        base_mac_share: mac_shares(&base, &macs),
        nodes: out,
        layers,
    })
}

/// Number of non-empty inputs of node `k`.
fn r_inputs(scorer: &Scorer<'_>, k: usize) -> usize {
    scorer.model().graph.nodes[k]
        .inputs
        .iter()
        .filter(|i| !i.is_empty())
        .count()
}

/// How much better `after` is than `before` on `m` (positive: better).
pub fn gain(m: Metric, before: &Score, after: &Score) -> f64 {
    m.loss(before) - m.loss(after)
}
