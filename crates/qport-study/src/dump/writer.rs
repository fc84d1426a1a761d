//! Writing a dump directory while a plan runs: each value is written (atomically)
//! as the engine's tap reports it and then forgotten; the index comes last.

use super::index::{DumpIndex, DumpModel, DumpedValue, QuantParams, SCHEMA};
use super::{value_file_name, DumpError, INDEX_FILE};
use qport_core::pattern::glob;
use qport_core::Tensor;
use qport_engine::Plan;
use qport_onnx::{opclass, Model};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// What a dump records about its run.
#[derive(Debug, Clone)]
pub struct DumpMeta {
    /// The model file as given.
    pub model_path: String,
    /// Lower-case hex sha256 of the model file.
    pub model_sha256: String,
    /// `"fp32"` for the float graph, else the arithmetic profile's name.
    pub profile: String,
}

/// What [`DumpWriter::finish`] wrote.
#[derive(Debug, Clone)]
pub struct DumpSummary {
    /// The index written (also at `dir/index.json`).
    pub index: DumpIndex,
    /// Bytes of `.npy` files written.
    pub bytes: u64,
    /// Values the filter kept that have no `.npy` form (bfloat16, string),
    /// with the dtype: not written.
    pub skipped: Vec<(String, String)>,
}

/// Writes a dump directory value by value (see the [module docs](super)).
///
/// ```no_run
/// use qport_study::dump::{run_dumped, DumpMeta, DumpWriter};
/// let model = qport_onnx::load("model.onnx").unwrap();
/// let plan = qport_engine::Plan::with_options(&model, qport_engine::PlanOptions::unfused()).unwrap();
/// let meta = DumpMeta { model_path: "model.onnx".into(), model_sha256: "…".into(), profile: "fp32".into() };
/// let mut w = DumpWriter::create("dump".as_ref(), meta, &model, &[]).unwrap();
/// let x = qport_core::Tensor::zeros(qport_core::DType::F32, vec![1, 3, 224, 224]).unwrap();
/// let outputs = run_dumped(&plan, vec![("input".to_string(), x)], &mut w).unwrap();
/// let summary = w.finish().unwrap();
/// println!("{} values", summary.index.values.len());
/// ```
pub struct DumpWriter {
    dir: PathBuf,
    meta: DumpMeta,
    filter: Vec<String>,
    producers: HashMap<String, (String, String)>,
    quant: HashMap<String, QuantParams>,
    values: Vec<DumpedValue>,
    seen: HashSet<String>,
    skipped: Vec<(String, String)>,
    bytes: u64,
    error: Option<DumpError>,
}

impl DumpWriter {
    /// Prepares `dir` for a dump of a run of `model` (the graph the plan
    /// executes: the lowered one under an integer profile). `dir` is
    /// created if missing; an existing directory must be empty or hold a
    /// previous dump (its index and the files it lists are removed first,
    /// the index before anything else). `filter` holds name globs
    /// ([`qport_core::pattern::glob`], `*` any run of characters): only
    /// values matching one are written; empty keeps every value.
    pub fn create(
        dir: &Path,
        meta: DumpMeta,
        model: &Model,
        filter: &[String],
    ) -> Result<DumpWriter, DumpError> {
        prepare_dir(dir)?;
        let mut producers = HashMap::new();
        for n in &model.graph.nodes {
            for o in n.outputs.iter().filter(|o| !o.is_empty()) {
                producers.insert(o.clone(), (n.name.clone(), n.qualified_op()));
            }
        }
        let mut w = DumpWriter {
            dir: dir.to_path_buf(),
            meta,
            filter: filter.to_vec(),
            producers,
            quant: HashMap::new(),
            values: vec![],
            seen: HashSet::new(),
            skipped: vec![],
            bytes: 0,
            error: None,
        };
        w.add_quant_from(model);
        Ok(w)
    }

    /// Also takes quantization parameters from `model` (the artifact an
    /// integer plan was lowered from: its QuantizeLinear outputs keep their
    /// names as the lowered operators' outputs). Parameters already known
    /// are kept.
    pub fn add_quant_from(&mut self, model: &Model) {
        for (name, q) in quant_params(model) {
            self.quant.entry(name).or_insert(q);
        }
    }

    /// True when `name` passes the filter.
    pub fn wants(&self, name: &str) -> bool {
        self.filter.is_empty() || self.filter.iter().any(|p| glob(p, name))
    }

    /// Writes value `name` (a graph input, or a node's output) if the
    /// filter keeps it and it was not written before.
    pub fn write_value(&mut self, name: &str, t: &Tensor) -> Result<(), DumpError> {
        if !self.wants(name) || self.seen.contains(name) {
            return Ok(());
        }
        self.seen.insert(name.to_string());
        if qport_data::npy::descr(t.dtype()).is_none() {
            self.skipped
                .push((name.to_string(), t.dtype().name().to_string()));
            return Ok(());
        }
        let file = value_file_name(name);
        let bytes = qport_data::npy::encode(t)?;
        qport_data::atomic::write_atomic(&self.dir.join(&file), &bytes)?;
        self.bytes += bytes.len() as u64;
        let (producer, op) = match self.producers.get(name) {
            Some((n, o)) => (Some(n.clone()), Some(o.clone())),
            None => (None, None),
        };
        let quant = if t.dtype().is_int() {
            self.quant.get(name).cloned()
        } else {
            None
        };
        self.values.push(DumpedValue {
            name: name.to_string(),
            file,
            dtype: t.dtype().name().to_string(),
            shape: t.shape().to_vec(),
            producer,
            op,
            quant,
        });
        Ok(())
    }

    /// Like [`DumpWriter::write_value`] for use in an engine tap, which
    /// cannot fail: the first error is kept (and nothing more is written)
    /// until [`DumpWriter::finish`] returns it.
    pub fn tap(&mut self, name: &str, t: &Tensor) {
        if self.error.is_none() {
            if let Err(e) = self.write_value(name, t) {
                self.error = Some(e);
            }
        }
    }

    /// Writes `index.json` (atomically, last) and returns what was written;
    /// the first error of [`DumpWriter::tap`] instead, if any (then no
    /// index is written and the directory is not a complete dump).
    pub fn finish(self) -> Result<DumpSummary, DumpError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let index = DumpIndex {
            schema: SCHEMA.to_string(),
            qport_version: env!("CARGO_PKG_VERSION").to_string(),
            model: DumpModel {
                path: self.meta.model_path,
                sha256: self.meta.model_sha256,
            },
            profile: self.meta.profile,
            values: self.values,
            dir: self.dir.clone(),
        };
        let path = self.dir.join(INDEX_FILE);
        let mut json = serde_json::to_vec_pretty(&index)
            .map_err(|e| DumpError::invalid(&path, format!("cannot serialize: {e}")))?;
        json.push(b'\n');
        qport_data::atomic::write_atomic(&path, &json)?;
        Ok(DumpSummary {
            index,
            bytes: self.bytes,
            skipped: self.skipped,
        })
    }
}

/// Runs `plan` on `inputs`, writing the graph inputs (in the plan's
/// order) and then every value a step produces to `writer` as it is
/// produced; returns the graph outputs. Call [`DumpWriter::finish`] after.
pub fn run_dumped(
    plan: &Plan,
    inputs: Vec<(String, Tensor)>,
    writer: &mut DumpWriter,
) -> Result<Vec<(String, Tensor)>, DumpError> {
    run_dumped_with(plan, inputs, writer, |inputs, tap| {
        plan.run_with_tap(inputs, tap)
    })
}

/// Like [`run_dumped`] with the run made by `run` (given the inputs and a
/// tap to call for every produced value), for runs that return more than
/// the outputs, such as
/// [`IntegerPlan::run_with_coverage_tap`](qport_engine::IntegerPlan::run_with_coverage_tap)
/// on the integer plan's [`Plan`].
pub fn run_dumped_with<R>(
    plan: &Plan,
    inputs: Vec<(String, Tensor)>,
    writer: &mut DumpWriter,
    run: impl FnOnce(
        Vec<(String, Tensor)>,
        &mut dyn FnMut(&str, &Tensor),
    ) -> Result<R, qport_engine::EngineError>,
) -> Result<R, DumpError> {
    for vi in plan.inputs() {
        if let Some((_, t)) = inputs.iter().find(|(n, _)| *n == vi.name) {
            writer.write_value(&vi.name, t)?;
        }
    }
    let result = run(inputs, &mut |name, t| writer.tap(name, t))?;
    if let Some(e) = writer.error.take() {
        return Err(e);
    }
    Ok(result)
}

/// Runs the quantized artifact `model` in integers under `profile` on
/// `inputs` with every value of the lowered graph produced (no fusion),
/// and dumps each one to `dir` ([`DumpWriter::create`] rules; `filter` as
/// there), with quantization parameters taken from the artifact too: the
/// dump `qport run --profile P --dump DIR` writes, for a caller that
/// compares a target's dumps with it.
pub fn dump_integer_run(
    model: &Model,
    profile: &qport_core::arith::ArithProfile,
    inputs: Vec<(String, Tensor)>,
    dir: &Path,
    meta: DumpMeta,
    filter: &[String],
) -> Result<DumpSummary, DumpError> {
    let ip = qport_engine::IntegerPlan::with_fusion(model, profile, false)?;
    let mut w = DumpWriter::create(dir, meta, ip.model(), filter)?;
    w.add_quant_from(model);
    run_dumped_with(ip.plan(), inputs, &mut w, |inputs, tap| {
        ip.run_with_coverage_tap(inputs, tap)
    })?;
    w.finish()
}

/// Creates `dir`, or clears a previous dump in it; refuses a non-empty
/// directory that is not a dump.
fn prepare_dir(dir: &Path) -> Result<(), DumpError> {
    if dir.exists() && !dir.is_dir() {
        return Err(DumpError::invalid(dir, "exists and is not a directory"));
    }
    std::fs::create_dir_all(dir).map_err(|e| DumpError::io(dir, e))?;
    let entries: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| DumpError::io(dir, e))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    if entries.is_empty() {
        return Ok(());
    }
    let old = DumpIndex::read(dir).map_err(|_| {
        DumpError::invalid(
            dir,
            "directory is not empty and holds no qport dump; remove it or choose another",
        )
    })?;
    let index = dir.join(INDEX_FILE);
    std::fs::remove_file(&index).map_err(|e| DumpError::io(&index, e))?;
    for v in &old.values {
        let p = dir.join(&v.file);
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(DumpError::io(&p, e)),
        }
    }
    Ok(())
}

/// Positions `(value, scale, zero point)` of the quantized operands of the
/// integer operators (`None`: an output; `Some(i)`: input `i`).
fn operand_params(op: &str) -> &'static [(Option<usize>, usize, usize)] {
    match op {
        "QuantizeLinear" => &[(None, 1, 2)],
        "DequantizeLinear" => &[(Some(0), 1, 2)],
        "QLinearConv" | "QLinearMatMul" | "QLinearAdd" | "QLinearMul" => {
            &[(Some(0), 1, 2), (Some(3), 4, 5), (None, 6, 7)]
        }
        "QGemm" => &[(Some(0), 1, 2), (Some(3), 4, 5), (None, 7, 8)],
        "QLinearGlobalAveragePool"
        | "QLinearAveragePool"
        | "QLinearSigmoid"
        | "QLinearLeakyRelu"
        | "QLinearSoftmax" => &[(Some(0), 1, 2), (None, 3, 4)],
        _ => &[],
    }
}

/// Quantization parameters of the values of `model` that a Q/DQ node or
/// an integer operator states with constant scales, per-tensor ones
/// propagated through the integer data-movement operators.
fn quant_params(model: &Model) -> HashMap<String, QuantParams> {
    let g = &model.graph;
    let mut out: HashMap<String, QuantParams> = HashMap::new();
    for n in &g.nodes {
        for &(value, s, z) in operand_params(&n.op_type) {
            let name = match value {
                None => n.outputs.first(),
                Some(i) => n.inputs.get(i),
            };
            let Some(name) = name.filter(|v| !v.is_empty()) else {
                continue;
            };
            let Some(scale) = n
                .input(s)
                .and_then(|s| g.initializers.get(s))
                .and_then(|t| t.to_f32_vec().ok())
            else {
                continue;
            };
            let zero_point = n
                .input(z)
                .and_then(|z| g.initializers.get(z))
                .and_then(|t| t.to_i64_vec().ok())
                .unwrap_or_else(|| vec![0; scale.len()]);
            let axis = (scale.len() > 1).then(|| n.attr_int("axis", 1).unwrap_or(1));
            out.entry(name.clone()).or_insert(QuantParams {
                scale,
                zero_point,
                axis,
            });
        }
    }
    for n in &g.nodes {
        if !n.in_default_domain() || !opclass::moves_integers(&n.op_type) {
            continue;
        }
        let (Some(i), Some(o)) = (n.inputs.first(), n.outputs.first()) else {
            continue;
        };
        // per-tensor only: a channel axis may move
        if let Some(q) = out.get(i).filter(|q| q.axis.is_none()).cloned() {
            out.entry(o.clone()).or_insert(q);
        }
    }
    out
}
