//! The `quant_config` JSON: which precision each node and tensor gets and how
//! activations and weights are calibrated. Compatible with the vendor
//! toolchain's `quant_config` (levels `model_config` < `op_config` <
//! `node_config`, finer wins), parsed strictly: every object rejects unknown
//! keys, and every error names the key path, e.g.
//! `quant_config.json: model_config.activation.calibraton_type: unknown field ...`.
//!
//! Every field is optional, so that a user file can be laid over a platform
//! template ([`crate::resolve::merge`]); defaults are applied when the config
//! is resolved against a model ([`crate::resolve::resolve`]).
//!
//! Vendor keys are accepted as the vendor documents them. Some are recorded
//! but not acted on by qport yet: `ON` (CPU/BPU placement),
//! `weight.bias_correction`, `modelwise_search` and `layerwise_search` (kept
//! as opaque JSON objects for the tuning feature). `subgraph_config` is
//! accepted only when empty.
//!
//! qport extensions (not in the vendor format; a vendor tool would reject them):
//! - `activation.calibration_type` also accepts `ema`, `percentile`, `mse`
//!   and `load` (scales already in the model's QDQ nodes);
//! - `activation.ema_momentum` and `activation.power_of_two`, and
//!   `weight.power_of_two` (`"ceil"` | `"nearest"`);
//! - `tensor_config`: per-tensor overrides (`scale`, `zero_point`, `qtype`,
//!   `calibration_type`);
//! - `qport`: the platform, template and high-accuracy tail output form the
//!   config was made for (written by qport, optional on input).
//!
//! `docs/quant-config.md` is the user-facing reference of every key.
//!
//! ```
//! use qport_quant::config::QuantConfig;
//! use qport_quant::Precision;
//!
//! let c = QuantConfig::from_json_str(
//!     r#"{"model_config": {"all_node_type": "int8"},
//!         "node_config": {"/head/Conv": {"qtype": "int16"}}}"#,
//!     "quant_config.json",
//! )
//! .unwrap();
//! assert_eq!(c.node_config["/head/Conv"].qtype, Some(Precision::Int16));
//! assert_eq!(QuantConfig::from_json_str(&c.to_json_pretty(), "again").unwrap(), c);
//!
//! let e = QuantConfig::from_json_str(r#"{"model_config": {"all_node_typ": "int8"}}"#, "q.json")
//!     .unwrap_err()
//!     .to_string();
//! assert!(e.starts_with("q.json: model_config.all_node_typ: unknown field"), "{e}");
//! ```

use crate::types::{CalibMethod, PowerOfTwo, Precision};
use qport_platform::HighAccuracyOutput;
use serde::de::{self, Deserializer, IntoDeserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;
use std::path::Path;

/// Errors of parsing, validating and resolving a `quant_config`.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The JSON is malformed or does not match the schema.
    #[error("{source_name}: {}{message}", path_prefix(.path))]
    Parse {
        /// File name (or other name of the text).
        source_name: String,
        /// Key path of the offending value (`model_config.activation.num_bin`);
        /// empty for a syntax error outside any key.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// One or more entries are invalid; one message per line, each naming its key.
    #[error("{}", .errors.join("\n"))]
    Invalid {
        /// The messages, each `key.path: what is wrong`.
        errors: Vec<String>,
    },
    /// An unknown template name.
    #[error("unknown template '{name}'; valid: {valid}")]
    UnknownTemplate {
        /// The name given.
        name: String,
        /// The valid names, comma separated.
        valid: String,
    },
}

fn path_prefix(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!("{path}: ")
    }
}

impl ConfigError {
    /// The individual messages: one per invalid entry for
    /// [`ConfigError::Invalid`], the whole message otherwise.
    pub fn messages(&self) -> Vec<String> {
        match self {
            ConfigError::Invalid { errors } => errors.clone(),
            e => vec![e.to_string()],
        }
    }
}

/// A value that may be written as one item or as a list of items (a list
/// asks for a search over its items, as in the vendor format).
#[derive(Debug, Clone, PartialEq)]
pub enum OneOrMany<T> {
    /// A single value.
    One(T),
    /// A list of values.
    Many(Vec<T>),
}

impl<T: Clone> OneOrMany<T> {
    /// The values, in order (one for [`OneOrMany::One`]).
    pub fn to_vec(&self) -> Vec<T> {
        match self {
            OneOrMany::One(v) => vec![v.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }

    /// The first value, if any.
    pub fn first(&self) -> Option<T> {
        match self {
            OneOrMany::One(v) => Some(v.clone()),
            OneOrMany::Many(v) => v.first().cloned(),
        }
    }
}

impl<T: Serialize> Serialize for OneOrMany<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            OneOrMany::One(v) => v.serialize(s),
            OneOrMany::Many(v) => v.serialize(s),
        }
    }
}

/// Deserializes a scalar through `T`, or a sequence of `T`, keeping `T`'s
/// own error messages (an untagged enum would replace them).
struct OneOrManyVisitor<T>(PhantomData<T>);

macro_rules! forward_scalar {
    ($($visit:ident: $ty:ty),*) => {$(
        fn $visit<E: de::Error>(self, v: $ty) -> Result<Self::Value, E> {
            T::deserialize(IntoDeserializer::<'de, de::value::Error>::into_deserializer(v))
                .map(OneOrMany::One)
                .map_err(E::custom)
        }
    )*};
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for OneOrManyVisitor<T> {
    type Value = OneOrMany<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a value or a list of values")
    }

    forward_scalar!(visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64);

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        T::deserialize(de::value::StrDeserializer::<de::value::Error>::new(v))
            .map(OneOrMany::One)
            .map_err(E::custom)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element()? {
            out.push(v);
        }
        Ok(OneOrMany::Many(out))
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for OneOrMany<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(OneOrManyVisitor(PhantomData))
    }
}

/// A whole `quant_config`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuantConfig {
    /// Model-wide settings (the coarsest level).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_config: Option<ModelConfig>,
    /// Entries by op type (`Conv`, `MatMul`, ...), over `model_config`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub op_config: BTreeMap<String, NodeEntry>,
    /// Vendor subgraph level; accepted only when empty (not supported yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subgraph_config: Option<Value>,
    /// Entries by node name, over `op_config`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_config: BTreeMap<String, NodeEntry>,
    /// qport extension: per-tensor overrides by tensor name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tensor_config: BTreeMap<String, TensorEntry>,
    /// qport extension: what the config was made for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qport: Option<QportMeta>,
}

/// `model_config`: model-wide settings.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// Precision of every node not configured more finely (default `int8`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_node_type: Option<Precision>,
    /// Type of the model outputs: `int8`, `int16` or `float32` (default `float32`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_output_type: Option<Precision>,
    /// Activation calibration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activation: Option<ActivationConfig>,
    /// Weight quantization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<WeightConfig>,
    /// Vendor model-wise search settings; recorded for the tuning feature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modelwise_search: Option<Map<String, Value>>,
    /// Vendor layer-wise search settings; recorded for the tuning feature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layerwise_search: Option<Map<String, Value>>,
}

/// `model_config.activation`: how activation ranges are calibrated. A list
/// value asks for a search: each candidate is tried and the one with the best
/// output cosine similarity is kept.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActivationConfig {
    /// Calibrator name or list of names (default `["max", "kl"]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration_type: Option<OneOrMany<CalibMethod>>,
    /// Histogram bins used by `kl` (at least 129, default 1024).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_bin: Option<u32>,
    /// Largest histogram the observers may grow to (default 16384).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_num_bin: Option<u32>,
    /// Percentile kept by the `percentile` calibrator, in `0.5..=1.0`
    /// (default 0.99995); a list asks for a search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_percentile: Option<OneOrMany<f64>>,
    /// Per-channel activation scales (default false); a list asks for a search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_channel: Option<OneOrMany<bool>>,
    /// Asymmetric (unsigned, zero point) activations (default false); a list
    /// asks for a search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asymmetric: Option<OneOrMany<bool>>,
    /// qport extension: momentum of the `ema` calibrator, in `(0, 1)` (default 0.9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ema_momentum: Option<f32>,
    /// qport extension: constrain activation scales to powers of two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_of_two: Option<PowerOfTwo>,
}

/// `model_config.weight`: how weights are quantized.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeightConfig {
    /// Per-output-channel weight scales (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_channel: Option<bool>,
    /// Asymmetric weights (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asymmetric: Option<bool>,
    /// qport extension: constrain weight scales to powers of two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_of_two: Option<PowerOfTwo>,
    /// Vendor bias correction; recorded, not applied yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bias_correction: Option<BiasCorrection>,
}

/// `model_config.weight.bias_correction` (vendor).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BiasCorrection {
    /// Calibration samples used (vendor default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_sample: Option<u32>,
    /// Metric that decides whether the correction is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<Metric>,
}

/// A similarity or error metric named in the vendor format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    /// Cosine similarity.
    CosineSimilarity,
    /// Mean squared error.
    Mse,
    /// Mean absolute error.
    Mae,
    /// Mean relative error.
    Mre,
    /// Signal-to-quantization-noise ratio.
    Sqnr,
    /// Largest absolute difference.
    Chebyshev,
}

/// Where the vendor compiler places a node (`ON`); recorded only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Device {
    /// The host CPU.
    #[serde(rename = "CPU", alias = "cpu")]
    Cpu,
    /// The accelerator.
    #[serde(rename = "BPU", alias = "bpu")]
    Bpu,
}

/// An `op_config` or `node_config` entry.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeEntry {
    /// Precision of the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qtype: Option<Precision>,
    /// Precision of input 0 (`InputType0`, alias `input0`).
    #[serde(
        default,
        rename = "InputType0",
        alias = "input0",
        skip_serializing_if = "Option::is_none"
    )]
    pub input_type0: Option<Precision>,
    /// Precision of input 1 (`InputType1`, alias `input1`).
    #[serde(
        default,
        rename = "InputType1",
        alias = "input1",
        skip_serializing_if = "Option::is_none"
    )]
    pub input_type1: Option<Precision>,
    /// Precision of the output (`OutputType`).
    #[serde(
        default,
        rename = "OutputType",
        skip_serializing_if = "Option::is_none"
    )]
    pub output_type: Option<Precision>,
    /// Placement (`ON`: `CPU` | `BPU`); recorded only.
    #[serde(default, rename = "ON", skip_serializing_if = "Option::is_none")]
    pub on: Option<Device>,
}

/// A `tensor_config` entry (qport extension): fixed parameters or a
/// calibrator for one tensor.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorEntry {
    /// Fixed scale, or one per channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<OneOrMany<f32>>,
    /// Fixed zero point, or one per channel (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zero_point: Option<OneOrMany<i32>>,
    /// Precision of the tensor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qtype: Option<Precision>,
    /// Calibrator of this tensor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration_type: Option<CalibMethod>,
    /// Integer grid (`int8`, `uint8`, `int16`, `uint16`, `int32`): written
    /// by qport in a resolved config; informational on input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid: Option<crate::Grid>,
    /// Axis of per-channel scales: written by qport; informational on input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub axis: Option<usize>,
    /// What the tensor is (`activation`, `weight`, `bias`, `float16`):
    /// written by qport; informational on input (only activation entries
    /// override calibration; weights and biases are always recomputed from
    /// the model's values).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Fixed parameters of the same tensor on further grids: an activation
    /// read by nodes at two precisions is quantized twice (`uint8` for an
    /// int8 reader, `uint16` for an int16 one). Written by qport; each
    /// entry applies to its grid only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_grids: Vec<GridEntry>,
}

/// Fixed parameters of a tensor on one grid ([`TensorEntry::other_grids`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GridEntry {
    /// The grid these parameters are for.
    pub grid: crate::Grid,
    /// Scale, or one per channel.
    pub scale: OneOrMany<f32>,
    /// Zero point, or one per channel (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zero_point: Option<OneOrMany<i32>>,
    /// Axis of per-channel scales.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub axis: Option<usize>,
}

/// `qport` (extension): what the config was made for. Written by qport;
/// optional on input.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QportMeta {
    /// Platform name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
    /// Template name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// High-accuracy tail output form of the platform
    /// (`int32-dequantize` | `float32`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail_output: Option<HighAccuracyOutput>,
}

/// The vendor spelling of a precision.
pub fn qtype_name(q: Precision) -> &'static str {
    match q {
        Precision::Int8 => "int8",
        Precision::Int16 => "int16",
        Precision::Float16 => "float16",
        Precision::Float32 => "float32",
    }
}

impl QuantConfig {
    /// Parses JSON text; `source_name` (a file name) starts every error
    /// message. Also runs the platform-independent checks
    /// ([`QuantConfig::check`]).
    pub fn from_json_str(s: &str, source_name: &str) -> Result<QuantConfig, ConfigError> {
        let de = &mut serde_json::Deserializer::from_str(s);
        let cfg: QuantConfig = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            ConfigError::Parse {
                source_name: source_name.to_string(),
                path: if path == "." { String::new() } else { path },
                message: e.into_inner().to_string(),
            }
        })?;
        let errors = cfg.check();
        if errors.is_empty() {
            Ok(cfg)
        } else {
            Err(ConfigError::Invalid {
                errors: errors
                    .into_iter()
                    .map(|m| format!("{source_name}: {m}"))
                    .collect(),
            })
        }
    }

    /// Reads and parses a file; errors start with the path.
    pub fn from_file(path: &Path) -> Result<QuantConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.display().to_string(),
            source,
        })?;
        QuantConfig::from_json_str(&text, &path.display().to_string())
    }

    /// Pretty JSON (two-space indent, keys of maps sorted), ending in a newline.
    pub fn to_json_pretty(&self) -> String {
        // Plain structs with string keys cannot fail to serialize (serde_json
        // writes a non-finite float as null, which `check` rejects on input).
        let mut s = serde_json::to_string_pretty(self).unwrap_or_else(|_| "{}".into());
        s.push('\n');
        s
    }

    /// Platform- and model-independent checks: value ranges and unsupported
    /// sections. One message per problem, each `key.path: what is wrong`.
    pub fn check(&self) -> Vec<String> {
        let mut errs = Vec::new();
        if let Some(sub) = &self.subgraph_config {
            let empty = match sub {
                Value::Null => true,
                Value::Object(m) => m.is_empty(),
                Value::Array(a) => a.is_empty(),
                _ => false,
            };
            if !empty {
                errs.push("subgraph_config: subgraph_config is not supported yet".to_string());
            }
        }
        if let Some(mc) = &self.model_config {
            if let Some(t) = mc.model_output_type {
                if t == Precision::Float16 {
                    errs.push(format!(
                        "model_config.model_output_type: {} is not a valid model output type; allowed: int8, int16, float32",
                        qtype_name(t)
                    ));
                }
            }
            if let Some(a) = &mc.activation {
                check_activation(a, &mut errs);
            }
        }
        for (name, t) in &self.tensor_config {
            check_tensor(name, t, &mut errs);
        }
        errs
    }
}

fn check_activation(a: &ActivationConfig, errs: &mut Vec<String>) {
    const K: &str = "model_config.activation";
    if let Some(OneOrMany::Many(v)) = &a.calibration_type {
        if v.is_empty() {
            errs.push(format!("{K}.calibration_type: the list is empty"));
        }
    }
    if let Some(n) = a.num_bin {
        if n < 129 {
            errs.push(format!("{K}.num_bin: {n} is below the minimum 129"));
        }
    }
    if let Some(m) = a.max_num_bin {
        let n = a.num_bin.unwrap_or(1024);
        if m < n {
            errs.push(format!("{K}.max_num_bin: {m} is below num_bin ({n})"));
        }
    }
    if let Some(p) = &a.max_percentile {
        let v = p.to_vec();
        if v.is_empty() {
            errs.push(format!("{K}.max_percentile: the list is empty"));
        }
        for x in v {
            if !(0.5..=1.0).contains(&x) {
                errs.push(format!(
                    "{K}.max_percentile: {x} is outside the range 0.5..=1.0"
                ));
            }
        }
    }
    for (key, v) in [
        ("per_channel", &a.per_channel),
        ("asymmetric", &a.asymmetric),
    ] {
        if let Some(OneOrMany::Many(l)) = v {
            if l.is_empty() {
                errs.push(format!("{K}.{key}: the list is empty"));
            }
        }
    }
    if let Some(m) = a.ema_momentum {
        if !(m > 0.0 && m < 1.0) {
            errs.push(format!(
                "{K}.ema_momentum: {m} is outside the open range (0, 1)"
            ));
        }
    }
}

fn check_tensor(name: &str, t: &TensorEntry, errs: &mut Vec<String>) {
    let k = format!("tensor_config.{name}");
    let scales = t.scale.as_ref().map(|s| s.to_vec());
    if let Some(s) = &scales {
        if s.is_empty() {
            errs.push(format!("{k}.scale: the list is empty"));
        }
        if let Some(bad) = s.iter().find(|x| !(x.is_finite() && **x > 0.0)) {
            errs.push(format!("{k}.scale: {bad} is not a positive finite number"));
        }
    }
    if let Some(zp) = &t.zero_point {
        if t.scale.is_none() {
            errs.push(format!("{k}.zero_point: given without a scale"));
        }
        if let (Some(s), OneOrMany::Many(z)) = (&scales, zp) {
            if s.len() != z.len() {
                errs.push(format!(
                    "{k}.zero_point: {} zero points for {} scales",
                    z.len(),
                    s.len()
                ));
            }
        }
    }
    for (i, g) in t.other_grids.iter().enumerate() {
        let s = g.scale.to_vec();
        if s.is_empty() || s.iter().any(|x| !(x.is_finite() && *x > 0.0)) {
            errs.push(format!(
                "{k}.other_grids[{i}].scale: every scale must be a positive finite number"
            ));
        }
        if let Some(OneOrMany::Many(z)) = &g.zero_point {
            if z.len() != s.len() {
                errs.push(format!(
                    "{k}.other_grids[{i}].zero_point: {} zero points for {} scales",
                    z.len(),
                    s.len()
                ));
            }
        }
        if Some(g.grid) == t.grid || t.other_grids[..i].iter().any(|o| o.grid == g.grid) {
            errs.push(format!(
                "{k}.other_grids[{i}]: grid {} is given twice",
                crate::qdq::grid_name(g.grid)
            ));
        }
    }
    if let (Some(_), Some(q @ (Precision::Float16 | Precision::Float32))) = (&t.scale, t.qtype) {
        errs.push(format!(
            "{k}.scale: a scale needs an integer qtype, not {}",
            qtype_name(q)
        ));
    }
}
