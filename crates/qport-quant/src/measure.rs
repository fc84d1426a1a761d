//! Scoring precision assignments against FP32: the engine behind
//! [`crate::sensitivity`] and [`crate::tune`].
//!
//! A [`Scorer`] holds what every candidate shares: the prepared float
//! model, one [`Calibration`] (statistics of every value, observed once),
//! the resolved base config narrowed to one calibrator, the samples and
//! their FP32 outputs (computed once). [`Scorer::score`] exports the QDQ
//! model of one precision assignment with the shared statistics, runs it
//! on every sample and compares each chosen float output with FP32
//! ([`Score`]: mean cosine, pooled SQNR, MSE, top-1 agreement).
//!
//! Samples are split into contiguous chunks run on up to
//! [`Scorer::threads`] threads; each sample's comparison is computed on its
//! own and the results are summed in sample order, so a score is
//! bit-identical whatever the thread count.

use crate::ptq::{self, Calibration, Sample};
use crate::qdq::{self, NodePrecision};
use crate::resolve::Resolved;
use crate::types::Precision;
use crate::QuantError;
use qport_core::compare::{self, FloatDiff, OutputChoice, OutputSpec};
use qport_core::Tensor;
use qport_engine::{Plan, PlanOptions};
use qport_onnx::Model;
use serde::Serialize;
use std::collections::BTreeMap;

/// What a candidate is judged by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// Mean cosine similarity to FP32 (over samples and compared outputs).
    Cosine,
    /// SQNR in dB, signal and noise pooled over samples and outputs.
    Sqnr,
    /// Mean squared error to FP32 per element.
    Mse,
    /// Share of rows whose top-1 index agrees with FP32.
    Top1,
    /// Share of labelled rows whose top-1 index is the label
    /// ([`Scorer::with_labels`]).
    Accuracy,
}

impl Metric {
    /// Name as written on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Cosine => "cosine",
            Metric::Sqnr => "sqnr",
            Metric::Mse => "mse",
            Metric::Top1 => "top1",
            Metric::Accuracy => "accuracy",
        }
    }

    /// The metric's value in `s` (`+inf` SQNR for outputs identical to
    /// FP32; 1 top-1 agreement without an arg-max output, 0 accuracy
    /// without labels). A score with non-finite outputs gets the worst
    /// value: cosine −1, SQNR `−inf`, MSE `+inf`, top-1 and accuracy 0.
    pub fn value(self, s: &Score) -> f64 {
        if s.non_finite_samples > 0 {
            return match self {
                Metric::Cosine => -1.0,
                Metric::Sqnr => f64::NEG_INFINITY,
                Metric::Mse => f64::INFINITY,
                Metric::Top1 | Metric::Accuracy => 0.0,
            };
        }
        match self {
            Metric::Cosine => s.cosine,
            Metric::Sqnr => s.sqnr_db.unwrap_or(f64::INFINITY),
            Metric::Mse => s.mse,
            Metric::Top1 => s.top1.unwrap_or(1.0),
            Metric::Accuracy => s.accuracy.unwrap_or(0.0),
        }
    }

    /// True when larger values are better (all but MSE).
    pub fn higher_is_better(self) -> bool {
        self != Metric::Mse
    }

    /// The error of `s` on a scale where larger is worse: `1 − cosine`,
    /// `−SQNR`, MSE, `1 − top-1`, `1 − accuracy`.
    pub fn loss(self, s: &Score) -> f64 {
        match self {
            Metric::Cosine | Metric::Top1 | Metric::Accuracy => 1.0 - self.value(s),
            Metric::Sqnr => -self.value(s),
            Metric::Mse => self.value(s),
        }
    }
}

impl std::fmt::Display for Metric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a quantized model compares with FP32 on the scorer's samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Score {
    /// Mean cosine similarity over samples and compared outputs.
    pub cosine: f64,
    /// SQNR in dB, signal and noise pooled; `None` when identical to FP32.
    pub sqnr_db: Option<f64>,
    /// Mean squared error per element.
    pub mse: f64,
    /// Top-1 agreement over the rows of outputs with an arg-max axis;
    /// `None` without such an output.
    pub top1: Option<f64>,
    /// Share of labelled rows whose top-1 index is the label; `None`
    /// without labels ([`Scorer::with_labels`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accuracy: Option<f64>,
    /// Samples whose quantized outputs held NaN or an infinity (left out
    /// of the other fields; any makes [`Metric::value`] the worst).
    pub non_finite_samples: usize,
}

/// Sums of per-sample comparisons.
#[derive(Debug, Clone, Copy, Default)]
struct Sums {
    cosine: f64,
    compared: usize,
    signal: f64,
    noise: f64,
    elements: usize,
    rows: usize,
    rows_agree: usize,
    labelled: usize,
    correct: usize,
    non_finite: usize,
}

impl Sums {
    fn add(&mut self, d: &FloatDiff) {
        self.cosine += d.cosine;
        self.compared += 1;
        self.signal += d.signal;
        self.noise += d.noise;
        self.elements += d.elements;
        self.rows += d.rows;
        self.rows_agree += d.rows_agree;
    }

    fn score(&self) -> Score {
        Score {
            cosine: if self.compared == 0 {
                1.0
            } else {
                self.cosine / self.compared as f64
            },
            sqnr_db: compare::sqnr_db(self.signal, self.noise),
            mse: if self.elements == 0 {
                0.0
            } else {
                self.noise / self.elements as f64
            },
            top1: (self.rows > 0).then(|| ptq::fraction(self.rows_agree, self.rows, 1.0)),
            accuracy: (self.labelled > 0).then(|| ptq::fraction(self.correct, self.labelled, 0.0)),
            non_finite_samples: self.non_finite,
        }
    }
}

/// Runs `f` on every item of `items`, split into up to `threads`
/// contiguous chunks run in parallel; the results come back in item order.
pub fn par_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> Result<R, QuantError> + Sync,
) -> Result<Vec<R>, QuantError> {
    let t = threads.clamp(1, items.len().max(1));
    if t == 1 {
        return items.iter().map(&f).collect();
    }
    let per = items.len().div_ceil(t);
    let f = &f;
    let parts: Vec<Result<Vec<R>, QuantError>> = std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(per)
            .map(|chunk| s.spawn(move || chunk.iter().map(f).collect::<Result<Vec<R>, _>>()))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(QuantError::Internal("a scoring thread panicked".into()))
                })
            })
            .collect()
    });
    let mut out = Vec::with_capacity(items.len());
    for p in parts {
        out.extend(p?);
    }
    Ok(out)
}

/// Scores precision assignments of one model on fixed samples (see the
/// [module docs](self)).
pub struct Scorer<'a> {
    model: &'a Model,
    calib: &'a Calibration,
    base: Resolved,
    samples: Vec<Sample>,
    reference: Vec<Vec<(String, Tensor)>>,
    specs: Vec<(usize, OutputSpec)>,
    threads: usize,
    bias: Option<std::sync::Arc<crate::bias::InputMeans>>,
    labels: Option<Labelled>,
}

/// The labels of a [`Scorer`]: the class output and each sample's rows.
#[derive(Clone)]
struct Labelled {
    /// Index into `specs` of the output the labels are for.
    spec: usize,
    /// Each sample's labels, one per row of that output.
    rows: std::sync::Arc<Vec<Vec<usize>>>,
    /// Each sample's rows FP32 gets right.
    fp32_correct: std::sync::Arc<Vec<usize>>,
}

/// Rows of `out` (shape `shape`) along `axis` whose arg-max is the label.
fn correct_rows(out: &[f32], shape: &[usize], axis: usize, labels: &[usize]) -> usize {
    qport_core::metrics::lanes(out, shape, axis)
        .iter()
        .zip(labels)
        .filter(|(lane, &l)| qport_core::metrics::argmax(lane) == Some(l))
        .count()
}

impl<'a> Scorer<'a> {
    /// A scorer of `model` (the prepared float model `base` was resolved
    /// for, narrowed to one calibrator with [`ptq::narrow`]) on `samples`,
    /// comparing the outputs `choice` selects; runs FP32 on every sample
    /// once. Fails on an empty sample set, a non-finite FP32 output or an
    /// output choice that does not fit the model.
    pub fn new(
        model: &'a Model,
        calib: &'a Calibration,
        base: Resolved,
        samples: Vec<Sample>,
        choice: &OutputChoice,
        threads: usize,
    ) -> Result<Scorer<'a>, QuantError> {
        if samples.is_empty() {
            return Err(QuantError::Outputs("no samples to score on".into()));
        }
        let fp32 = Plan::new(model)?;
        let reference = par_map(&samples, threads, |s| {
            let out = fp32.run(s.inputs.clone())?;
            if let Some((k, v)) = compare::non_finite_output(&out) {
                return Err(QuantError::Outputs(format!(
                    "{}: the FP32 output '{}' holds {}",
                    s.origin,
                    out[k].0,
                    v.what()
                )));
            }
            Ok(out)
        })?;
        let specs = choice
            .specs(&reference[0], |_| None)
            .map_err(QuantError::Outputs)?
            .into_iter()
            .filter(|(i, _)| reference[0][*i].1.dtype().is_float())
            .collect();
        Ok(Scorer {
            model,
            calib,
            base,
            samples,
            reference,
            specs,
            threads: threads.max(1),
            bias: None,
            labels: None,
        })
    }

    /// The same scorer judging accuracy against `classes`: one class index
    /// per row of the first compared output with a class axis, over the
    /// samples in order (one per sample for a batch-1 classifier). Fails
    /// without such an output, on a count that does not match its rows,
    /// or on a class index outside its classes.
    pub fn with_labels(mut self, classes: &[usize]) -> Result<Scorer<'a>, QuantError> {
        let (spec, (out, axis)) = self
            .specs
            .iter()
            .enumerate()
            .find_map(|(j, (k, sp))| sp.argmax_axis.map(|a| (j, (*k, a))))
            .ok_or_else(|| {
                QuantError::Outputs(
                    "labels need an output with a class axis (an [N, C] output, or --argmax-axis)"
                        .into(),
                )
            })?;
        let name = &self.specs[spec].1.name;
        // rows of the class output per sample: its elements over its classes
        let row_counts: Vec<usize> = self
            .reference
            .iter()
            .map(|r| {
                let s = r[out].1.shape();
                s.iter().product::<usize>() / s.get(axis).copied().unwrap_or(1).max(1)
            })
            .collect();
        let total: usize = row_counts.iter().sum();
        if total != classes.len() {
            return Err(QuantError::Outputs(format!(
                "{} labels for {} samples: output '{name}' has {total} rows over them (one label per row)",
                classes.len(),
                self.samples.len()
            )));
        }
        let mut rows = Vec::with_capacity(self.samples.len());
        let mut fp32_correct = Vec::with_capacity(self.samples.len());
        let mut at = 0usize;
        for (r, &n) in self.reference.iter().zip(&row_counts) {
            let t = &r[out].1;
            let classes_n = t.shape().get(axis).copied().unwrap_or(0);
            let mine = &classes[at..at + n];
            if let Some(&bad) = mine.iter().find(|&&c| c >= classes_n) {
                return Err(QuantError::Outputs(format!(
                    "label {bad} is not a class of output '{name}' ({classes_n} classes along axis {axis})"
                )));
            }
            fp32_correct.push(correct_rows(&t.to_f32_vec()?, t.shape(), axis, mine));
            rows.push(mine.to_vec());
            at += n;
        }
        self.labels = Some(Labelled {
            spec,
            rows: std::sync::Arc::new(rows),
            fp32_correct: std::sync::Arc::new(fp32_correct),
        });
        Ok(self)
    }

    /// FP32's accuracy on the labels (`None` without labels).
    pub fn fp32_accuracy(&self) -> Option<f64> {
        self.labels.as_ref().map(|l| {
            let rows: usize = l.rows.iter().map(Vec::len).sum();
            ptq::fraction(l.fp32_correct.iter().sum(), rows, 0.0)
        })
    }

    /// The same scorer on its first `n` samples only (FP32 outputs reused).
    pub fn first(&self, n: usize) -> Scorer<'a> {
        let n = n.clamp(1, self.samples.len());
        Scorer {
            model: self.model,
            calib: self.calib,
            base: self.base.clone(),
            samples: self.samples[..n].to_vec(),
            reference: self.reference[..n].to_vec(),
            specs: self.specs.clone(),
            threads: self.threads,
            bias: self.bias.clone(),
            labels: self.labels.as_ref().map(|l| Labelled {
                spec: l.spec,
                rows: std::sync::Arc::new(l.rows[..n].to_vec()),
                fp32_correct: std::sync::Arc::new(l.fp32_correct[..n].to_vec()),
            }),
        }
    }

    /// The same scorer (samples, FP32 outputs, statistics) with another
    /// base config: `base` must be a resolution of the same model narrowed
    /// to one calibrator ([`ptq::narrow`]), e.g. another calibrator or
    /// asymmetric setting.
    pub fn with_base(&self, base: Resolved) -> Scorer<'a> {
        Scorer {
            model: self.model,
            calib: self.calib,
            base,
            samples: self.samples.clone(),
            reference: self.reference.clone(),
            specs: self.specs.clone(),
            threads: self.threads,
            bias: self.bias.clone(),
            labels: self.labels.clone(),
        }
    }

    /// The same scorer with every export bias-corrected
    /// ([`crate::bias::apply`] with `means`, then exported again).
    pub fn with_bias_correction(mut self, means: crate::bias::InputMeans) -> Scorer<'a> {
        self.bias = Some(std::sync::Arc::new(means));
        self
    }

    /// The prepared float model.
    pub fn model(&self) -> &'a Model {
        self.model
    }

    /// The base config every assignment starts from.
    pub fn base(&self) -> &Resolved {
        &self.base
    }

    /// The calibration statistics.
    pub fn calibration(&self) -> &'a Calibration {
        self.calib
    }

    /// Number of samples scored on.
    pub fn samples(&self) -> usize {
        self.samples.len()
    }

    /// Threads the samples are split across.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Fails when `metric` is top-1 and no compared output has a class axis.
    pub fn check_metric(&self, metric: Metric) -> Result<(), QuantError> {
        if metric == Metric::Top1 && !self.has_top1() {
            return Err(QuantError::Outputs(
                "top-1 needs an output with a class axis (an [N, C] output, or --argmax-axis)"
                    .into(),
            ));
        }
        if metric == Metric::Accuracy && self.labels.is_none() {
            return Err(QuantError::Outputs(
                "accuracy needs labels (--labels)".into(),
            ));
        }
        Ok(())
    }

    /// True when some compared output has an arg-max axis (top-1 is measured).
    pub fn has_top1(&self) -> bool {
        self.specs.iter().any(|(_, s)| s.argmax_axis.is_some())
    }

    /// The base config's node precisions.
    pub fn base_precisions(&self) -> Vec<NodePrecision> {
        ptq::precisions(&self.base)
    }

    /// `resolved` with the node precisions of `prec` (the config's
    /// `node_config` is rebuilt from them by [`ptq::node_table`]).
    pub fn resolved_with(&self, prec: &[NodePrecision]) -> Resolved {
        let mut r = self.base.clone();
        for (n, p) in r.nodes.iter_mut().zip(prec) {
            n.qtype = p.qtype;
            n.input_types = p.input_types.clone();
        }
        r
    }

    /// The QDQ export of `prec` with the shared statistics.
    pub fn export(&self, prec: &[NodePrecision]) -> Result<qdq::Exported, QuantError> {
        let r = self.resolved_with(prec);
        let method = r.activation.methods[0];
        let e = ptq::export_with(self.model, &r, self.calib, None, method)?;
        match &self.bias {
            None => Ok(e),
            Some(means) => {
                let (corrected, _) = crate::bias::apply(self.model, &e.model, means)?;
                ptq::export_with(&corrected, &r, self.calib, None, method)
            }
        }
    }

    /// Scores `prec` (one entry per node) against FP32 on every sample.
    pub fn score(&self, prec: &[NodePrecision]) -> Result<Score, QuantError> {
        let exported = self.export(prec)?;
        let plan = Plan::new(&exported.model)?;
        let idx: Vec<usize> = (0..self.samples.len()).collect();
        let per_sample = par_map(&idx, self.threads, |&i| {
            let out = plan.run(self.samples[i].inputs.clone())?;
            if compare::non_finite_output(&out).is_some() {
                return Ok(None);
            }
            let mut diffs = Vec::with_capacity(self.specs.len());
            let mut correct = (0, 0);
            for (j, (k, spec)) in self.specs.iter().enumerate() {
                let (r, q) = (&self.reference[i][*k].1, &out[*k].1);
                if r.shape() != q.shape() {
                    return Err(QuantError::Outputs(format!(
                        "output '{}': shape {:?} in FP32, {:?} quantized",
                        spec.name,
                        r.shape(),
                        q.shape()
                    )));
                }
                let (r, q) = (r.to_f32_vec()?, q.to_f32_vec()?);
                let shape = self.reference[i][*k].1.shape();
                if let (Some(l), Some(axis)) = (&self.labels, spec.argmax_axis) {
                    if l.spec == j {
                        let rows = &l.rows[i];
                        correct = (correct_rows(&q, shape, axis, rows), rows.len());
                    }
                }
                diffs.push(compare::compare_float(&r, &q, shape, spec));
            }
            Ok(Some((diffs, correct)))
        })?;
        let mut sums = Sums::default();
        for d in &per_sample {
            match d {
                Some((d, (correct, rows))) => {
                    d.iter().for_each(|d| sums.add(d));
                    sums.correct += correct;
                    sums.labelled += rows;
                }
                None => sums.non_finite += 1,
            }
        }
        Ok(sums.score())
    }

    /// The error of every node's first float output against FP32, in graph
    /// order, when the model runs with `prec`: how the error accumulates
    /// from the input layer by layer. Mean cosine and pooled SQNR over the
    /// samples; nodes whose output is not a float value are left out.
    pub fn layer_errors(&self, prec: &[NodePrecision]) -> Result<Vec<LayerError>, QuantError> {
        let exported = self.export(prec)?;
        let fp32 = Plan::with_options(self.model, PlanOptions::unfused())?;
        let quant = Plan::with_options(&exported.model, PlanOptions::unfused())?;
        let g = &self.model.graph;
        let wanted: BTreeMap<&str, usize> = g
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.outputs.first().map(|o| (o.as_str(), i)))
            .collect();
        let idx: Vec<usize> = (0..self.samples.len()).collect();
        let per_sample = par_map(&idx, self.threads, |&i| {
            let inputs = self.samples[i].inputs.clone();
            let mut seen: BTreeMap<usize, Vec<f32>> = BTreeMap::new();
            fp32.run_with_tap(inputs.clone(), &mut |name, t| {
                if let (Some(&k), true) = (wanted.get(name), t.dtype().is_float()) {
                    if let Ok(v) = t.to_f32_vec() {
                        seen.insert(k, v);
                    }
                }
            })?;
            let mut diffs: BTreeMap<usize, (f64, f64, f64)> = BTreeMap::new();
            quant.run_with_tap(inputs, &mut |name, t| {
                let Some(&k) = wanted.get(name) else { return };
                let (Some(r), Ok(q)) = (seen.get(&k), t.to_f32_vec()) else {
                    return;
                };
                if r.len() != q.len() {
                    return;
                }
                let spec = OutputSpec {
                    name: name.to_string(),
                    argmax_axis: None,
                    step: None,
                };
                let d = compare::compare_float(r, &q, &[r.len()], &spec);
                diffs.insert(k, (d.cosine, d.signal, d.noise));
            })?;
            Ok(diffs)
        })?;
        let mut sums: BTreeMap<usize, (f64, f64, f64, usize)> = BTreeMap::new();
        for d in &per_sample {
            for (k, (c, s, n)) in d {
                let e = sums.entry(*k).or_default();
                e.0 += c;
                e.1 += s;
                e.2 += n;
                e.3 += 1;
            }
        }
        Ok(sums
            .into_iter()
            .map(|(k, (c, s, n, count))| LayerError {
                node: self.base.nodes[k].name.clone(),
                op_type: self.base.nodes[k].op_type.clone(),
                qtype: prec[k].qtype,
                cosine: c / count as f64,
                sqnr_db: compare::sqnr_db(s, n),
            })
            .collect())
    }

    /// Multiply-accumulates of every node (0 for non-GEMM nodes), from the
    /// calibration's shapes.
    pub fn node_macs(&self) -> Vec<u64> {
        self.model
            .graph
            .nodes
            .iter()
            .map(|n| ptq::node_macs(self.model, n, &self.calib.values))
            .collect()
    }

    /// The nodes whose inputs are quantized (or held in float16) when
    /// every node runs at `qtype`: those a precision change affects.
    pub fn affected_nodes(&self, qtype: Precision) -> Vec<bool> {
        let prec: Vec<NodePrecision> = self
            .base
            .nodes
            .iter()
            .map(|_| NodePrecision {
                qtype,
                input_types: BTreeMap::new(),
            })
            .collect();
        qdq::quantized_inputs(
            self.model,
            &prec,
            &self.calib.values,
            self.base.weight.per_channel,
        )
        .into_iter()
        .map(|roles| roles.iter().any(|(_, q)| q.is_some()))
        .collect()
    }
}

/// The error of one node's output against FP32 (see [`Scorer::layer_errors`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayerError {
    /// Node name.
    pub node: String,
    /// Op type.
    pub op_type: String,
    /// The node's precision in the run.
    pub qtype: Precision,
    /// Mean cosine of its output to FP32.
    pub cosine: f64,
    /// Pooled SQNR of its output (`None`: identical to FP32).
    pub sqnr_db: Option<f64>,
}

/// Share of MACs per precision name under `prec` (`macs` per node, from
/// [`Scorer::node_macs`]); empty when the model has no MACs.
pub fn mac_shares(prec: &[NodePrecision], macs: &[u64]) -> BTreeMap<String, f64> {
    let total: u64 = macs.iter().sum();
    let mut m: BTreeMap<String, u64> = BTreeMap::new();
    for (p, &k) in prec.iter().zip(macs) {
        if k > 0 {
            *m.entry(crate::config::qtype_name(p.qtype).to_string())
                .or_default() += k;
        }
    }
    m.into_iter()
        .map(|(k, v)| (k, v as f64 / total.max(1) as f64))
        .collect()
}
