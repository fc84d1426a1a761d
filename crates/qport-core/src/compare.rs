//! Per-output comparison of two runs of one model (a reference and a test:
//! FP32 and quantized, two arithmetic profiles, ...), shared by every
//! command that reports agreement (`quantize`, `agree`, `diverge`).
//!
//! Every graph output is compared on its own, never concatenated with
//! another: a detector's box coordinates and class scores have different
//! ranges, and one cosine over both hides the scores. What an output is
//! decides how it is compared ([`OutputKind`]):
//!
//! - a **float** output: cosine similarity (mean and minimum over
//!   samples), SQNR pooled over samples, largest absolute difference, the
//!   share of elements within one quantization step when the artifact
//!   states the output's step ([`OutputSpec::step`]), and top-1 agreement
//!   along a stated axis ([`OutputSpec::argmax_axis`]; by default the last
//!   axis of a rank-2 `[N, C]` output, none for other shapes — an arg-max
//!   over a flattened detector output means nothing);
//! - an **integer** output: bit-identical samples and the largest
//!   difference in integer units, no cosine;
//! - a **pass-through** output: bit-identical to one of the model's inputs
//!   under both runs on every sample (a text encoder returning its token
//!   ids). It measures nothing and is reported as such.
//!
//! Comparisons assume finite values: callers reject NaN and infinities
//! first ([`non_finite`]), since one NaN makes every statistic meaningless.
//! [`Thresholds`] turns `--min-cosine` / `--min-sqnr` into a check over the
//! compared outputs.
//!
//! ```
//! use qport_core::compare::{OutputAcc, OutputKind, OutputSpec};
//! use qport_core::Tensor;
//! let spec = OutputSpec::new("logits", &[1, 3]);
//! assert_eq!(spec.argmax_axis, Some(1));
//! let mut acc = OutputAcc::new(spec);
//! let fp32 = Tensor::from_vec(vec![1, 3], vec![0.1f32, 2.0, 0.3]).unwrap();
//! let int8 = Tensor::from_vec(vec![1, 3], vec![0.1f32, 1.9, 0.3]).unwrap();
//! acc.add(&fp32, &int8, &[]).unwrap();
//! let s = acc.finish();
//! assert_eq!(s.kind, OutputKind::Float);
//! assert_eq!(s.top1.as_ref().unwrap().agree, 1);
//! assert!(s.cosine_mean.unwrap() > 0.99);
//! ```

use crate::exact::ExactSum;
use crate::metrics;
use crate::{DType, Tensor, TensorData};
use serde::{Deserialize, Serialize};

/// Cosine similarity against FP32 below which the commands warn even
/// without a threshold: the quantized output no longer resembles the
/// float one.
pub const LOW_COSINE: f64 = 0.9;

/// The tolerance of [`WithinSteps`], in quantization steps.
pub const STEPS: u32 = 1;

/// What an output is, and so how it is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutputKind {
    /// A float output: every statistic.
    Float,
    /// An integer (or boolean) output: bit-identity and integer
    /// differences only.
    Integer,
    /// Bit-identical to a model input under both runs on every sample: not
    /// a measurement.
    PassThrough,
}

impl OutputKind {
    /// True for outputs that count as agreement (only float outputs).
    pub fn is_compared(self) -> bool {
        self == OutputKind::Float
    }
}

/// How one output is compared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputSpec {
    /// The graph output's name.
    pub name: String,
    /// The axis top-1 is taken along (`None`: no top-1).
    pub argmax_axis: Option<usize>,
    /// The output's quantization step when the artifact states one (a
    /// per-tensor DequantizeLinear produces it).
    pub step: Option<f64>,
}

impl OutputSpec {
    /// `name` with the default arg-max axis of an output of `shape`
    /// ([`default_argmax_axis`]) and no known step.
    pub fn new(name: &str, shape: &[usize]) -> OutputSpec {
        OutputSpec {
            name: name.to_string(),
            argmax_axis: default_argmax_axis(shape),
            step: None,
        }
    }
}

/// The default top-1 axis: the last axis of a rank-2 `[N, C]` output (a
/// batch of class scores), none for any other rank.
///
/// ```
/// use qport_core::compare::default_argmax_axis;
/// assert_eq!(default_argmax_axis(&[1, 1000]), Some(1));
/// assert_eq!(default_argmax_axis(&[1, 84, 8400]), None);
/// ```
pub fn default_argmax_axis(shape: &[usize]) -> Option<usize> {
    (shape.len() == 2).then_some(1)
}

/// Checks `--argmax-axis` against an output of `shape`: a negative axis
/// counts from the end. Fails with a message for an axis the output does
/// not have.
pub fn resolve_axis(axis: i64, name: &str, shape: &[usize]) -> Result<usize, String> {
    let rank = shape.len() as i64;
    let a = if axis < 0 { axis + rank } else { axis };
    if a < 0 || a >= rank {
        return Err(format!(
            "--argmax-axis {axis}: output '{name}' has rank {rank} (shape {shape:?})"
        ));
    }
    Ok(a as usize)
}

/// The outputs a command compares: every output for an empty `requested`,
/// else the named ones in graph order. Names may be given as several
/// values or comma-separated. Fails naming an unknown output and listing
/// the model's.
///
/// ```
/// use qport_core::compare::select_outputs;
/// let all = ["boxes".to_string(), "scores".to_string()];
/// assert_eq!(select_outputs(&all, &[]).unwrap(), vec![0, 1]);
/// assert_eq!(select_outputs(&all, &["scores".into()]).unwrap(), vec![1]);
/// assert!(select_outputs(&all, &["logits".into()]).unwrap_err().contains("boxes, scores"));
/// ```
pub fn select_outputs(all: &[String], requested: &[String]) -> Result<Vec<usize>, String> {
    let names: Vec<&str> = requested
        .iter()
        .flat_map(|r| r.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if names.is_empty() {
        return Ok((0..all.len()).collect());
    }
    for n in &names {
        if !all.iter().any(|a| a == n) {
            return Err(format!(
                "--output '{n}': the model has no such output; its outputs: {}",
                all.join(", ")
            ));
        }
    }
    Ok((0..all.len())
        .filter(|&i| names.contains(&all[i].as_str()))
        .collect())
}

/// Which outputs a command compares and along which axis it takes top-1
/// (`--output`, `--argmax-axis`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OutputChoice {
    /// Output names (each may be a comma-separated list); empty: every
    /// output.
    pub names: Vec<String>,
    /// The top-1 axis for every chosen output (negative counts from the
    /// end); `None`: [`default_argmax_axis`].
    pub argmax_axis: Option<ArgmaxAxis>,
}

/// `--argmax-axis`: an axis, or no top-1 at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgmaxAxis {
    /// Along this axis (negative counts from the end).
    Axis(i64),
    /// No top-1 for any output.
    None,
}

impl std::str::FromStr for ArgmaxAxis {
    type Err = String;
    fn from_str(s: &str) -> Result<ArgmaxAxis, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("none") {
            return Ok(ArgmaxAxis::None);
        }
        s.parse().map(ArgmaxAxis::Axis).map_err(|_| {
            format!("'{s}' is not an axis (an integer, negative from the end) or `none`")
        })
    }
}

impl OutputChoice {
    /// The chosen outputs of a run (`outputs`: names and values of one
    /// sample, in graph order), each with its index and [`OutputSpec`];
    /// `step(name)` gives an output's quantization step when known. Fails
    /// for an unknown name or an axis an output does not have.
    pub fn specs(
        &self,
        outputs: &[(String, Tensor)],
        step: impl Fn(&str) -> Option<f64>,
    ) -> Result<Vec<(usize, OutputSpec)>, String> {
        let names: Vec<String> = outputs.iter().map(|(n, _)| n.clone()).collect();
        select_outputs(&names, &self.names)?
            .into_iter()
            .map(|i| {
                let (name, t) = &outputs[i];
                let argmax_axis = match self.argmax_axis {
                    None => default_argmax_axis(t.shape()),
                    Some(ArgmaxAxis::None) => None,
                    Some(ArgmaxAxis::Axis(a)) => Some(resolve_axis(a, name, t.shape())?),
                };
                Ok((
                    i,
                    OutputSpec {
                        name: name.clone(),
                        argmax_axis,
                        step: step(name),
                    },
                ))
            })
            .collect()
    }
}

/// True when `a` and `b` have the same dtype, shape and element bits
/// (`-0.0` differs from `0.0`; a NaN equals a NaN of the same bits).
pub fn bit_identical(a: &Tensor, b: &Tensor) -> bool {
    if a.dtype() != b.dtype() || a.shape() != b.shape() {
        return false;
    }
    fn bits<T: Copy, U: PartialEq>(x: &[T], y: &[T], f: impl Fn(T) -> U) -> bool {
        x.iter().zip(y).all(|(&p, &q)| f(p) == f(q))
    }
    match (a.data(), b.data()) {
        (TensorData::F32(x), TensorData::F32(y)) => bits(x, y, f32::to_bits),
        (TensorData::F64(x), TensorData::F64(y)) => bits(x, y, f64::to_bits),
        (TensorData::F16(x), TensorData::F16(y)) => bits(x, y, half::f16::to_bits),
        (TensorData::BF16(x), TensorData::BF16(y)) => bits(x, y, half::bf16::to_bits),
        (x, y) => x == y,
    }
}

/// A non-finite value in a tensor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NonFiniteValue {
    /// Flat (row-major) index of the first one.
    pub index: usize,
    /// True for NaN, false for an infinity.
    pub nan: bool,
}

impl NonFiniteValue {
    /// `NaN` or `an infinity`.
    pub fn what(&self) -> &'static str {
        if self.nan {
            "NaN"
        } else {
            "an infinity"
        }
    }
}

/// The first NaN in a float tensor, else its first infinity; `None` for a
/// finite or non-float tensor.
pub fn non_finite(t: &Tensor) -> Option<NonFiniteValue> {
    if !t.dtype().is_float() {
        return None;
    }
    let v: Vec<f64> = match t.data() {
        TensorData::F32(x) => x.iter().map(|&e| f64::from(e)).collect(),
        TensorData::F64(x) => x.clone(),
        _ => t.cast(DType::F64).ok()?.into_vec::<f64>().ok()?,
    };
    if let Some(index) = v.iter().position(|x| x.is_nan()) {
        return Some(NonFiniteValue { index, nan: true });
    }
    v.iter()
        .position(|x| x.is_infinite())
        .map(|index| NonFiniteValue { index, nan: false })
}

/// The first output of a run (in order) holding a non-finite value: its
/// index and [`non_finite`]'s finding.
pub fn non_finite_output(outputs: &[(String, Tensor)]) -> Option<(usize, NonFiniteValue)> {
    outputs
        .iter()
        .enumerate()
        .find_map(|(i, (_, t))| non_finite(t).map(|v| (i, v)))
}

/// The node that first produced a non-finite value in a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NonFiniteOrigin {
    /// Node name (the plan's step: a fused step is named after its first
    /// node).
    pub node: String,
    /// Op type.
    pub op: String,
    /// The value it wrote.
    pub value: String,
    /// True for NaN, false for an infinity.
    pub nan: bool,
}

/// A graph output holding NaN or an infinity: not a measurable result. It
/// names the first node of the run that produced a non-finite value
/// (`origin`; `None` when no node did: a constant or an input holds it).
/// The commands treat it as a failed check (exit 1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.message())]
pub struct NonFiniteOutput {
    /// The graph output.
    pub output: String,
    /// The run (`fp32`, `quantized`, a profile name).
    pub run: String,
    /// The sample's id.
    pub sample: String,
    /// True for NaN, false for an infinity.
    pub nan: bool,
    /// The first node that produced a non-finite value.
    pub origin: Option<Box<NonFiniteOrigin>>,
}

impl NonFiniteOutput {
    fn message(&self) -> String {
        let what = |nan: bool| if nan { "NaN" } else { "an infinity" };
        let head = format!(
            "output '{}' holds {} under {} on {}",
            self.output,
            what(self.nan),
            self.run,
            self.sample
        );
        match &self.origin {
            Some(o) => format!(
                "{head}; the first node to produce a non-finite value is '{}' ({}), {} in '{}'",
                o.node,
                o.op,
                what(o.nan),
                o.value
            ),
            None => format!("{head}; no node produced it (a constant or an input holds it)"),
        }
    }
}

/// The name of the input `t` is bit-identical to, if any.
pub fn passed_input<'a>(t: &Tensor, inputs: &'a [(String, Tensor)]) -> Option<&'a str> {
    inputs
        .iter()
        .find(|(_, x)| bit_identical(t, x))
        .map(|(n, _)| n.as_str())
}

/// How one float output of one sample compares (test against reference).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FloatDiff {
    /// Elements compared.
    pub elements: usize,
    /// Every element has the same bits.
    pub bit_identical: bool,
    /// Cosine similarity (exactly 1 for bit-identical outputs).
    pub cosine: f64,
    /// `Σ reference²`.
    pub signal: f64,
    /// `Σ (reference − test)²`.
    pub noise: f64,
    /// Largest `|reference − test|`.
    pub max_abs_diff: f64,
    /// Elements within [`STEPS`] quantization steps (0 without a step).
    pub within_steps: usize,
    /// Rows top-1 is taken over (0 without an arg-max axis).
    pub rows: usize,
    /// Rows whose top-1 index is the same.
    pub rows_agree: usize,
    /// Sum over rows of the top-5 overlap ([`top5_overlap`]).
    pub top5_sum: f64,
}

impl FloatDiff {
    /// True when every row has the same top-1 index (also with no rows).
    pub fn top1_agrees(&self) -> bool {
        self.rows_agree == self.rows
    }

    /// The top-1 record of this one sample along `axis` (`None` without
    /// an axis).
    pub fn top1(&self, axis: Option<usize>) -> Option<Top1> {
        axis.map(|axis| top1_record(axis, self.rows, self.rows_agree, self.top5_sum))
    }
}

fn top1_record(axis: usize, rows: usize, agree: usize, top5_sum: f64) -> Top1 {
    Top1 {
        axis,
        rows,
        agree,
        rate: ratio(agree, rows),
        top5_overlap: if rows == 0 {
            1.0
        } else {
            top5_sum / rows as f64
        },
    }
}

/// Top-`k` overlap of two score vectors, `k = min(5, len)`: the share of
/// the five largest of `a` that are also among the five largest of `b`
/// (ties broken by lower index). 1 for empty vectors.
///
/// ```
/// use qport_core::compare::top5_overlap;
/// let a = [9.0, 8.0, 7.0, 6.0, 5.0, 0.0];
/// let b = [9.0, 8.0, 7.0, 6.0, 0.0, 5.0];
/// assert_eq!(top5_overlap(&a, &b), 0.8);
/// ```
pub fn top5_overlap(a: &[f32], b: &[f32]) -> f64 {
    let k = 5.min(a.len()).min(b.len());
    if k == 0 {
        return 1.0;
    }
    let ta = metrics::top_k(a, k);
    let tb = metrics::top_k(b, k);
    let common = ta.iter().filter(|i| tb.contains(i)).count();
    common as f64 / k as f64
}

/// Compares one float output of one sample, `test` against `reference`
/// (both of `shape`, row-major), as `spec` says.
pub fn compare_float(
    reference: &[f32],
    test: &[f32],
    shape: &[usize],
    spec: &OutputSpec,
) -> FloatDiff {
    let bit_identical = reference.len() == test.len()
        && reference
            .iter()
            .zip(test)
            .all(|(x, y)| x.to_bits() == y.to_bits());
    let mut d = FloatDiff {
        elements: reference.len(),
        bit_identical,
        cosine: if bit_identical && !reference.is_empty() {
            1.0
        } else {
            metrics::cosine(reference, test)
        },
        ..FloatDiff::default()
    };
    for (&r, &t) in reference.iter().zip(test) {
        let (r, t) = (f64::from(r), f64::from(t));
        let gap = (r - t).abs();
        d.signal += r * r;
        d.noise += gap * gap;
        d.max_abs_diff = d.max_abs_diff.max(gap);
        if let Some(step) = spec.step {
            // a little slack for the rounding of the dequantized values
            d.within_steps += usize::from(gap <= f64::from(STEPS) * step * (1.0 + 1e-6));
        }
    }
    if let Some(axis) = spec.argmax_axis {
        let ra = metrics::lanes(reference, shape, axis);
        let ta = metrics::lanes(test, shape, axis);
        d.rows = ra.len();
        for (x, y) in ra.iter().zip(&ta) {
            d.rows_agree += usize::from(metrics::argmax(x) == metrics::argmax(y));
            d.top5_sum += top5_overlap(x, y);
        }
    }
    d
}

/// SQNR in dB of a pooled signal and noise power: `None` without noise
/// (identical outputs: infinite); a signal of zero against noise gives a
/// very low finite value.
pub fn sqnr_db(signal: f64, noise: f64) -> Option<f64> {
    (noise > 0.0).then(|| 10.0 * (signal.max(f64::MIN_POSITIVE) / noise).log10())
}

/// The share of elements within [`STEPS`] quantization steps.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct WithinSteps {
    /// The tolerance in steps ([`STEPS`]).
    pub steps: u32,
    /// One step: the output's quantization scale.
    pub step: f64,
    /// Share of elements (over every sample) within the tolerance.
    pub share: f64,
}

/// Top-1 agreement of one output along its arg-max axis.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Top1 {
    /// The axis top-1 is taken along.
    pub axis: usize,
    /// Rows compared, over every sample (a `[N, C]` output has `N` per
    /// sample).
    pub rows: usize,
    /// Rows with the same top-1 index.
    pub agree: usize,
    /// `agree / rows`.
    pub rate: f64,
    /// Mean top-5 overlap over the rows.
    pub top5_overlap: f64,
}

/// One output compared over every sample. The statistics of a float
/// output are `None` for integer and pass-through outputs (and SQNR is
/// `None` when the outputs are identical: infinite).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutputStats {
    /// The graph output's name.
    pub name: String,
    /// What it is.
    pub kind: OutputKind,
    /// For a pass-through output, the input it repeats.
    pub passes_input: Option<String>,
    /// Its element type.
    pub dtype: String,
    /// Its shape on the first sample.
    pub shape: Vec<usize>,
    /// Samples compared.
    pub samples: usize,
    /// Samples on which the two runs are bit-identical.
    pub bit_identical: usize,
    /// Mean cosine similarity over samples (float outputs).
    pub cosine_mean: Option<f64>,
    /// Smallest cosine similarity (float outputs).
    pub cosine_min: Option<f64>,
    /// SQNR in dB over every sample pooled, `10·log10(Σ r² / Σ (r − t)²)`
    /// (float outputs; `None` also when identical).
    pub sqnr_db: Option<f64>,
    /// Largest absolute difference (integer units for integer outputs;
    /// `None` for pass-through outputs).
    pub max_abs_diff: Option<f64>,
    /// Share within [`STEPS`] quantization steps, when the step is known.
    pub within_steps: Option<WithinSteps>,
    /// Top-1 agreement, when the output has an arg-max axis.
    pub top1: Option<Top1>,
}

impl OutputStats {
    /// True for outputs that count as agreement ([`OutputKind::is_compared`]).
    pub fn is_compared(&self) -> bool {
        self.kind.is_compared()
    }
}

/// Accumulates [`OutputStats`] sample by sample, in sample order. The
/// sums over samples are exact ([`ExactSum`]) and every other part is a
/// count, an extreme or the first sample's facts, so two accumulators of
/// consecutive runs of samples combine exactly ([`OutputAcc::merge`]):
/// the result is bit-identical to one accumulator over all the samples.
/// It serialises (serde) for that purpose: a study split into shards
/// carries its accumulators from one process to another.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OutputAcc {
    spec: OutputSpec,
    #[serde(with = "dtype_name")]
    dtype: Option<DType>,
    shape: Vec<usize>,
    samples: usize,
    bit_identical: usize,
    /// The input every sample so far passed through (`Some("")` before the
    /// first sample).
    passes: Option<String>,
    cosine_sum: ExactSum,
    /// `None` before the first float sample (NaN in JSON is not a number).
    cosine_min: Option<f64>,
    signal: ExactSum,
    noise: ExactSum,
    max_abs_diff: f64,
    elements: usize,
    within_steps: usize,
    rows: usize,
    rows_agree: usize,
    top5_sum: ExactSum,
}

/// An optional dtype in JSON: its name ([`DType::name`]).
mod dtype_name {
    use crate::DType;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Option<DType>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_str(d.name()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DType>, D::Error> {
        let name: Option<String> = Option::deserialize(d)?;
        name.map(|n| {
            DType::from_name(&n)
                .ok_or_else(|| serde::de::Error::custom(format!("unknown dtype '{n}'")))
        })
        .transpose()
    }
}

impl OutputAcc {
    /// An empty accumulator for the output `spec` describes.
    pub fn new(spec: OutputSpec) -> OutputAcc {
        OutputAcc {
            spec,
            dtype: None,
            shape: vec![],
            samples: 0,
            bit_identical: 0,
            passes: Some(String::new()),
            cosine_sum: ExactSum::default(),
            cosine_min: None,
            signal: ExactSum::default(),
            noise: ExactSum::default(),
            max_abs_diff: 0.0,
            elements: 0,
            within_steps: 0,
            rows: 0,
            rows_agree: 0,
            top5_sum: ExactSum::default(),
        }
    }

    /// The output's comparison settings.
    pub fn spec(&self) -> &OutputSpec {
        &self.spec
    }

    /// Adds the next sample: the output under the reference and the test
    /// run, and the sample's model inputs (for pass-through detection).
    /// Returns the float comparison of a float output. Fails when the two
    /// runs give different dtypes or shapes.
    pub fn add(
        &mut self,
        reference: &Tensor,
        test: &Tensor,
        inputs: &[(String, Tensor)],
    ) -> Result<Option<FloatDiff>, String> {
        if reference.dtype() != test.dtype() || reference.shape() != test.shape() {
            return Err(format!(
                "output '{}': {} {:?} in one run, {} {:?} in the other",
                self.spec.name,
                reference.dtype(),
                reference.shape(),
                test.dtype(),
                test.shape()
            ));
        }
        if self.samples == 0 {
            self.dtype = Some(reference.dtype());
            self.shape = reference.shape().to_vec();
        }
        self.samples += 1;
        let same = bit_identical(reference, test);
        self.bit_identical += usize::from(same);
        let passed = passed_input(reference, inputs).filter(|_| same);
        self.passes = match (self.passes.take(), passed) {
            (Some(p), Some(n)) if p.is_empty() || p == n => Some(n.to_string()),
            _ => None,
        };
        if !reference.dtype().is_float() {
            let wide = |t: &Tensor| t.cast(DType::F64).and_then(|c| c.into_vec::<f64>());
            if let (Ok(r), Ok(t)) = (wide(reference), wide(test)) {
                for (x, y) in r.iter().zip(&t) {
                    self.max_abs_diff = self.max_abs_diff.max((x - y).abs());
                }
            }
            return Ok(None);
        }
        let conv = |t: &Tensor| {
            t.to_f32_vec()
                .map_err(|e| format!("output '{}': {e}", self.spec.name))
        };
        let d = compare_float(
            &conv(reference)?,
            &conv(test)?,
            reference.shape(),
            &self.spec,
        );
        self.cosine_sum.add(d.cosine);
        self.cosine_min = Some(self.cosine_min.map_or(d.cosine, |m| m.min(d.cosine)));
        self.signal.add(d.signal);
        self.noise.add(d.noise);
        self.max_abs_diff = self.max_abs_diff.max(d.max_abs_diff);
        self.elements += d.elements;
        self.within_steps += d.within_steps;
        self.rows += d.rows;
        self.rows_agree += d.rows_agree;
        self.top5_sum.add(d.top5_sum);
        Ok(Some(d))
    }

    /// Folds in `next`, the accumulator of the samples that follow this
    /// one's: afterwards `self` is bit-identical to one accumulator that
    /// saw both runs of samples in order. Fails when the two compare
    /// different outputs (another spec) or saw different types or shapes.
    pub fn merge(&mut self, next: &OutputAcc) -> Result<(), String> {
        if self.spec != next.spec {
            return Err(format!(
                "output '{}' is compared as {:?} in one part and as {:?} in the other",
                self.spec.name, self.spec, next.spec
            ));
        }
        if next.samples == 0 {
            return Ok(());
        }
        if self.samples == 0 {
            *self = next.clone();
            return Ok(());
        }
        if self.dtype != next.dtype || self.shape != next.shape {
            return Err(format!(
                "output '{}': {} {:?} in one part, {} {:?} in the other",
                self.spec.name,
                self.dtype.map_or("?", |d| d.name()),
                self.shape,
                next.dtype.map_or("?", |d| d.name()),
                next.shape
            ));
        }
        self.samples += next.samples;
        self.bit_identical += next.bit_identical;
        self.passes = match (self.passes.take(), &next.passes) {
            (Some(p), Some(n)) if p == *n => Some(p),
            _ => None,
        };
        self.cosine_sum.merge(&next.cosine_sum);
        self.cosine_min = match (self.cosine_min, next.cosine_min) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.signal.merge(&next.signal);
        self.noise.merge(&next.noise);
        self.max_abs_diff = self.max_abs_diff.max(next.max_abs_diff);
        self.elements += next.elements;
        self.within_steps += next.within_steps;
        self.rows += next.rows;
        self.rows_agree += next.rows_agree;
        self.top5_sum.merge(&next.top5_sum);
        Ok(())
    }

    /// What the output turned out to be.
    pub fn kind(&self) -> OutputKind {
        match (&self.passes, self.dtype) {
            (Some(p), _) if !p.is_empty() => OutputKind::PassThrough,
            (_, Some(d)) if d.is_float() => OutputKind::Float,
            (_, None) => OutputKind::Float,
            _ => OutputKind::Integer,
        }
    }

    /// The statistics.
    pub fn finish(self) -> OutputStats {
        let kind = self.kind();
        let float = kind == OutputKind::Float && self.samples > 0;
        let n = self.samples.max(1) as f64;
        OutputStats {
            passes_input: (kind == OutputKind::PassThrough)
                .then(|| self.passes.clone().unwrap_or_default()),
            dtype: self.dtype.map_or("?", |d| d.name()).to_string(),
            shape: self.shape,
            samples: self.samples,
            bit_identical: self.bit_identical,
            cosine_mean: float.then(|| self.cosine_sum.value() / n),
            cosine_min: float.then_some(self.cosine_min.unwrap_or(1.0)),
            sqnr_db: if float {
                sqnr_db(self.signal.value(), self.noise.value())
            } else {
                None
            },
            max_abs_diff: (kind != OutputKind::PassThrough).then_some(self.max_abs_diff),
            within_steps: match (float, self.spec.step) {
                (true, Some(step)) => Some(WithinSteps {
                    steps: STEPS,
                    step,
                    share: ratio(self.within_steps, self.elements),
                }),
                _ => None,
            },
            top1: match (float, self.spec.argmax_axis) {
                (true, Some(axis)) => Some(top1_record(
                    axis,
                    self.rows,
                    self.rows_agree,
                    self.top5_sum.value(),
                )),
                _ => None,
            },
            name: self.spec.name,
            kind,
        }
    }
}

/// `part / whole`, 1 for nothing to compare.
fn ratio(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        1.0
    } else {
        part as f64 / whole as f64
    }
}

/// `--min-cosine` and `--min-sqnr`: the smallest mean cosine and pooled
/// SQNR every compared output must reach.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Thresholds {
    /// Smallest mean cosine similarity.
    pub min_cosine: Option<f64>,
    /// Smallest SQNR in dB.
    pub min_sqnr: Option<f64>,
}

/// One output below a threshold.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Failing {
    /// Who was compared (`int8 vs fp32`, `exact vs avx2-u8s8`).
    pub runs: String,
    /// The output.
    pub output: String,
    /// `cosine` or `sqnr_db`.
    pub metric: &'static str,
    /// Its value.
    pub value: f64,
    /// The threshold it is below.
    pub threshold: f64,
}

/// The outcome of [`Thresholds::check`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThresholdCheck {
    /// The thresholds.
    #[serde(flatten)]
    pub thresholds: Thresholds,
    /// True when every compared output reaches them.
    pub passed: bool,
    /// The outputs that do not.
    pub failing: Vec<Failing>,
}

impl Thresholds {
    /// True when neither threshold is set.
    pub fn is_empty(&self) -> bool {
        self.min_cosine.is_none() && self.min_sqnr.is_none()
    }

    /// Checks every compared output of every group (`runs`, its outputs);
    /// `None` when no threshold is set.
    pub fn check<'a>(
        &self,
        groups: impl IntoIterator<Item = (String, &'a [OutputStats])>,
    ) -> Option<ThresholdCheck> {
        if self.is_empty() {
            return None;
        }
        let mut failing = vec![];
        for (runs, outputs) in groups {
            for o in outputs.iter().filter(|o| o.is_compared()) {
                if let (Some(t), Some(c)) = (self.min_cosine, o.cosine_mean) {
                    if c < t {
                        failing.push(Failing {
                            runs: runs.clone(),
                            output: o.name.clone(),
                            metric: "cosine",
                            value: c,
                            threshold: t,
                        });
                    }
                }
                // no noise is an infinite SQNR: it passes
                if let (Some(t), Some(s)) = (self.min_sqnr, o.sqnr_db) {
                    if s < t {
                        failing.push(Failing {
                            runs: runs.clone(),
                            output: o.name.clone(),
                            metric: "sqnr_db",
                            value: s,
                            threshold: t,
                        });
                    }
                }
            }
        }
        Some(ThresholdCheck {
            thresholds: *self,
            passed: failing.is_empty(),
            failing,
        })
    }
}

impl std::fmt::Display for Failing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.metric {
            "cosine" => write!(
                f,
                "{}: output '{}' has cosine {:.5}, below --min-cosine {}",
                self.runs, self.output, self.value, self.threshold
            ),
            _ => write!(
                f,
                "{}: output '{}' has SQNR {:.2} dB, below --min-sqnr {}",
                self.runs, self.output, self.value, self.threshold
            ),
        }
    }
}

/// Warnings for compared outputs whose mean cosine is below
/// [`LOW_COSINE`] (`runs` names who was compared, `int8 vs fp32`).
pub fn low_cosine_warnings(runs: &str, outputs: &[OutputStats]) -> Vec<String> {
    outputs
        .iter()
        .filter(|o| o.is_compared())
        .filter_map(|o| {
            let c = o.cosine_mean?;
            (c < LOW_COSINE).then(|| {
                format!(
                    "{runs}: output '{}' has mean cosine {c:.4} (below {LOW_COSINE}): the result \
                     does not resemble the reference",
                    o.name
                )
            })
        })
        .collect()
}

#[cfg(test)]
#[path = "compare_tests.rs"]
mod tests;
