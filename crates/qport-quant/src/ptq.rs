//! Post-training quantization, end to end: calibrate a float model on
//! streamed samples, export a QDQ model per calibrator, keep the best by
//! output cosine when several are configured, and evaluate it against FP32.
//!
//! Memory does not grow with the number of samples: every value has one
//! [`Observer`] (fixed-size histogram) and only the first
//! [`CalibrateOptions::keep_for_selection`] samples are kept, to compare
//! calibrators.
//!
//! ```no_run
//! use qport_quant::{ptq, resolve, template};
//! let model = qport_onnx::load::load("model.onnx").unwrap();
//! let registry = qport_platform::Registry::builtin();
//! let platform = registry.get("j6m").unwrap();
//! let prepared = ptq::prepare(&model);
//! let base = template::template(platform, template::Template::Default);
//! let resolved = resolve::resolve(&prepared, platform, &base, None).unwrap();
//! # let samples: Vec<Result<ptq::Sample, qport_quant::QuantError>> = vec![];
//! let calib = ptq::calibrate(&prepared, &resolved, samples.into_iter(),
//!     &ptq::CalibrateOptions::default(), &mut |_| {}).unwrap();
//! let chosen = ptq::quantize(&prepared, &resolved, &calib, None).unwrap();
//! qport_onnx::save(&chosen.exported.model, "model.qdq.onnx").unwrap();
//! ```

use crate::calib::{self, CalibOptions};
use crate::import::Imported;
use crate::observer::{ChannelObserver, Observer, ObserverOptions};
use crate::qdq::{self, ExportOptions, Exported, NodePrecision, ValueFacts};
use crate::resolve::Resolved;
use crate::types::{CalibMethod, Grid, Precision, QParams};
use crate::QuantError;
use qport_core::compare::{self, NonFiniteOutput, OutputAcc, OutputChoice, OutputStats};
use qport_core::{metrics, DType, Tensor};
use qport_engine::{Plan, PlanOptions};
use qport_onnx::Model;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// One calibration or evaluation sample: named model inputs, with where it
/// came from (`origin`, for messages) and its position in its dataset; the
/// sample type of `qport_data`, so a dataset's samples calibrate as read.
pub use qport_data::Sample;

/// Options of [`calibrate`].
#[derive(Debug, Clone)]
pub struct CalibrateOptions {
    /// Samples kept in memory to choose between calibrators (default 16).
    pub keep_for_selection: usize,
}

impl Default for CalibrateOptions {
    fn default() -> Self {
        CalibrateOptions {
            keep_for_selection: 16,
        }
    }
}

/// Statistics of every float value of a model over a calibration set.
pub struct Calibration {
    /// One observer per float value (graph inputs and node outputs).
    pub observers: BTreeMap<String, Observer>,
    /// Dtype and shape of every run-time value (from the first sample).
    pub values: ValueFacts,
    /// Per-channel observers (axis 1) of every float value of rank >= 2,
    /// kept only when the config asks for per-channel activations (min/max
    /// statistics; small histograms).
    pub channels: BTreeMap<String, ChannelObserver>,
    /// Number of samples seen.
    pub samples: usize,
    /// The first samples, kept to compare calibrators.
    pub selection: Vec<Sample>,
}

/// The float model quantization starts from: batch norms folded into
/// convolutions (as deployment toolchains do before quantizing).
pub fn prepare(model: &Model) -> Model {
    qport_engine::fold_batch_norms(model)
}

/// Runs `model` (unfused, every value tapped) on every sample and observes
/// every float value. `progress` is called with the number of samples done.
/// NaN or infinity anywhere (inputs or intermediate values) is an error
/// naming the sample and tensor.
pub fn calibrate(
    model: &Model,
    resolved: &Resolved,
    samples: impl Iterator<Item = Result<Sample, QuantError>>,
    opts: &CalibrateOptions,
    progress: &mut dyn FnMut(usize),
) -> Result<Calibration, QuantError> {
    let plan = Plan::with_options(model, PlanOptions::unfused())?;
    let oopts = ObserverOptions {
        ema_momentum: ema_weight(resolved),
        ..ObserverOptions::default()
    };
    let mut observers: BTreeMap<String, Observer> = BTreeMap::new();
    let mut channels: BTreeMap<String, ChannelObserver> = BTreeMap::new();
    let per_channel = resolved.activation.per_channel;
    let copts = ObserverOptions {
        hist_bins: 16,
        ..oopts
    };
    let mut values: ValueFacts = HashMap::new();
    let mut selection = Vec::new();
    let mut n = 0usize;
    let inputs: Vec<&str> = model.graph.inputs.iter().map(|v| v.name.as_str()).collect();
    // The plan runs the next sample on a second thread (its values copied
    // out through the tap) while this thread observes the previous one's,
    // in the order one thread would: the statistics do not change.
    type Ran = (
        Sample,
        Result<Vec<(String, Tensor)>, qport_engine::EngineError>,
    );
    std::thread::scope(|scope| -> Result<(), QuantError> {
        let (to_run, jobs) = std::sync::mpsc::sync_channel::<Sample>(1);
        let (ran, done) = std::sync::mpsc::sync_channel::<Ran>(1);
        let plan = &plan;
        scope.spawn(move || {
            for s in jobs {
                let mut taps = Vec::new();
                let r = plan
                    .run_with_tap(s.inputs.clone(), &mut |name, t| {
                        taps.push((name.to_string(), t.clone()))
                    })
                    .map(|_| taps);
                if ran.send((s, r)).is_err() {
                    break;
                }
            }
        });
        let stopped = || QuantError::Internal("the calibration thread stopped".into());
        // per sample read, in order: sent to the thread, or its read error
        let mut pending: std::collections::VecDeque<Option<QuantError>> = Default::default();
        let mut samples = samples;
        let mut more = true;
        loop {
            while more && pending.len() < 2 {
                match samples.next() {
                    Some(Ok(s)) => {
                        to_run.send(s).map_err(|_| stopped())?;
                        pending.push_back(None);
                    }
                    Some(Err(e)) => {
                        pending.push_back(Some(e));
                        more = false;
                    }
                    None => more = false,
                }
            }
            match pending.pop_front() {
                None => break,
                Some(Some(e)) => return Err(e),
                Some(None) => {}
            }
            let (s, run) = done.recv().map_err(|_| stopped())?;
            let mut failure: Option<QuantError> = None;
            let mut observe = |name: &str, t: &Tensor| {
                if failure.is_some() {
                    return;
                }
                values
                    .entry(name.to_string())
                    .or_insert_with(|| (t.dtype(), t.shape().to_vec()));
                if t.dtype() != DType::F32 {
                    return;
                }
                let Ok(v) = t.as_slice::<f32>() else { return };
                let o = observers.entry(name.to_string()).or_insert_with(|| {
                    let mut o = Observer::new(oopts);
                    // a model input may hold 8-bit pixels: exact on uint8
                    if inputs.contains(&name) {
                        o.track_levels();
                    }
                    o
                });
                if let Err(e) = o.observe(v) {
                    failure = Some(QuantError::NonFinite {
                        sample: s.origin.clone(),
                        tensor: name.to_string(),
                        count: e.count,
                    });
                    return;
                }
                if per_channel && t.rank() >= 2 {
                    let c = channels
                        .entry(name.to_string())
                        .or_insert_with(|| ChannelObserver::new(copts));
                    if let Err(e) = c.observe(v, t.shape(), 1) {
                        failure = Some(QuantError::Internal(format!(
                            "per-channel statistics of '{name}': {e}"
                        )));
                    }
                }
            };
            for (name, t) in &s.inputs {
                observe(name, t);
            }
            for (name, t) in &run? {
                observe(name, t);
            }
            if let Some(e) = failure {
                return Err(e);
            }
            if selection.len() < opts.keep_for_selection {
                selection.push(s);
            }
            n += 1;
            progress(n);
        }
        Ok(())
    })?;
    if n == 0 {
        return Err(QuantError::EmptyCalibration);
    }
    Ok(Calibration {
        observers,
        channels,
        values,
        samples: n,
        selection,
    })
}

/// The observer's EMA weight of a new batch from the config's momentum
/// (`ema_momentum` is the weight kept by the running value, vendor style:
/// `ema = m · ema + (1 - m) · batch`).
fn ema_weight(resolved: &Resolved) -> f32 {
    let m = resolved.activation.ema_momentum;
    (1.0 - m).clamp(1e-6, 1.0)
}

/// One configuration tried by [`quantize`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    /// Calibrator.
    pub method: CalibMethod,
    /// Asymmetric activations.
    pub asymmetric: bool,
    /// Mean output cosine vs FP32 on the selection samples.
    pub output_cosine: f64,
}

/// A quantized model and how it was made.
#[derive(Debug, Clone)]
pub struct Quantized {
    /// The calibrator used for activations.
    pub method: CalibMethod,
    /// Whether activations are asymmetric.
    pub asymmetric: bool,
    /// The exported QDQ model and the tensors it quantized.
    pub exported: Exported,
    /// Every configuration tried on the selection samples (empty when only
    /// one was configured).
    pub candidates: Vec<Candidate>,
    /// The resolved config of the chosen configuration (its
    /// `calibration_type` and `asymmetric` narrowed to the choice).
    pub resolved: Resolved,
}

/// `resolved` narrowed to one calibrator and one activation symmetry, in
/// the settings and in the config it records.
pub fn narrow(resolved: &Resolved, method: CalibMethod, asymmetric: bool) -> Resolved {
    use crate::config::OneOrMany;
    let mut r = resolved.clone();
    r.activation.methods = vec![method];
    r.activation.asymmetric = asymmetric;
    let mc = r.config.model_config.get_or_insert_with(Default::default);
    let act = mc.activation.get_or_insert_with(Default::default);
    act.calibration_type = Some(OneOrMany::One(method));
    act.asymmetric = Some(OneOrMany::One(asymmetric));
    r
}

/// Every node's precisions in `resolved`, in graph order (what the export takes).
pub fn precisions(resolved: &Resolved) -> Vec<NodePrecision> {
    resolved
        .nodes
        .iter()
        .map(|n| NodePrecision {
            qtype: n.qtype,
            input_types: n.input_types.clone(),
        })
        .collect()
}

fn export_options(
    resolved: &Resolved,
    method: CalibMethod,
    loaded: Option<&Imported>,
) -> ExportOptions {
    let config = serde_json::to_string(&resolved.config).unwrap_or_default();
    ExportOptions {
        act_signed: !resolved.activation.asymmetric,
        weight_per_channel: resolved.weight.per_channel,
        weight_symmetric: !resolved.weight.asymmetric,
        weight_pot: resolved.weight.power_of_two,
        model_output_type: resolved.model_output_type,
        metadata: vec![
            ("qport.platform".into(), resolved.platform.clone()),
            (
                "qport.tail_output".into(),
                match resolved.tail_output {
                    qport_platform::HighAccuracyOutput::Int32Dequantize => "int32-dequantize",
                    qport_platform::HighAccuracyOutput::Float32 => "float32",
                }
                .into(),
            ),
            ("qport.calibration".into(), method.name().into()),
            ("qport.quant_config".into(), config),
        ],
        // `load` keeps the loaded weight and bias parameters as they are
        preset_weights: match (method, loaded) {
            (CalibMethod::Load, Some(imp)) => imp.weights.clone(),
            _ => BTreeMap::new(),
        },
        preset_integers: match (method, loaded) {
            (CalibMethod::Load, Some(imp)) => imp.weight_integers.clone(),
            _ => BTreeMap::new(),
        },
    }
}

/// Parameters of activation `tensor` on `grid` by `method`: a
/// `tensor_config` override first, then scales loaded from a QDQ model
/// (`load`), then the calibrator.
pub fn activation_params(
    resolved: &Resolved,
    calib: &Calibration,
    loaded: Option<&Imported>,
    method: CalibMethod,
    tensor: &str,
    grid: Grid,
) -> Result<QParams, QuantError> {
    let a = &resolved.activation;
    let symmetric = grid.is_signed();
    if let Some((scales, zero_points)) = resolved
        .tensor_overrides
        .get(tensor)
        .and_then(|o| o.fixed(grid))
    {
        return Ok(QParams {
            grid,
            axis: if scales.len() > 1 { Some(1) } else { None },
            scales,
            zero_points,
        });
    }
    let method = resolved
        .tensor_overrides
        .get(tensor)
        .and_then(|o| o.method)
        .unwrap_or(method);
    if method == CalibMethod::Load {
        let imp = loaded.ok_or_else(|| {
            QuantError::Import("calibration 'load' needs a QDQ model to load scales from".into())
        })?;
        if let Some(p) = imp.activation(tensor, grid) {
            return Ok(p.clone());
        }
        // same tensor on another grid: convert through its float range
        if let Some(p) = imp.activations.get(tensor).and_then(|v| v.first()) {
            let (qmin, qmax) = p.grid.bounds();
            let s = p.scales[0];
            let z = p.zero_points[0] as f32;
            let lo = (qmin as f32 - z) * s;
            let hi = (qmax as f32 - z) * s;
            return Ok(calib::params_from_range(
                lo,
                hi,
                grid,
                symmetric,
                a.power_of_two,
            ));
        }
        return Err(QuantError::Import(format!(
            "the loaded model has no scale for tensor '{tensor}'"
        )));
    }
    let obs = calib
        .observers
        .get(tensor)
        .ok_or_else(|| QuantError::Unobserved(tensor.to_string()))?;
    let copts = CalibOptions {
        num_bin: a.num_bin as usize,
        max_num_bin: a.max_num_bin as usize,
        max_percentile: a.max_percentile,
    };
    if a.per_channel {
        if let Some(c) = calib.channels.get(tensor) {
            if !matches!(method, CalibMethod::Max | CalibMethod::Ema) {
                return Err(QuantError::Calib {
                    tensor: tensor.to_string(),
                    source: crate::calib::CalibError::Unsupported {
                        method,
                        reason: "per-channel activations are calibrated with max or ema only",
                    },
                });
            }
            return calib::channel_params(c, method, grid, symmetric, a.power_of_two, &copts)
                .map_err(|e| QuantError::Calib {
                    tensor: tensor.to_string(),
                    source: e,
                });
        }
    }
    let (lo, hi) =
        calib::range(obs, method, grid, symmetric, &copts).map_err(|e| QuantError::Calib {
            tensor: tensor.to_string(),
            source: e,
        })?;
    Ok(calib::params_from_range(
        lo,
        hi,
        grid,
        symmetric,
        a.power_of_two,
    ))
}

/// Exports the model with one calibrator.
pub fn export_with(
    model: &Model,
    resolved: &Resolved,
    calib: &Calibration,
    loaded: Option<&Imported>,
    method: CalibMethod,
) -> Result<Exported, QuantError> {
    let prec = precisions(resolved);
    let opts = export_options(resolved, method, loaded);
    let mut params = |t: &str, g: Grid| activation_params(resolved, calib, loaded, method, t, g);
    qdq::export(model, &prec, &calib.values, &mut params, &opts)
}

/// Mean cosine over samples and outputs between FP32 and a quantized plan.
fn mean_cosine(fp32: &Plan, q: &Plan, samples: &[Sample]) -> Result<f64, QuantError> {
    let mut sum = 0.0;
    let mut n = 0usize;
    for s in samples {
        let a = fp32.run(s.inputs.clone())?;
        let b = q.run(s.inputs.clone())?;
        for ((_, x), (_, y)) in a.iter().zip(&b) {
            if let (Ok(x), Ok(y)) = (x.to_f32_vec(), y.to_f32_vec()) {
                sum += metrics::cosine(&x, &y);
                n += 1;
            }
        }
    }
    Ok(if n == 0 { 0.0 } else { sum / n as f64 })
}

/// Mean output cosines closer than this are a tie when [`quantize`]
/// chooses among calibrators: far below any difference in accuracy, and
/// above what the summation order of the float kernels moves (PP-OCR's
/// full-int16 symmetric and asymmetric candidates differ by 2e-12).
pub const SELECTION_TIE: f64 = 1e-9;

/// Quantizes with the configured calibrator, or, when the config lists
/// several calibrators and/or both activation symmetries (`calibration_type`
/// and `asymmetric` as lists, vendor style), with each combination, keeping
/// the best by mean output cosine on the selection samples. A candidate
/// must beat the best so far by more than [`SELECTION_TIE`] to replace it,
/// so candidates that tie to within rounding keep the configured order (the
/// first listed wins) rather than a last-ulp difference in the float
/// arithmetic deciding. `loaded` supplies scales for `load`.
pub fn quantize(
    model: &Model,
    resolved: &Resolved,
    calib: &Calibration,
    loaded: Option<&Imported>,
) -> Result<Quantized, QuantError> {
    let methods = resolved.activation.methods.clone();
    let mut asyms = resolved.activation.candidates.asymmetric.clone();
    if asyms.is_empty() || methods.contains(&CalibMethod::Load) {
        asyms = vec![resolved.activation.asymmetric];
    }
    asyms.dedup();
    let combos: Vec<(CalibMethod, bool)> = methods
        .iter()
        .flat_map(|&m| asyms.iter().map(move |&a| (m, a)))
        .collect();
    if combos.len() == 1 {
        let (m, a) = combos[0];
        let r = narrow(resolved, m, a);
        return Ok(Quantized {
            method: m,
            asymmetric: a,
            exported: export_with(model, &r, calib, loaded, m)?,
            candidates: Vec::new(),
            resolved: r,
        });
    }
    let fp32 = Plan::new(model)?;
    let mut best: Option<(f64, CalibMethod, bool, Exported, Resolved)> = None;
    let mut candidates = Vec::new();
    for (m, a) in combos {
        let r = narrow(resolved, m, a);
        let e = export_with(model, &r, calib, loaded, m)?;
        let q = Plan::new(&e.model)?;
        let c = mean_cosine(&fp32, &q, &calib.selection)?;
        candidates.push(Candidate {
            method: m,
            asymmetric: a,
            output_cosine: c,
        });
        if best.as_ref().is_none_or(|b| c > b.0 + SELECTION_TIE) {
            best = Some((c, m, a, e, r));
        }
    }
    let (_, method, asymmetric, exported, resolved) =
        best.ok_or_else(|| QuantError::Internal("no calibrator".into()))?;
    Ok(Quantized {
        method,
        asymmetric,
        exported,
        candidates,
        resolved,
    })
}

/// Evaluation of a quantized model against FP32: every chosen output
/// compared on its own ([`qport_core::compare`]).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Evaluation {
    /// Number of samples.
    pub samples: usize,
    /// Per-output statistics, in graph order.
    pub outputs: Vec<OutputStats>,
}

/// `part / whole`, or `empty` when `whole` is 0.
pub fn fraction(part: usize, whole: usize, empty: f64) -> f64 {
    if whole == 0 {
        empty
    } else {
        part as f64 / whole as f64
    }
}

/// The error for a non-finite output of `plan` (run `run`) on `sample`,
/// naming the first node that produced a non-finite value.
fn non_finite_error(
    plan: &Plan,
    run: &str,
    sample: &Sample,
    outputs: &[(String, Tensor)],
) -> Result<Option<QuantError>, QuantError> {
    let Some((k, v)) = compare::non_finite_output(outputs) else {
        return Ok(None);
    };
    let origin = plan.first_non_finite(sample.inputs.clone())?;
    Ok(Some(QuantError::NonFiniteOutput(NonFiniteOutput {
        output: outputs[k].0.clone(),
        run: run.to_string(),
        sample: sample.origin.clone(),
        nan: v.nan,
        origin: origin.map(Box::new),
    })))
}

/// Runs both plans on every sample and compares the outputs `choice`
/// selects, each on its own, the quantized run against FP32 (`quant_model`
/// gives the outputs' quantization steps). Fails with
/// [`QuantError::NonFiniteOutput`] when either run gives NaN or an
/// infinity in any output, and with [`QuantError::Outputs`] for an unknown
/// output or axis, or runs whose outputs differ in type or shape.
pub fn evaluate(
    fp32: &Plan,
    quant: &Plan,
    quant_model: &Model,
    choice: &OutputChoice,
    samples: impl Iterator<Item = Result<Sample, QuantError>>,
    progress: &mut dyn FnMut(usize),
) -> Result<Evaluation, QuantError> {
    let mut ev = Evaluation::default();
    let mut accs: Vec<(usize, OutputAcc)> = vec![];
    // samples run in parallel, a few per core at a time, and are compared
    // in sample order (nothing depends on the thread count)
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    type Outs = Result<Vec<(String, Tensor)>, QuantError>;
    let mut samples = samples.peekable();
    while samples.peek().is_some() {
        let mut chunk = vec![];
        for s in samples.by_ref() {
            chunk.push(s);
            if chunk.len() == 2 * threads {
                break;
            }
        }
        let runs: Vec<Option<(Outs, Outs)>> = crate::measure::par_map(&chunk, threads, |s| {
            Ok(s.as_ref().ok().map(|s| {
                (
                    fp32.run(s.inputs.clone()).map_err(Into::into),
                    quant.run(s.inputs.clone()).map_err(Into::into),
                )
            }))
        })?;
        for (s, run) in chunk.into_iter().zip(runs) {
            let s = s?;
            let (a, b) = run.expect("run for every readable sample");
            let a = a?;
            if let Some(e) = non_finite_error(fp32, "the FP32 model", &s, &a)? {
                return Err(e);
            }
            let b = b?;
            if let Some(e) = non_finite_error(quant, "the quantized model", &s, &b)? {
                return Err(e);
            }
            if ev.samples == 0 {
                accs = choice
                    .specs(&a, |n| quant_model.graph.dequantize_step(n))
                    .map_err(QuantError::Outputs)?
                    .into_iter()
                    .map(|(i, spec)| (i, OutputAcc::new(spec)))
                    .collect();
            }
            if a.len() != b.len() {
                return Err(QuantError::Outputs(format!(
                    "the FP32 model has {} outputs, the quantized model {}",
                    a.len(),
                    b.len()
                )));
            }
            for (i, acc) in &mut accs {
                acc.add(&a[*i].1, &b[*i].1, &s.inputs)
                    .map_err(QuantError::Outputs)?;
            }
            ev.samples += 1;
            progress(ev.samples);
        }
    }
    ev.outputs = accs.into_iter().map(|(_, a)| a.finish()).collect();
    Ok(ev)
}

/// Nodes and multiply-accumulates per precision.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct PrecisionMix {
    /// Node count per precision name.
    pub nodes: BTreeMap<String, usize>,
    /// MACs per precision name (Conv, ConvTranspose, Gemm, MatMul).
    pub macs: BTreeMap<String, u64>,
}

/// Precision mix of `resolved` on `model`, MACs from the observed shapes.
pub fn precision_mix(model: &Model, resolved: &Resolved, values: &ValueFacts) -> PrecisionMix {
    let mut mix = PrecisionMix::default();
    for (n, r) in model.graph.nodes.iter().zip(&resolved.nodes) {
        let key = qtype_name(r.qtype).to_string();
        *mix.nodes.entry(key.clone()).or_default() += 1;
        let macs = node_macs(model, n, values);
        if macs > 0 {
            *mix.macs.entry(key).or_default() += macs;
        }
    }
    mix
}

pub use crate::config::qtype_name;

fn shape_of<'a>(model: &'a Model, values: &'a ValueFacts, name: &str) -> Option<&'a [usize]> {
    if let Some(t) = model.graph.initializers.get(name) {
        return Some(t.shape());
    }
    values.get(name).map(|(_, s)| s.as_slice())
}

/// Multiply-accumulates of a GEMM-class node (0 for others or unknown shapes).
pub fn node_macs(model: &Model, n: &qport_onnx::Node, values: &ValueFacts) -> u64 {
    let out = n.outputs.first().and_then(|o| shape_of(model, values, o));
    let w = n.inputs.get(1).and_then(|x| shape_of(model, values, x));
    let a = n.inputs.first().and_then(|x| shape_of(model, values, x));
    let prod = |s: &[usize]| s.iter().map(|&d| d as u64).product::<u64>();
    match (n.op_type.as_str(), out, w, a) {
        ("Conv", Some(o), Some(w), _) if w.len() >= 2 => prod(o) * prod(&w[1..]),
        ("ConvTranspose", _, Some(w), Some(a)) if w.len() >= 2 => prod(a) * prod(&w[1..]),
        ("Gemm" | "MatMul", Some(o), _, Some(a)) if !a.is_empty() => {
            prod(o) * *a.last().unwrap_or(&1) as u64
        }
        _ => 0,
    }
}

/// The resolved `quant_config.json` of an export: `resolved`'s config with
/// every node's precisions (`node_config`, [`node_table`]) and every
/// quantized tensor's grid, scales and zero points (`tensor_config`,
/// [`tensor_table`]); a valid `--config` again.
pub fn resolved_config(
    resolved: &Resolved,
    exported: &Exported,
) -> Result<serde_json::Value, serde_json::Error> {
    let mut qc = serde_json::to_value(&resolved.config)?;
    if let Some(obj) = qc.as_object_mut() {
        obj.insert(
            "node_config".into(),
            serde_json::to_value(node_table(resolved))?,
        );
        obj.insert(
            "tensor_config".into(),
            serde_json::to_value(tensor_table(exported))?,
        );
    }
    Ok(qc)
}

/// The per-tensor `tensor_config` section of a resolved `quant_config`:
/// every quantized tensor's grid, scales and zero points.
pub fn tensor_table(exported: &Exported) -> BTreeMap<String, crate::config::TensorEntry> {
    use crate::config::{OneOrMany, TensorEntry};
    let mut m = BTreeMap::new();
    for r in &exported.tensors {
        let e = match &r.params {
            Some(p) => TensorEntry {
                scale: Some(OneOrMany::Many(p.scales.clone())),
                zero_point: Some(OneOrMany::Many(p.zero_points.clone())),
                qtype: match p.grid {
                    Grid::Int8 | Grid::Uint8 => Some(Precision::Int8),
                    Grid::Int16 | Grid::Uint16 => Some(Precision::Int16),
                    Grid::Int32 => None,
                },
                grid: Some(p.grid),
                axis: p.axis,
                kind: Some(r.kind.to_string()),
                ..Default::default()
            },
            None => TensorEntry {
                qtype: Some(Precision::Float16),
                kind: Some(r.kind.to_string()),
                ..Default::default()
            },
        };
        // a value quantized to two grids: the first is the entry, the
        // others its `other_grids`
        match (m.get_mut(&r.tensor), &r.params) {
            (None, _) => {
                m.insert(r.tensor.clone(), e);
            }
            (Some(first), Some(p))
                if first.grid.is_some_and(|g| g != p.grid)
                    && !first.other_grids.iter().any(|o| o.grid == p.grid) =>
            {
                first.other_grids.push(crate::config::GridEntry {
                    grid: p.grid,
                    scale: OneOrMany::Many(p.scales.clone()),
                    zero_point: Some(OneOrMany::Many(p.zero_points.clone())),
                    axis: p.axis,
                });
            }
            _ => {}
        }
    }
    m
}

/// The `node_config` section of a resolved `quant_config`: every node's
/// `qtype`, plus `InputTypeN` / `OutputType` where they were set, in the
/// vendor's key names (so the file is a valid `--config` again).
pub fn node_table(resolved: &Resolved) -> BTreeMap<String, serde_json::Value> {
    resolved
        .nodes
        .iter()
        .map(|n| {
            let mut e = serde_json::Map::new();
            e.insert("qtype".into(), qtype_name(n.qtype).into());
            for (i, q) in &n.input_types {
                e.insert(format!("InputType{i}"), qtype_name(*q).into());
            }
            if let Some(q) = n.output_type {
                e.insert("OutputType".into(), qtype_name(q).into());
            }
            (n.name.clone(), serde_json::Value::Object(e))
        })
        .collect()
}
