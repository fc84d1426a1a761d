//! Aggregating the per-input divergences of one profile pair: per layer,
//! on how many inputs it diverges, the mean share of differing elements and
//! the largest difference, and the stage verdicts; per input, the first
//! diverging layer, and the most common one.

use super::compare::Diff;
use super::stage::Stage;
use super::{Divergence, Unit};
use serde::Serialize;
use std::collections::HashMap;

/// One view (isolated or end to end) of a layer over all inputs.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct View {
    /// Inputs on which the layer has a differing element.
    pub inputs_diverging: usize,
    /// Share of differing elements, averaged over all inputs.
    pub mean_share: f64,
    /// Largest share on any input.
    pub max_share: f64,
    /// Largest difference on any input (LSBs for integer outputs).
    pub max_diff: f64,
}

impl View {
    fn add(&mut self, d: &Diff) {
        if !d.is_identical() {
            self.inputs_diverging += 1;
        }
        self.mean_share += d.share();
        self.max_share = self.max_share.max(d.share());
        self.max_diff = self.max_diff.max(d.max_diff);
    }
}

/// How often one verdict was given for a layer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerdictCount {
    /// The verdict ([`super::Attribution::verdict`]).
    pub verdict: String,
    /// Its primary stage, if a single swap reproduced the difference.
    pub primary: Option<Stage>,
    /// Inputs with this verdict.
    pub inputs: usize,
}

/// One single-policy swap of a layer over the inputs where it diverged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SwapSummary {
    /// The stage swapped.
    pub stage: Stage,
    /// The profile field swapped.
    pub field: &'static str,
    /// Profile A's policy.
    pub a: String,
    /// Profile B's policy.
    pub b: String,
    /// Inputs on which the swap was run.
    pub tried: usize,
    /// Inputs on which the swap alone made the layer differ from A.
    pub inputs_reproducing: usize,
    /// Share of elements differing from A, averaged over the tried inputs.
    pub mean_share_vs_a: f64,
    /// Share of elements differing from B, averaged over the tried inputs
    /// (0: the swap alone gives B's result).
    pub mean_share_vs_b: f64,
    /// Why the swap was not run (the mixed profile is not valid).
    pub skipped: Option<String>,
}

/// One layer over all inputs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayerSummary {
    /// Node name in the lowered graph.
    pub node: String,
    /// Op type.
    pub op: String,
    /// Element type of the first output.
    pub dtype: String,
    /// Units of the `max_diff` fields.
    pub unit: Unit,
    /// Output elements per input (of the first input).
    pub elements: usize,
    /// Same operands for both profiles.
    pub isolated: View,
    /// Each profile running the whole graph.
    pub end_to_end: View,
    /// The most common verdict where the layer diverged in isolation.
    pub verdict: Option<String>,
    /// The primary stage of that verdict.
    pub primary: Option<Stage>,
    /// Every verdict given, most common first.
    pub verdicts: Vec<VerdictCount>,
    /// The swaps, in stage order.
    pub swaps: Vec<SwapSummary>,
}

/// How often a layer was the first to diverge.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FirstCount {
    /// Node name.
    pub node: String,
    /// Op type.
    pub op: String,
    /// Inputs on which it was the first diverging layer.
    pub inputs: usize,
}

/// The divergence of one profile pair over several inputs. It serialises
/// as the `summary` object of `qport.diverge/2` (its headline numbers): the
/// profile names and the layers stand elsewhere in that document.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Profile A's name.
    #[serde(skip)]
    pub a: String,
    /// Profile B's name.
    #[serde(skip)]
    pub b: String,
    /// Number of inputs.
    pub inputs: usize,
    /// Inputs on which some layer diverges in isolation.
    pub inputs_diverging: usize,
    /// Inputs whose chosen graph outputs (but those repeating a model
    /// input) are bit-identical under both profiles.
    pub outputs_identical: usize,
    /// Inputs with a compared output that has an arg-max axis.
    pub top1_compared: usize,
    /// Of those, inputs where every top-1 row of every such output agrees.
    pub top1_agree: usize,
    /// The most common first diverging layer.
    pub first_layer: Option<String>,
    /// Its op type.
    pub first_op: Option<String>,
    /// Its most common verdict.
    pub stage: Option<String>,
    /// The primary stage of that verdict.
    pub primary: Option<Stage>,
    /// First diverging layers, most common first (then in execution
    /// order).
    pub first: Vec<FirstCount>,
    /// Every layer, in execution order.
    #[serde(skip)]
    pub layers: Vec<LayerSummary>,
}

/// Aggregates per-input divergences of one profile pair (from one
/// [`super::Localizer`]). Layers are matched by node name and listed in
/// the execution order of the first input.
pub fn summarize(results: &[Divergence]) -> Summary {
    let (a, b) = results
        .first()
        .map(|d| (d.a.clone(), d.b.clone()))
        .unwrap_or_default();
    let mut layers: Vec<LayerSummary> = vec![];
    let mut by_name: HashMap<String, usize> = HashMap::new();
    let mut verdicts: Vec<Vec<VerdictCount>> = vec![];
    let mut first_counts: HashMap<String, usize> = HashMap::new();
    let (mut inputs_diverging, mut outputs_identical) = (0, 0);
    let (mut top1_compared, mut top1_agree) = (0, 0);
    for d in results {
        if let Some(l) = d.first_layer() {
            inputs_diverging += 1;
            *first_counts.entry(l.node.clone()).or_default() += 1;
        }
        if d.outputs_identical() {
            outputs_identical += 1;
        }
        if let Some(agrees) = d.top1_agrees() {
            top1_compared += 1;
            top1_agree += usize::from(agrees);
        }
        for l in &d.layers {
            let k = *by_name.entry(l.node.clone()).or_insert_with(|| {
                layers.push(LayerSummary {
                    node: l.node.clone(),
                    op: l.op.clone(),
                    dtype: l.dtype.clone(),
                    unit: l.unit,
                    elements: l.isolated.elements,
                    isolated: View::default(),
                    end_to_end: View::default(),
                    verdict: None,
                    primary: None,
                    verdicts: vec![],
                    swaps: vec![],
                });
                verdicts.push(vec![]);
                layers.len() - 1
            });
            let s = &mut layers[k];
            s.isolated.add(&l.isolated);
            s.end_to_end.add(&l.end_to_end);
            let Some(att) = &l.attribution else { continue };
            match verdicts[k].iter_mut().find(|v| v.verdict == att.verdict) {
                Some(v) => v.inputs += 1,
                None => verdicts[k].push(VerdictCount {
                    verdict: att.verdict.clone(),
                    primary: att.primary,
                    inputs: 1,
                }),
            }
            for sw in &att.swaps {
                let i = match s.swaps.iter().position(|x| x.stage == sw.stage) {
                    Some(i) => i,
                    None => {
                        s.swaps.push(SwapSummary {
                            stage: sw.stage,
                            field: sw.field,
                            a: sw.a.clone(),
                            b: sw.b.clone(),
                            tried: 0,
                            inputs_reproducing: 0,
                            mean_share_vs_a: 0.0,
                            mean_share_vs_b: 0.0,
                            skipped: None,
                        });
                        s.swaps.len() - 1
                    }
                };
                let t = &mut s.swaps[i];
                if let (Some(va), Some(vb)) = (sw.vs_a, sw.vs_b) {
                    t.tried += 1;
                    t.inputs_reproducing += usize::from(!va.is_identical());
                    t.mean_share_vs_a += va.share();
                    t.mean_share_vs_b += vb.share();
                }
                if sw.skipped.is_some() {
                    t.skipped.clone_from(&sw.skipped);
                }
            }
        }
    }
    let n = results.len().max(1) as f64;
    for (s, mut v) in layers.iter_mut().zip(verdicts) {
        s.isolated.mean_share /= n;
        s.end_to_end.mean_share /= n;
        for t in &mut s.swaps {
            t.swaps_mean();
        }
        s.swaps.sort_by_key(|t| t.stage);
        // Most common first; the stable sort keeps first-seen order on ties.
        v.sort_by_key(|x| std::cmp::Reverse(x.inputs));
        s.verdict = v.first().map(|x| x.verdict.clone());
        s.primary = v.first().and_then(|x| x.primary);
        s.verdicts = v;
    }
    let mut first: Vec<FirstCount> = layers
        .iter()
        .filter_map(|l| {
            first_counts.get(&l.node).map(|&inputs| FirstCount {
                node: l.node.clone(),
                op: l.op.clone(),
                inputs,
            })
        })
        .collect();
    first.sort_by_key(|x| std::cmp::Reverse(x.inputs));
    let top = first
        .first()
        .and_then(|f| layers.iter().find(|l| l.node == f.node));
    Summary {
        a,
        b,
        inputs: results.len(),
        inputs_diverging,
        outputs_identical,
        top1_compared,
        top1_agree,
        first_layer: top.map(|l| l.node.clone()),
        first_op: top.map(|l| l.op.clone()),
        stage: top.and_then(|l| l.verdict.clone()),
        primary: top.and_then(|l| l.primary),
        first,
        layers,
    }
}

impl SwapSummary {
    /// Turns the sums over tried inputs into means.
    fn swaps_mean(&mut self) {
        if self.tried > 0 {
            self.mean_share_vs_a /= self.tried as f64;
            self.mean_share_vs_b /= self.tried as f64;
        }
    }
}
