//! Validation of a [`QuantConfig`] against a platform and a model, merging a
//! user config over a platform template, and per-node resolution.
//!
//! Precedence, coarsest first: `model_config.all_node_type` <
//! `op_config[op_type]` < `node_config[node name]`; each field of an entry
//! (`qtype`, `InputType0`, `InputType1`, `OutputType`, `ON`) is resolved
//! separately, so a node entry that sets only `OutputType` keeps its op
//! entry's `qtype`.
//!
//! Nodes without a name are called `<op_type>_<index>` (index in graph
//! order), as the ONNX loader names them; should that name be taken, `_2`,
//! `_3`, ... is appended. `node_config` refers to nodes by these names and
//! the exporter writes them into the artifact.

use crate::config::{
    qtype_name, ActivationConfig, BiasCorrection, ConfigError, Device, ModelConfig, NodeEntry,
    OneOrMany, QportMeta, QuantConfig, TensorEntry, WeightConfig,
};
use crate::types::{CalibMethod, PowerOfTwo, Precision};
use qport_onnx::Model;
use qport_platform::{HighAccuracyOutput, Platform};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;

/// The names and op types of a model's nodes, and its tensor names: what a
/// config is checked against.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelIndex {
    /// Node name (see [`node_names`]) → op type.
    pub nodes: BTreeMap<String, String>,
    /// Op types present.
    pub op_types: BTreeSet<String>,
    /// Every tensor name: graph inputs and outputs, initializers, node
    /// inputs and outputs.
    pub tensors: BTreeSet<String>,
}

impl ModelIndex {
    /// Indexes a model.
    pub fn from_model(model: &Model) -> ModelIndex {
        let g = &model.graph;
        let mut idx = ModelIndex::default();
        for (node, name) in g.nodes.iter().zip(node_names(model)) {
            idx.nodes.insert(name, node.op_type.clone());
            idx.op_types.insert(node.op_type.clone());
            for t in node.inputs.iter().chain(&node.outputs) {
                if !t.is_empty() {
                    idx.tensors.insert(t.clone());
                }
            }
        }
        for v in g.inputs.iter().chain(&g.outputs) {
            idx.tensors.insert(v.name.clone());
        }
        idx.tensors.extend(g.initializers.keys().cloned());
        idx
    }
}

/// A non-fatal finding of validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// Key path (`op_config.Softmax`).
    pub key: String,
    /// What is odd.
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

/// The node names used by configs and artifacts, in graph order: the
/// node's own name, or `<op_type>_<index>` for an unnamed node (made unique
/// with `_2`, `_3`, ... if needed).
pub fn node_names(model: &Model) -> Vec<String> {
    let nodes = &model.graph.nodes;
    let mut taken: HashSet<String> = nodes
        .iter()
        .filter(|n| !n.name.is_empty())
        .map(|n| n.name.clone())
        .collect();
    nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            if !n.name.is_empty() {
                return n.name.clone();
            }
            let base = format!("{}_{i}", n.op_type);
            let mut name = base.clone();
            let mut k = 2;
            while taken.contains(&name) {
                name = format!("{base}_{k}");
                k += 1;
            }
            taken.insert(name.clone());
            name
        })
        .collect()
}

fn platform_label(p: &Platform) -> String {
    match &p.march {
        Some(m) if *m != p.name => format!("{} ({m})", p.name),
        _ => p.name.clone(),
    }
}

fn check_qtype(key: &str, q: Precision, p: &Platform, errs: &mut Vec<String>) {
    if !p.precisions.contains(&q) {
        let allowed: Vec<&str> = p.precisions.iter().map(|q| qtype_name(*q)).collect();
        errs.push(format!(
            "{key}: {} is not available on {}; allowed: {}",
            qtype_name(q),
            platform_label(p),
            allowed.join(", ")
        ));
    }
}

fn check_entry(key: &str, e: &NodeEntry, p: &Platform, errs: &mut Vec<String>) {
    for (field, q) in [
        ("qtype", e.qtype),
        ("InputType0", e.input_type0),
        ("InputType1", e.input_type1),
        ("OutputType", e.output_type),
    ] {
        if let Some(q) = q {
            check_qtype(&format!("{key}.{field}"), q, p, errs);
        }
    }
}

/// Levenshtein distance (byte-wise).
fn distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// Up to three names close to `want` (edit distance at most a third of its
/// length, at least 2), closest first.
fn suggestions<'a>(want: &str, names: impl Iterator<Item = &'a String>) -> Vec<&'a str> {
    let limit = (want.len() / 3).max(2);
    let mut close: Vec<(usize, &str)> = names
        .filter(|n| n.len().abs_diff(want.len()) <= limit)
        .map(|n| (distance(want, n), n.as_str()))
        .filter(|(d, _)| *d <= limit)
        .collect();
    close.sort();
    close.into_iter().take(3).map(|(_, n)| n).collect()
}

impl QuantConfig {
    /// Checks the config against a platform and, optionally, a model.
    ///
    /// Errors (all of them, not just the first; see [`ConfigError::Invalid`]):
    /// the checks of [`QuantConfig::check`]; a precision the platform does not
    /// run (`node_config./blk/MatMul.qtype: float16 is not available on j6e
    /// (nash-e); allowed: int8, int16, float32`); an integer
    /// `model_output_type` the platform does not run (`float32` outputs are
    /// always allowed: the conversion happens at the graph boundary); a
    /// `node_config` or `tensor_config` name the model lacks.
    ///
    /// Warnings: an `op_config` op type the model lacks; `ON` on a platform
    /// without an accelerator; a `qport.platform` other than `platform`.
    pub fn validate(
        &self,
        platform: &Platform,
        model: Option<&ModelIndex>,
    ) -> Result<Vec<Warning>, ConfigError> {
        let mut errs = self.check();
        let mut warns = Vec::new();
        let p = platform;
        if let Some(mc) = &self.model_config {
            if let Some(q) = mc.all_node_type {
                check_qtype("model_config.all_node_type", q, p, &mut errs);
            }
            if let Some(q @ (Precision::Int8 | Precision::Int16)) = mc.model_output_type {
                check_qtype("model_config.model_output_type", q, p, &mut errs);
            }
        }
        for (op, e) in &self.op_config {
            let key = format!("op_config.{op}");
            check_entry(&key, e, p, &mut errs);
            if let Some(m) = model {
                if !m.op_types.contains(op) {
                    warns.push(Warning {
                        key: key.clone(),
                        message: format!("the model has no {op} node"),
                    });
                }
            }
        }
        for (name, e) in &self.node_config {
            let key = format!("node_config.{name}");
            check_entry(&key, e, p, &mut errs);
            if let Some(m) = model {
                if !m.nodes.contains_key(name) {
                    let mut msg = format!("{key}: no node named '{name}' in the model");
                    let close = suggestions(name, m.nodes.keys());
                    if !close.is_empty() {
                        let q: Vec<String> = close.iter().map(|c| format!("'{c}'")).collect();
                        msg.push_str(&format!("; did you mean {}?", q.join(", ")));
                    }
                    errs.push(msg);
                }
            }
        }
        for (name, t) in &self.tensor_config {
            let key = format!("tensor_config.{name}");
            if let Some(q) = t.qtype {
                check_qtype(&format!("{key}.qtype"), q, p, &mut errs);
            }
            if let Some(m) = model {
                if !m.tensors.contains(name) {
                    errs.push(format!("{key}: no tensor named '{name}' in the model"));
                }
            }
        }
        if p.bpu_cores == 0 {
            let entries = self.op_config.iter().map(|(k, e)| ("op_config", k, e));
            let entries =
                entries.chain(self.node_config.iter().map(|(k, e)| ("node_config", k, e)));
            for (level, k, e) in entries {
                if e.on.is_some() {
                    warns.push(Warning {
                        key: format!("{level}.{k}.ON"),
                        message: format!(
                            "{} has no accelerator; the placement is recorded but means nothing there",
                            p.name
                        ),
                    });
                }
            }
        }
        if let Some(made_for) = self.qport.as_ref().and_then(|q| q.platform.as_deref()) {
            if made_for != p.name {
                warns.push(Warning {
                    key: "qport.platform".into(),
                    message: format!("the config was made for {made_for}, checked for {}", p.name),
                });
            }
        }
        if errs.is_empty() {
            Ok(warns)
        } else {
            Err(ConfigError::Invalid { errors: errs })
        }
    }
}

/// The entries of `cfg` that are invalid on `platform` (no model needed),
/// one message each; empty when the config fits. Used by
/// `qport migrate --config`.
pub fn validate_for_platform(cfg: &QuantConfig, platform: &Platform) -> Vec<String> {
    match cfg.validate(platform, None) {
        Ok(_) => Vec::new(),
        Err(e) => e.messages(),
    }
}

fn pick<T: Clone>(user: &Option<T>, base: &Option<T>) -> Option<T> {
    user.clone().or_else(|| base.clone())
}

fn deep<T: Clone>(user: &Option<T>, base: &Option<T>, f: impl Fn(&T, &T) -> T) -> Option<T> {
    match (user, base) {
        (Some(u), Some(b)) => Some(f(u, b)),
        _ => pick(user, base),
    }
}

/// The struct `$ty` with each listed field laid over from `$u` onto `$b`:
/// [`pick`] for the plain fields, [`deep`] with the given merge for the
/// `field => merge` ones after the last `;`. The literal names every field,
/// so a new field must be listed.
macro_rules! overlay {
    ($ty:ident; $u:ident, $b:ident; $($f:ident),* $(; $($d:ident => $m:expr),*)?
        $(; [$($l:ident),*])?) => {
        $ty {
            $($f: pick(&$u.$f, &$b.$f),)*
            $($($d: deep(&$u.$d, &$b.$d, $m),)*)?
            $($($l: if $u.$l.is_empty() { $b.$l.clone() } else { $u.$l.clone() },)*)?
        }
    };
}

fn merge_entry(u: &NodeEntry, b: &NodeEntry) -> NodeEntry {
    overlay!(NodeEntry; u, b; qtype, input_type0, input_type1, output_type, on)
}

fn merge_map<T: Clone>(
    user: &BTreeMap<String, T>,
    base: &BTreeMap<String, T>,
    f: impl Fn(&T, &T) -> T,
) -> BTreeMap<String, T> {
    let mut out = base.clone();
    for (k, u) in user {
        let v = match base.get(k) {
            Some(b) => f(u, b),
            None => u.clone(),
        };
        out.insert(k.clone(), v);
    }
    out
}

/// `user` laid over `base`: every field the user gives replaces the base's,
/// recursively; maps are merged by key (and entries field by field);
/// `modelwise_search`, `layerwise_search` and `subgraph_config` are replaced whole.
pub fn merge(base: &QuantConfig, user: &QuantConfig) -> QuantConfig {
    let act = |u: &ActivationConfig, b: &ActivationConfig| {
        overlay!(ActivationConfig; u, b; calibration_type, num_bin, max_num_bin, max_percentile,
            per_channel, asymmetric, ema_momentum, power_of_two)
    };
    let bias =
        |u: &BiasCorrection, b: &BiasCorrection| overlay!(BiasCorrection; u, b; num_sample, metric);
    let weight = |u: &WeightConfig, b: &WeightConfig| {
        overlay!(WeightConfig; u, b; per_channel, asymmetric, power_of_two;
            bias_correction => bias)
    };
    let model = |u: &ModelConfig, b: &ModelConfig| {
        overlay!(ModelConfig; u, b; all_node_type, model_output_type, modelwise_search,
            layerwise_search; activation => act, weight => weight)
    };
    let tensor = |u: &TensorEntry, b: &TensorEntry| {
        overlay!(TensorEntry; u, b; scale, zero_point, qtype, calibration_type, grid, axis,
            kind; [other_grids])
    };
    let meta =
        |u: &QportMeta, b: &QportMeta| overlay!(QportMeta; u, b; platform, template, tail_output);
    QuantConfig {
        model_config: deep(&user.model_config, &base.model_config, model),
        op_config: merge_map(&user.op_config, &base.op_config, merge_entry),
        subgraph_config: pick(&user.subgraph_config, &base.subgraph_config),
        node_config: merge_map(&user.node_config, &base.node_config, merge_entry),
        tensor_config: merge_map(&user.tensor_config, &base.tensor_config, tensor),
        qport: deep(&user.qport, &base.qport, meta),
    }
}

/// The precisions of one node after resolution.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedNode {
    /// Node name (generated for unnamed nodes, see [`node_names`]).
    pub name: String,
    /// Op type.
    pub op_type: String,
    /// Precision of the node.
    pub qtype: Precision,
    /// Input precisions set explicitly (`InputTypeN`), by input index.
    pub input_types: BTreeMap<usize, Precision>,
    /// Output precision set explicitly (`OutputType`).
    pub output_type: Option<Precision>,
    /// Placement (`ON`), recorded.
    pub on: Option<Device>,
}

/// Activation calibration settings with defaults applied.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedActivation {
    /// Calibrators to try, in order, without repeats (default `max`, `kl`);
    /// with more than one, the best by output cosine is kept.
    pub methods: Vec<CalibMethod>,
    /// Histogram bins for `kl` (default 1024).
    pub num_bin: u32,
    /// Largest histogram (default 16384, at least `num_bin`).
    pub max_num_bin: u32,
    /// Percentile of the `percentile` calibrator: the first candidate
    /// (default 0.99995).
    pub max_percentile: f64,
    /// Per-channel activation scales: the first candidate (default false).
    pub per_channel: bool,
    /// Asymmetric activations: the first candidate (default false).
    pub asymmetric: bool,
    /// Momentum of the `ema` calibrator (default 0.9).
    pub ema_momentum: f32,
    /// Power-of-two scales.
    pub power_of_two: Option<PowerOfTwo>,
    /// Every candidate of the fields that may be searched.
    pub candidates: ActivationCandidates,
}

/// The full candidate lists of the searchable activation settings (the
/// scalar fields of [`ResolvedActivation`] hold the first of each).
#[derive(Debug, Clone, PartialEq)]
pub struct ActivationCandidates {
    /// `max_percentile` values.
    pub max_percentile: Vec<f64>,
    /// `per_channel` values.
    pub per_channel: Vec<bool>,
    /// `asymmetric` values.
    pub asymmetric: Vec<bool>,
}

/// Weight quantization settings with defaults applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResolvedWeight {
    /// Per-output-channel scales (default true).
    pub per_channel: bool,
    /// Asymmetric weights (default false).
    pub asymmetric: bool,
    /// Power-of-two scales.
    pub power_of_two: Option<PowerOfTwo>,
}

/// A `tensor_config` entry, normalised.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorOverride {
    /// Fixed scales (one, or one per channel).
    pub scales: Option<Vec<f32>>,
    /// Zero points, as many as `scales` (0 where not given); `None` without scales.
    pub zero_points: Option<Vec<i32>>,
    /// The grid the fixed scales are for (`None`: see [`TensorOverride::fixed`]).
    pub grid: Option<crate::Grid>,
    /// Precision of the tensor.
    pub qtype: Option<Precision>,
    /// Calibrator of the tensor.
    pub method: Option<CalibMethod>,
    /// Fixed scales and zero points on further grids.
    pub other_grids: Vec<(crate::Grid, Vec<f32>, Vec<i32>)>,
}

impl TensorOverride {
    /// The fixed scales and zero points for `grid`: the entry's own when
    /// they are for this grid (its `grid` when given, else a grid of its
    /// `qtype`'s width when given, else any grid), else an
    /// [`other_grids`](crate::config::TensorEntry::other_grids) entry for
    /// it; `None` when the tensor is to be calibrated on this grid.
    pub fn fixed(&self, grid: crate::Grid) -> Option<(Vec<f32>, Vec<i32>)> {
        if let (Some(s), Some(z)) = (&self.scales, &self.zero_points) {
            let mine = match (self.grid, self.qtype) {
                (Some(g), _) => g == grid,
                (None, Some(q)) => crate::Grid::for_qtype(q, grid.is_signed()) == Some(grid),
                (None, None) => true,
            };
            if mine {
                return Some((s.clone(), z.clone()));
            }
        }
        self.other_grids
            .iter()
            .find(|(g, _, _)| *g == grid)
            .map(|(_, s, z)| (s.clone(), z.clone()))
    }
}

/// A config resolved against a model and a platform.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// Platform name.
    pub platform: String,
    /// High-accuracy tail output form of the platform.
    pub tail_output: HighAccuracyOutput,
    /// One entry per node, in graph order.
    pub nodes: Vec<ResolvedNode>,
    /// Activation calibration.
    pub activation: ResolvedActivation,
    /// Weight quantization.
    pub weight: ResolvedWeight,
    /// Type of the model outputs (default float32).
    pub model_output_type: Precision,
    /// Per-tensor overrides by tensor name.
    pub tensor_overrides: BTreeMap<String, TensorOverride>,
    /// The merged config (with `qport.platform` and `qport.tail_output` set
    /// to the platform's).
    pub config: QuantConfig,
    /// Warnings of validation.
    pub warnings: Vec<Warning>,
}

impl Resolved {
    /// Number of nodes of each precision.
    pub fn precision_mix(&self) -> BTreeMap<Precision, usize> {
        let mut m = BTreeMap::new();
        for n in &self.nodes {
            *m.entry(n.qtype).or_insert(0) += 1;
        }
        m
    }

    /// The resolved node named `name`.
    pub fn node(&self, name: &str) -> Option<&ResolvedNode> {
        self.nodes.iter().find(|n| n.name == name)
    }
}

fn dedup<T: PartialEq + Clone>(v: Vec<T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(v.len());
    for x in v {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

fn list<T: Clone + PartialEq>(v: &Option<OneOrMany<T>>, default: T) -> Vec<T> {
    let v = dedup(v.as_ref().map(|v| v.to_vec()).unwrap_or_default());
    if v.is_empty() {
        vec![default]
    } else {
        v
    }
}

fn resolve_activation(a: &ActivationConfig) -> ResolvedActivation {
    let methods = dedup(
        a.calibration_type
            .as_ref()
            .map(|v| v.to_vec())
            .unwrap_or_else(|| vec![CalibMethod::Max, CalibMethod::Kl]),
    );
    let candidates = ActivationCandidates {
        max_percentile: list(&a.max_percentile, 0.99995),
        per_channel: list(&a.per_channel, false),
        asymmetric: list(&a.asymmetric, false),
    };
    let num_bin = a.num_bin.unwrap_or(1024);
    ResolvedActivation {
        methods,
        num_bin,
        max_num_bin: a.max_num_bin.unwrap_or(16384).max(num_bin),
        max_percentile: candidates.max_percentile[0],
        per_channel: candidates.per_channel[0],
        asymmetric: candidates.asymmetric[0],
        ema_momentum: a.ema_momentum.unwrap_or(0.9),
        power_of_two: a.power_of_two,
        candidates,
    }
}

fn resolve_tensor(t: &TensorEntry) -> TensorOverride {
    let scales = t.scale.as_ref().map(|s| s.to_vec());
    let zero_points = scales.as_ref().map(|s| match &t.zero_point {
        None => vec![0; s.len()],
        Some(OneOrMany::One(z)) => vec![*z; s.len()],
        Some(OneOrMany::Many(z)) => z.clone(),
    });
    let zeros = |z: &Option<OneOrMany<i32>>, n: usize| match z {
        None => vec![0; n],
        Some(OneOrMany::One(z)) => vec![*z; n],
        Some(OneOrMany::Many(z)) => z.clone(),
    };
    TensorOverride {
        scales,
        zero_points,
        grid: t.grid,
        qtype: t.qtype,
        method: t.calibration_type,
        other_grids: t
            .other_grids
            .iter()
            .map(|g| {
                let s = g.scale.to_vec();
                let z = zeros(&g.zero_point, s.len());
                (g.grid, s, z)
            })
            .collect(),
    }
}

/// Lays `user` over `base` (see [`merge`]), validates the result against
/// `platform` and `model`, and resolves every node's precision
/// (`all_node_type` < `op_config` < `node_config`).
///
/// When a user config is given, op types that only the base (template)
/// names and the model lacks give no warning.
pub fn resolve(
    model: &Model,
    platform: &Platform,
    base: &QuantConfig,
    user: Option<&QuantConfig>,
) -> Result<Resolved, ConfigError> {
    let mut cfg = match user {
        Some(u) => merge(base, u),
        None => base.clone(),
    };
    let index = ModelIndex::from_model(model);
    let mut warnings = cfg.validate(platform, Some(&index))?;
    // op types the template names but the model lacks are expected (a
    // template serves every model); warn only about the user's own entries
    let from_user = |op: &str| user.is_some_and(|u| u.op_config.contains_key(op));
    warnings.retain(|w| {
        !cfg.op_config
            .keys()
            .any(|op| w.key == format!("op_config.{op}") && !from_user(op))
    });
    let meta = cfg.qport.get_or_insert_with(QportMeta::default);
    meta.platform = Some(platform.name.clone());
    meta.tail_output = Some(platform.tail_output);

    let mc = cfg.model_config.clone().unwrap_or_default();
    let all = mc.all_node_type.unwrap_or(Precision::Int8);
    let nodes = model
        .graph
        .nodes
        .iter()
        .zip(node_names(model))
        .map(|(node, name)| {
            let op = cfg.op_config.get(&node.op_type);
            let nd = cfg.node_config.get(&name);
            let get =
                |f: fn(&NodeEntry) -> Option<Precision>| nd.and_then(f).or_else(|| op.and_then(f));
            let mut input_types = BTreeMap::new();
            for (i, f) in [
                (
                    0usize,
                    (|e: &NodeEntry| e.input_type0) as fn(&NodeEntry) -> Option<Precision>,
                ),
                (1, |e: &NodeEntry| e.input_type1),
            ] {
                if let Some(q) = get(f) {
                    input_types.insert(i, q);
                }
            }
            ResolvedNode {
                qtype: get(|e| e.qtype).unwrap_or(all),
                output_type: get(|e| e.output_type),
                on: nd.and_then(|e| e.on).or_else(|| op.and_then(|e| e.on)),
                input_types,
                op_type: node.op_type.clone(),
                name,
            }
        })
        .collect();
    let w = mc.weight.clone().unwrap_or_default();
    Ok(Resolved {
        platform: platform.name.clone(),
        tail_output: platform.tail_output,
        nodes,
        activation: resolve_activation(&mc.activation.clone().unwrap_or_default()),
        weight: ResolvedWeight {
            per_channel: w.per_channel.unwrap_or(true),
            asymmetric: w.asymmetric.unwrap_or(false),
            power_of_two: w.power_of_two,
        },
        model_output_type: mc.model_output_type.unwrap_or(Precision::Float32),
        tensor_overrides: cfg
            .tensor_config
            .iter()
            .map(|(k, t)| (k.clone(), resolve_tensor(t)))
            .collect(),
        config: cfg,
        warnings,
    })
}
