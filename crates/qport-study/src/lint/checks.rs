//! The checks behind [`super::RULES`]: raw-graph checks of the QDQ forms
//! (before the import, which refuses some of them), then checks on what
//! [`qport_quant::import`] read back (parameters, precisions, float graph).

use super::fused::fused_activation;
use super::{rule, LintFinding, QdqCensus};
use qport_core::arith::{ArithProfile, Requant};
use qport_core::DType;
use qport_onnx::{opclass, Dim, GraphIndex, Model, Node, ValueInfo};
use qport_platform::{ByoQdq, HighAccuracyOutput, Platform, Precision, Severity};
use qport_quant::config::{qtype_name as precision_name, QuantConfig};
use qport_quant::import::{import, Imported};
use qport_quant::pot::pot_value;
use qport_quant::qdq::grid_name;
use qport_quant::template::{template, Template};
use qport_quant::{Grid, PowerOfTwo, QParams};

/// One lint run: the inputs and the findings so far.
pub(super) struct Checker<'a> {
    model: &'a Model,
    p: &'a Platform,
    profile: ArithProfile,
    native: QuantConfig,
    findings: Vec<LintFinding>,
    notes: Vec<String>,
    census: QdqCensus,
}

/// `op` as a QuantizeLinear or DequantizeLinear of the default domain or
/// onnxruntime's.
fn is_qdq_node(n: &Node) -> bool {
    opclass::is_qdq(&n.op_type) && (n.in_default_domain() || n.domain == "com.microsoft")
}

fn names(v: &[&Node]) -> Vec<String> {
    v.iter().map(|n| n.name.clone()).collect()
}

fn fmt_dims(v: &ValueInfo) -> String {
    v.shape_string()
}

/// `scale 0.0123 (uint8, zero point 128)` or `32 per-channel scales (int8)`.
fn describe(q: &QParams) -> String {
    if q.scales.len() == 1 {
        format!(
            "scale {} ({}, zero point {})",
            q.scales[0],
            grid_name(q.grid),
            q.zero_points[0]
        )
    } else {
        format!(
            "{} per-channel scales on axis {} ({})",
            q.scales.len(),
            q.axis.map_or("?".into(), |a| a.to_string()),
            grid_name(q.grid)
        )
    }
}

impl<'a> Checker<'a> {
    pub(super) fn new(model: &'a Model, p: &'a Platform, profile: ArithProfile) -> Checker<'a> {
        Checker {
            model,
            p,
            profile,
            native: template(p, Template::Default),
            findings: vec![],
            notes: vec![],
            census: QdqCensus::default(),
        }
    }

    pub(super) fn finish(self) -> (QdqCensus, Vec<LintFinding>, Vec<String>) {
        (self.census, self.findings, self.notes)
    }

    fn push(
        &mut self,
        id: &'static str,
        severity: Option<Severity>,
        message: String,
        nodes: Vec<String>,
        tensors: Vec<String>,
    ) {
        let r = rule(id).expect("checks only name catalogued rules");
        self.findings.push(LintFinding {
            rule: r.id,
            severity: severity.unwrap_or(r.severity),
            message,
            nodes,
            tensors,
        });
    }

    pub(super) fn run(&mut self) {
        let g = &self.model.graph;
        self.census.quantize_nodes = g
            .nodes
            .iter()
            .filter(|n| is_qdq_node(n) && n.op_type == "QuantizeLinear")
            .count();
        self.census.dequantize_nodes = g
            .nodes
            .iter()
            .filter(|n| is_qdq_node(n) && n.op_type == "DequantizeLinear")
            .count();
        self.qdq_forms();
        self.non_standard_ops();
        self.pair_mismatch();
        self.interface();
        match import(self.model) {
            Ok(imp) => {
                self.census.imported = true;
                self.census.quantized_activations = imp.activations.len();
                self.census.quantized_weights = imp.weights.len();
                self.census.float16_values = imp.float16.len();
                self.imported(&imp);
            }
            Err(e) => self.notes.push(format!(
                "the QDQ structure could not be read ({e}); only the graph-form, operator and interface rules ran"
            )),
        }
        if self.census.quantize_nodes + self.census.dequantize_nodes == 0 {
            self.notes.push(
                "no QuantizeLinear/DequantizeLinear nodes: a float model, which the native flow quantizes itself; the QDQ rules had nothing to check".into(),
            );
        }
    }

    /// blocked-quant, subbyte-grid, float8-grid, opset-qdq-form: the forms
    /// of each Q/DQ node, read from its attributes and constant dtypes.
    fn qdq_forms(&mut self) {
        let model = self.model;
        let g = &model.graph;
        let opset = model.opset("").unwrap_or(0);
        for n in g.nodes.iter().filter(|n| is_qdq_node(n)) {
            let one = || vec![n.name.clone()];
            if n.attr_int("block_size", 0).unwrap_or(0) != 0 {
                self.push(
                    "blocked-quant",
                    None,
                    format!(
                        "{} `{}` quantizes in blocks of {}",
                        n.op_type,
                        n.name,
                        n.attr_int("block_size", 0).unwrap_or(0)
                    ),
                    one(),
                    vec![n.inputs[0].clone()],
                );
            }
            // the integer side's dtype: the zero point, else the DQ's
            // constant input, else a Q's `output_dtype`
            let zp = n
                .input(2)
                .and_then(|z| g.initializers.get(z))
                .map(|t| t.dtype());
            let dq_const = (n.op_type == "DequantizeLinear")
                .then(|| {
                    n.input(0)
                        .and_then(|x| g.initializers.get(x))
                        .map(|t| t.dtype())
                })
                .flatten();
            let out_dtype = n
                .attr_int("output_dtype", 0)
                .ok()
                .filter(|&c| c != 0)
                .and_then(|c| DType::from_onnx_code(c as i32));
            let Some(d) = zp.or(dq_const).or(out_dtype) else {
                continue;
            };
            let msg = |what: &str| {
                format!(
                    "{} `{}` uses a {d} grid ({what}); {} runs {}",
                    n.op_type,
                    n.name,
                    self.p.name,
                    self.precision_list()
                )
            };
            if matches!(d, DType::I4 | DType::U4 | DType::I2 | DType::U2) {
                let m = msg("sub-byte integers");
                self.push("subbyte-grid", None, m, one(), vec![n.inputs[0].clone()]);
            } else if d.is_float() && d.bits() <= 8 {
                let m = msg("8-bit or smaller floats");
                self.push("float8-grid", None, m, one(), vec![n.inputs[0].clone()]);
            }
            let sixteen = matches!(d, DType::I16 | DType::U16);
            let per_axis = n
                .input(1)
                .and_then(|s| g.initializers.get(s))
                .is_some_and(|t| t.rank() == 1 && t.len() > 1);
            let form = if sixteen && opset < 21 {
                Some(format!("{d} QDQ needs opset 21"))
            } else if per_axis && opset < 13 {
                Some("per-axis scales need opset 13".into())
            } else {
                None
            };
            if let Some(f) = form {
                self.push(
                    "opset-qdq-form",
                    None,
                    format!(
                        "{} `{}`: {f}, the model declares opset {opset}",
                        n.op_type, n.name
                    ),
                    one(),
                    vec![n.inputs[0].clone()],
                );
            }
        }
    }

    fn precision_list(&self) -> String {
        let v: Vec<&str> = self
            .p
            .precisions
            .iter()
            .map(|&p| precision_name(p))
            .collect();
        v.join("/")
    }

    /// non-standard-op: custom-domain and QOperator nodes, on platforms
    /// whose own flow parses the graph.
    fn non_standard_ops(&mut self) {
        if !self.p.byo_qdq.native_flow() {
            return;
        }
        let bad: Vec<&Node> = self
            .model
            .graph
            .nodes
            .iter()
            .filter(|n| !n.in_default_domain() || opclass::is_integer_op(&n.op_type))
            .collect();
        for n in bad {
            let m = format!(
                "`{}` is {}: {}'s native flow parses standard ONNX operators",
                n.name,
                n.qualified_op(),
                self.p.name
            );
            self.push("non-standard-op", None, m, vec![n.name.clone()], vec![]);
        }
    }

    /// qdq-pair-mismatch: a DequantizeLinear reading a QuantizeLinear with
    /// other parameters.
    fn pair_mismatch(&mut self) {
        let g = &self.model.graph;
        let index = GraphIndex::new(g);
        let value = |name: Option<&str>| -> Option<Vec<f64>> {
            let t = g.initializers.get(name?)?;
            if t.dtype().is_float() {
                t.to_f32_vec()
                    .ok()
                    .map(|v| v.into_iter().map(f64::from).collect())
            } else {
                t.to_i64_vec()
                    .ok()
                    .map(|v| v.into_iter().map(|x| x as f64).collect())
            }
        };
        let mut found = vec![];
        for dq in g
            .nodes
            .iter()
            .filter(|n| is_qdq_node(n) && n.op_type == "DequantizeLinear")
        {
            let Some(q) = dq
                .input(0)
                .and_then(|x| index.producer(x))
                .map(|i| &g.nodes[i])
            else {
                continue;
            };
            if !(is_qdq_node(q) && q.op_type == "QuantizeLinear") {
                continue;
            }
            let same = |i: usize| {
                q.input(i).filter(|s| !s.is_empty()) == dq.input(i).filter(|s| !s.is_empty())
                    || value(q.input(i)) == value(dq.input(i))
            };
            if !(same(1) && same(2)) {
                let (sq, sd) = (value(q.input(1)), value(dq.input(1)));
                found.push((
                    format!(
                        "`{}` quantizes with scale {:?}, `{}` dequantizes with {:?}: the pair rescales the value, which a compiler folding it into one quantization loses",
                        q.name,
                        sq.unwrap_or_default(),
                        dq.name,
                        sd.unwrap_or_default()
                    ),
                    vec![q.name.clone(), dq.name.clone()],
                    vec![q.inputs[0].clone()],
                ));
            }
        }
        for (m, n, t) in found {
            self.push("qdq-pair-mismatch", None, m, n, t);
        }
    }

    /// dynamic-dim, nv12-odd-size, image-channels: the graph interface.
    fn interface(&mut self) {
        let model = self.model;
        let g = &model.graph;
        let index = GraphIndex::new(g);
        let readers = |v: &str| -> Vec<String> {
            index
                .consumers(v)
                .iter()
                .map(|&i| g.nodes[i].name.clone())
                .collect()
        };
        if self.p.byo_qdq.native_flow() {
            let values = g.inputs.iter().map(|v| ("input", v));
            for (kind, v) in values.chain(g.outputs.iter().map(|v| ("output", v))) {
                let dynamic = match &v.shape {
                    None => true,
                    Some(s) => s.iter().any(|d| !matches!(d, Dim::Known(_))),
                };
                if dynamic {
                    let nodes = if kind == "input" {
                        readers(&v.name)
                    } else {
                        index
                            .producer(&v.name)
                            .map(|i| vec![g.nodes[i].name.clone()])
                            .unwrap_or_default()
                    };
                    let m = format!(
                        "graph {kind} `{}` has shape {}: {} compiles for fixed shapes",
                        v.name,
                        fmt_dims(v),
                        self.p.name
                    );
                    self.push("dynamic-dim", None, m, nodes, vec![v.name.clone()]);
                }
            }
        }
        if self.p.image_stride_align <= 1 {
            return; // the platform takes no image (nv12) inputs
        }
        for v in &g.inputs {
            let Some(s) = &v.shape else { continue };
            let dims: Vec<u64> = s
                .iter()
                .filter_map(|d| match d {
                    Dim::Known(k) => Some(*k),
                    _ => None,
                })
                .collect();
            if s.len() != 4 || dims.len() != 4 {
                continue;
            }
            let (layout, h, w) = if dims[1] == 3 {
                ("NCHW", dims[2], dims[3])
            } else if dims[3] == 3 {
                ("NHWC", dims[1], dims[2])
            } else {
                let m = format!(
                    "input `{}` {} has {} channels (NCHW) / {} (NHWC): not a 3-channel image, it is a featuremap on {} (memory unit {} B)",
                    v.name,
                    fmt_dims(v),
                    dims[1],
                    dims[3],
                    self.p.name,
                    self.p.min_memory_unit
                );
                self.push(
                    "image-channels",
                    None,
                    m,
                    readers(&v.name),
                    vec![v.name.clone()],
                );
                continue;
            };
            if h % 2 == 1 || w % 2 == 1 {
                let m = format!(
                    "input `{}` is a 3-channel {layout} image of {h}x{w}: nv12 needs even height and width (row stride aligned to {} B on {})",
                    v.name, self.p.image_stride_align, self.p.name
                );
                self.push(
                    "nv12-odd-size",
                    None,
                    m,
                    readers(&v.name),
                    vec![v.name.clone()],
                );
            }
        }
    }

    /// The rules that need the imported QDQ structure.
    fn imported(&mut self, imp: &Imported) {
        let f = &imp.model.graph;
        let index = GraphIndex::new(f);
        // the node producing a value of the float graph; for a graph input,
        // the artifact's QuantizeLinear nodes reading it
        let model = self.model;
        let raw = &model.graph;
        let raw_index = GraphIndex::new(raw);
        let producer = |v: &str| -> Vec<String> {
            match index.producer(v) {
                Some(i) => vec![f.nodes[i].name.clone()],
                None => raw_index
                    .consumers(v)
                    .iter()
                    .map(|&i| &raw.nodes[i])
                    .filter(|n| is_qdq_node(n) && n.op_type == "QuantizeLinear")
                    .map(|n| n.name.clone())
                    .collect(),
            }
        };
        let readers =
            |v: &str| -> Vec<&Node> { index.consumers(v).iter().map(|&i| &f.nodes[i]).collect() };
        let mc = self.native.model_config.clone().unwrap_or_default();
        let act = mc.activation.unwrap_or_default();
        let wcfg = mc.weight.unwrap_or_default();
        let per_channel_ok = act
            .per_channel
            .as_ref()
            .is_none_or(|o| o.to_vec().contains(&true));
        let sym_weights = wcfg.asymmetric == Some(false);
        let pot = self.profile.requant == Requant::PotShift;

        for (t, list) in &imp.activations {
            for q in list {
                let fate = match self.p.byo_qdq {
                    ByoQdq::Honours => None,
                    ByoQdq::Recalibrates => Some((
                        Severity::Warning,
                        "native flow calibrates the float model itself and replaces it without an error",
                    )),
                    ByoQdq::Rejects => {
                        Some((Severity::Error, "compiler refuses graphs with QDQ nodes"))
                    }
                };
                if let Some((sev, what)) = fate {
                    self.push(
                        "external-scales",
                        Some(sev),
                        format!(
                            "activation `{t}` carries {}; {}'s {what}",
                            describe(q),
                            self.p.name
                        ),
                        producer(t),
                        vec![t.clone()],
                    );
                }
                if q.scales.len() > 1 && !per_channel_ok {
                    self.push(
                        "per-channel-activation",
                        None,
                        format!(
                            "activation `{t}` has {}; {}'s template quantizes activations per tensor",
                            describe(q),
                            self.p.name
                        ),
                        producer(t),
                        vec![t.clone()],
                    );
                }
                if pot {
                    self.non_pot(t, q, producer(t));
                }
            }
        }

        for (w, q) in &imp.weights {
            let users = readers(w);
            if q.grid == Grid::Int32 {
                continue; // biases: int32, zero point 0, scale derived
            }
            let mid = {
                let (lo, hi) = q.grid.bounds();
                if q.grid.is_signed() {
                    0
                } else {
                    ((lo + hi + 1) / 2) as i32
                }
            };
            if sym_weights && q.zero_points.iter().any(|&z| z != mid) {
                let z: Vec<i32> = q.zero_points.iter().copied().take(4).collect();
                self.push(
                    "asymmetric-weight",
                    None,
                    format!(
                        "weight `{w}` ({}) has zero points {z:?}{}: {} quantizes weights symmetrically, so the native flow re-quantizes it",
                        grid_name(q.grid),
                        if q.zero_points.len() > 4 { "..." } else { "" },
                        self.p.name
                    ),
                    names(&users),
                    vec![w.clone()],
                );
            }
            if let (Some(a), true) = (q.axis, q.scales.len() > 1) {
                let rank = f.initializers.get(w).map_or(0, |t| t.rank());
                for n in &users {
                    let want = match n.op_type.as_str() {
                        "Conv" => Some(0),
                        "ConvTranspose" => Some(1),
                        "Gemm" if n.inputs.get(1) == Some(w) => {
                            Some(if n.attr_int("transB", 0).unwrap_or(0) != 0 {
                                0
                            } else {
                                1
                            })
                        }
                        "MatMul" if n.inputs.get(1) == Some(w) => Some(rank.saturating_sub(1)),
                        _ => None,
                    };
                    if let Some(want) = want.filter(|&x| x != a) {
                        self.push(
                            "weight-axis",
                            None,
                            format!(
                                "weight `{w}` of {} `{}` has per-channel scales on axis {a}; its output channels are axis {want}",
                                n.op_type, n.name
                            ),
                            vec![n.name.clone()],
                            vec![w.clone()],
                        );
                    }
                }
            }
            if pot {
                self.non_pot(w, q, names(&users));
            }
        }

        self.precisions(imp);
        self.requants(imp);
        self.tails(imp);
    }

    fn non_pot(&mut self, t: &str, q: &QParams, nodes: Vec<String>) {
        let off: Vec<f32> = q
            .scales
            .iter()
            .copied()
            .filter(|&s| pot_value(f64::from(s), PowerOfTwo::Nearest) != Some(f64::from(s)))
            .collect();
        if let Some(first) = off.first() {
            self.push(
                "non-pot-scale",
                None,
                format!(
                    "`{t}`: {} of {} scales are not powers of two (e.g. {first}); {} requantizes by shifts (profile {}), so they are rounded to 2^k",
                    off.len(),
                    q.scales.len(),
                    self.p.name,
                    self.profile.name
                ),
                nodes,
                vec![t.to_string()],
            );
        }
    }

    /// The precision the platform's template gives op type `op`.
    fn template_precision(&self, op: &str) -> Option<Precision> {
        self.native
            .op_config
            .get(op)
            .and_then(|e| e.qtype)
            .or_else(|| self.native.model_config.as_ref()?.all_node_type)
    }

    /// unsupported-precision, template-precision, float32-node. A float32
    /// activation fused into the quantized node before it is not a float
    /// island (the exact rule: [`super::fused`]).
    fn precisions(&mut self, imp: &Imported) {
        let f = &imp.model.graph;
        let index = GraphIndex::new(f);
        // a float model is quantized whole by the native flow: no islands
        let qdq = self.census.quantize_nodes + self.census.dequantize_nodes > 0;
        for n in &f.nodes {
            if opclass::is_data_movement(&n.op_type) || n.op_type == "Constant" {
                continue;
            }
            let reads_data = n
                .inputs
                .iter()
                .any(|x| !x.is_empty() && !f.initializers.contains_key(x));
            let Some(&prec) = imp.node_precisions.get(&n.name) else {
                continue;
            };
            if !reads_data {
                continue;
            }
            if !self.p.precisions.contains(&prec) {
                self.push(
                    "unsupported-precision",
                    None,
                    format!(
                        "{} `{}` computes in {}; {} runs {}",
                        n.op_type,
                        n.name,
                        precision_name(prec),
                        self.p.name,
                        self.precision_list()
                    ),
                    vec![n.name.clone()],
                    vec![],
                );
            } else if prec != Precision::Float32 && self.p.byo_qdq.native_flow() && qdq {
                let t = self.template_precision(&n.op_type);
                if let Some(t) = t.filter(|&t| t != prec) {
                    self.push(
                        "template-precision",
                        None,
                        format!(
                            "{} `{}` is {} in the artifact; {}'s template starts it in {}",
                            n.op_type,
                            n.name,
                            precision_name(prec),
                            self.p.name,
                            precision_name(t)
                        ),
                        vec![n.name.clone()],
                        vec![],
                    );
                }
            } else if prec == Precision::Float32
                && self.p.byo_qdq.native_flow()
                && qdq
                && !fused_activation(imp, &index, n)
            {
                let t = self.template_precision(&n.op_type);
                if t.is_some_and(|t| t != Precision::Float32) {
                    self.push(
                        "float32-node",
                        None,
                        format!(
                            "{} `{}` is left in float32; {}'s template runs it in {} on the accelerator, and kept float32 it is a CPU node",
                            n.op_type,
                            n.name,
                            self.p.name,
                            precision_name(t.unwrap_or(Precision::Float32))
                        ),
                        vec![n.name.clone()],
                        vec![],
                    );
                }
            }
        }
    }

    /// The quantization of a value of the float graph: its activation
    /// parameters, else a weight's.
    fn qparams<'i>(imp: &'i Imported, v: &str) -> Option<&'i QParams> {
        imp.activations
            .get(v)
            .and_then(|l| l.first())
            .or_else(|| imp.weights.get(v))
    }

    /// concat-requant, add-requant.
    fn requants(&mut self, imp: &Imported) {
        let f = &imp.model.graph;
        let same =
            |a: &QParams, b: &QParams| a.scales == b.scales && a.zero_points == b.zero_points;
        let mut found = vec![];
        for n in &f.nodes {
            let (id, with_output) = match n.op_type.as_str() {
                "Concat" => ("concat-requant", true),
                "Add" | "Sum" => ("add-requant", false),
                _ => continue,
            };
            let ins: Vec<(&str, &QParams)> = n
                .inputs
                .iter()
                .filter_map(|x| Some((x.as_str(), Self::qparams(imp, x)?)))
                .collect();
            let out = n.outputs.first().and_then(|o| Self::qparams(imp, o));
            let mut all = ins.clone();
            if let (true, Some(o)) = (with_output, out) {
                all.push((n.outputs[0].as_str(), o));
            }
            if all.len() < 2 || all.iter().all(|(_, q)| same(q, all[0].1)) {
                continue;
            }
            let list: Vec<String> = all
                .iter()
                .map(|(v, q)| format!("`{v}` {}", describe(q)))
                .collect();
            found.push((
                id,
                format!(
                    "{} `{}` joins values on different grids: {}",
                    n.op_type,
                    n.name,
                    list.join(", ")
                ),
                vec![n.name.clone()],
                all.iter().map(|(v, _)| v.to_string()).collect(),
            ));
        }
        for (id, m, nodes, t) in found {
            self.push(id, None, m, nodes, t);
        }
    }

    /// tail-output-form: graph outputs produced by a GEMM-class node
    /// (through data-movement nodes).
    fn tails(&mut self, imp: &Imported) {
        if !self.p.byo_qdq.native_flow() {
            return;
        }
        let f = &imp.model.graph;
        let index = GraphIndex::new(f);
        let form = match self.p.tail_output {
            HighAccuracyOutput::Int32Dequantize => "int32, dequantized to float32 in software",
            HighAccuracyOutput::Float32 => "float32 directly",
        };
        let mut found = vec![];
        for o in &f.outputs {
            let mut v = o.name.as_str();
            let mut path = vec![v];
            let mut tail = None;
            for _ in 0..f.nodes.len() {
                let Some(i) = index.producer(v) else { break };
                let n = &f.nodes[i];
                if opclass::is_gemm_class(&n.op_type) {
                    tail = Some(n);
                    break;
                }
                if !opclass::is_data_movement(&n.op_type) {
                    break;
                }
                let Some(x) = n.input(0) else { break };
                v = x;
                path.push(v);
            }
            let Some(n) = tail else { continue };
            let quantized = path.iter().find_map(|t| Some((*t, Self::qparams(imp, t)?)));
            let (sev, m) = match quantized {
                Some((t, q)) => (
                    Severity::Warning,
                    format!(
                        "output `{}` comes from {} `{}` and the artifact quantizes `{t}` to {}; {} keeps the tail at high accuracy ({form}), so the deployed output is not the artifact's",
                        o.name,
                        n.op_type,
                        n.name,
                        describe(q),
                        self.p.name
                    ),
                ),
                None => (
                    Severity::Info,
                    format!(
                        "output `{}` comes from {} `{}`: on {} the high-accuracy tail output is {form}; post-processing must expect that",
                        o.name, n.op_type, n.name, self.p.name
                    ),
                ),
            };
            found.push((sev, m, vec![n.name.clone()], vec![o.name.clone()]));
        }
        for (sev, m, nodes, t) in found {
            self.push("tail-output-form", Some(sev), m, nodes, t);
        }
    }
}
