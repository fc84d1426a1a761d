//! Validation against platforms and models, templates and per-node resolution.

use qport_onnx::{Model, ModelBuilder, Node};
use qport_platform::{HighAccuracyOutput, Registry};
use qport_quant::config::{ConfigError, QuantConfig};
use qport_quant::resolve::{merge, resolve, validate_for_platform, ModelIndex};
use qport_quant::template::{template, Template};
use qport_quant::{CalibMethod, Precision};
use std::collections::BTreeMap;

/// x -> Conv -> Relu -> MatMul -> Softmax -> Resize -> (unnamed) Add -> y
fn model() -> Model {
    ModelBuilder::new(17)
        .node(Node::new("/blk/Conv", "Conv", ["x", "w"], ["c"]))
        .node(Node::new("/blk/Relu", "Relu", ["c"], ["r"]))
        .node(Node::new("/blk/MatMul", "MatMul", ["r", "m"], ["mm"]))
        .node(Node::new("/head/Softmax", "Softmax", ["mm"], ["s"]))
        .node(Node::new("/head/Resize", "Resize", ["s", "", "sc"], ["rs"]))
        .node(Node::new("", "Add", ["rs", "b"], ["y"]))
        .build()
}

fn parse(s: &str) -> QuantConfig {
    QuantConfig::from_json_str(s, "quant_config.json").unwrap()
}

fn qtypes(r: &qport_quant::resolve::Resolved) -> Vec<(&str, Precision)> {
    r.nodes.iter().map(|n| (n.name.as_str(), n.qtype)).collect()
}

#[test]
fn float16_on_j6e_exact_message() {
    let reg = Registry::builtin();
    let c = parse(r#"{"node_config":{"/blk/MatMul":{"qtype":"float16"}}}"#);
    let e = c
        .validate(reg.get("j6e").unwrap(), None)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "node_config./blk/MatMul.qtype: float16 is not available on j6e (nash-e); allowed: int8, int16, float32"
    );
    assert!(c
        .validate(reg.get("j6p").unwrap(), None)
        .unwrap()
        .is_empty());
    assert_eq!(
        validate_for_platform(&c, reg.get("j6m").unwrap()),
        vec!["node_config./blk/MatMul.qtype: float16 is not available on j6m (nash-m); allowed: int8, int16, float32"]
    );
    assert!(validate_for_platform(&c, reg.get("j6h").unwrap()).is_empty());
}

#[test]
fn unknown_node_is_an_error_with_suggestions_and_unknown_op_a_warning() {
    let reg = Registry::builtin();
    let idx = ModelIndex::from_model(&model());
    let c = parse(
        r#"{"op_config":{"Gelu":{"qtype":"int16"}},
            "node_config":{"/x/Foo":{"qtype":"int16"},"/blk/MatMull":{"qtype":"int16"}},
            "tensor_config":{"nope":{"qtype":"int16"}, "mm":{"qtype":"int16"}}}"#,
    );
    let msgs = c
        .validate(reg.get("j6e").unwrap(), Some(&idx))
        .unwrap_err()
        .messages();
    assert_eq!(
        msgs,
        vec![
            "node_config./blk/MatMull: no node named '/blk/MatMull' in the model; did you mean '/blk/MatMul'?",
            "node_config./x/Foo: no node named '/x/Foo' in the model",
            "tensor_config.nope: no tensor named 'nope' in the model",
        ]
    );
    let ok = parse(
        r#"{"op_config":{"Gelu":{"qtype":"int16"}},"node_config":{"Add_5":{"qtype":"int16"}}}"#,
    );
    let w = ok.validate(reg.get("j6e").unwrap(), Some(&idx)).unwrap();
    assert_eq!(w.len(), 1);
    assert_eq!(
        w[0].to_string(),
        "op_config.Gelu: the model has no Gelu node"
    );
}

#[test]
fn collects_multiple_errors() {
    let reg = Registry::builtin();
    let c = parse(
        r#"{"model_config":{"all_node_type":"float16","model_output_type":"int16","activation":{"num_bin":130}},
            "op_config":{"Softmax":{"qtype":"int16","OutputType":"float16"}},
            "node_config":{"/blk/MatMul":{"InputType0":"float16","InputType1":"int16"}}}"#,
    );
    let mut c2 = c.clone();
    c2.model_config
        .as_mut()
        .unwrap()
        .activation
        .as_mut()
        .unwrap()
        .num_bin = Some(100);
    let msgs = c2
        .validate(reg.get("x86-avx2").unwrap(), None)
        .unwrap_err()
        .messages();
    assert_eq!(
        msgs,
        vec![
            "model_config.activation.num_bin: 100 is below the minimum 129",
            "model_config.all_node_type: float16 is not available on x86-avx2; allowed: int8, float32",
            "model_config.model_output_type: int16 is not available on x86-avx2; allowed: int8, float32",
            "op_config.Softmax.qtype: int16 is not available on x86-avx2; allowed: int8, float32",
            "op_config.Softmax.OutputType: float16 is not available on x86-avx2; allowed: int8, float32",
            "node_config./blk/MatMul.InputType0: float16 is not available on x86-avx2; allowed: int8, float32",
            "node_config./blk/MatMul.InputType1: int16 is not available on x86-avx2; allowed: int8, float32",
        ]
    );
    let e = resolve(
        &model(),
        reg.get("x86-avx2").unwrap(),
        &QuantConfig::default(),
        Some(&c2),
    )
    .unwrap_err();
    assert!(
        matches!(e, ConfigError::Invalid { ref errors } if errors.len() == 7),
        "{e}"
    );
}

#[test]
fn templates_resolve_on_every_builtin_platform() {
    let reg = Registry::builtin();
    let m = model();
    for p in &reg.platforms {
        for variant in Template::ALL {
            let t = template(p, variant);
            assert_eq!(
                QuantConfig::from_json_str(&t.to_json_pretty(), "t").unwrap(),
                t
            );
            let r = match resolve(&m, p, &t, None) {
                Ok(r) => r,
                Err(e) => {
                    // Only full int16 on platforms without int16 may fail, and it says why.
                    assert!(
                        variant == Template::FullInt16 && !p.precisions.contains(&Precision::Int16),
                        "{} {variant}: {e}",
                        p.name
                    );
                    assert!(
                        e.to_string()
                            .starts_with("model_config.all_node_type: int16 is not available on"),
                        "{e}"
                    );
                    continue;
                }
            };
            assert_eq!(r.platform, p.name);
            assert_eq!(r.model_output_type, Precision::Float32);
            assert_eq!(r.tail_output, p.tail_output);
            assert_eq!(
                r.config.qport.as_ref().unwrap().template.as_deref(),
                Some(variant.name())
            );
            assert!(r.weight.per_channel && !r.weight.asymmetric, "{}", p.name);
            assert!(!r.activation.per_channel);
            // hosts: u8 activations; others try both symmetries (vendor default)
            let want_asym = if p.family == "host-cpu" {
                vec![true]
            } else {
                vec![true, false]
            };
            assert_eq!(r.activation.candidates.asymmetric, want_asym, "{}", p.name);
            assert!(r.activation.asymmetric, "{}", p.name);
            let want_methods = if variant == Template::FastPerf {
                vec![CalibMethod::Max]
            } else {
                vec![CalibMethod::Max, CalibMethod::Kl]
            };
            assert_eq!(r.activation.methods, want_methods);
            let expect: Vec<Precision> = match (variant, p.default_template.as_str()) {
                (Template::FullInt16, _) => vec![Precision::Int16; 6],
                (Template::Default, "float16-gemm-int8") => {
                    use Precision::{Float16 as F, Int8 as I};
                    vec![I, F, I, F, I, F]
                }
                _ => vec![Precision::Int8; 6],
            };
            let got: Vec<Precision> = r.nodes.iter().map(|n| n.qtype).collect();
            assert_eq!(got, expect, "{} {variant}", p.name);
            assert!(
                r.warnings.iter().all(|w| w.key.starts_with("op_config.")),
                "{:?}",
                r.warnings
            );
        }
    }
    let j6e = template(reg.get("j6e").unwrap(), Template::Default);
    let q = j6e.qport.as_ref().unwrap();
    assert_eq!(q.tail_output, Some(HighAccuracyOutput::Int32Dequantize));
    assert!(j6e.op_config.is_empty());
    let r = resolve(
        &m,
        reg.get("j6p").unwrap(),
        &template(reg.get("j6p").unwrap(), Template::Default),
        None,
    )
    .unwrap();
    assert_eq!(
        r.precision_mix(),
        BTreeMap::from([(Precision::Int8, 3), (Precision::Float16, 3)])
    );
}

#[test]
fn precedence_model_op_node() {
    let reg = Registry::builtin();
    let j6p = reg.get("j6p").unwrap();
    let base = template(j6p, Template::Default);
    let user = parse(
        r#"{"model_config":{"all_node_type":"int16","activation":{"calibration_type":"percentile","max_percentile":[0.9999,1.0]}},
            "op_config":{"Softmax":{"qtype":"float16"},"Conv":{"OutputType":"int16"}},
            "node_config":{"/head/Softmax":{"qtype":"float32","ON":"CPU"},
                           "/blk/MatMul":{"InputType1":"int16"},
                           "Add_5":{"qtype":"int8"}},
            "tensor_config":{"s":{"scale":[0.5,0.25],"zero_point":2},"r":{"calibration_type":"mse"}}}"#,
    );
    let r = resolve(&model(), j6p, &base, Some(&user)).unwrap();
    assert_eq!(
        qtypes(&r),
        vec![
            ("/blk/Conv", Precision::Int8),        // op (template) over model
            ("/blk/Relu", Precision::Int16),       // model (user over template)
            ("/blk/MatMul", Precision::Int8),      // op (template); node sets only InputType1
            ("/head/Softmax", Precision::Float32), // node over op
            ("/head/Resize", Precision::Int8),     // op (template)
            ("Add_5", Precision::Int8),            // node, generated name
        ]
    );
    let conv = r.node("/blk/Conv").unwrap();
    assert_eq!(conv.output_type, Some(Precision::Int16));
    assert_eq!(
        r.node("/blk/MatMul").unwrap().input_types,
        BTreeMap::from([(1, Precision::Int16)])
    );
    assert_eq!(
        r.node("/head/Softmax").unwrap().on,
        Some(qport_quant::config::Device::Cpu)
    );
    assert_eq!(r.activation.methods, vec![CalibMethod::Percentile]);
    assert_eq!(r.activation.max_percentile, 0.9999);
    assert_eq!(r.activation.candidates.max_percentile, vec![0.9999, 1.0]);
    assert_eq!(r.activation.num_bin, 1024);
    let s = &r.tensor_overrides["s"];
    assert_eq!(
        (s.scales.clone().unwrap(), s.zero_points.clone().unwrap()),
        (vec![0.5, 0.25], vec![2, 2])
    );
    assert_eq!(r.tensor_overrides["r"].method, Some(CalibMethod::Mse));
    // Template-only op types the model lacks (Gemm, GridSample, ...) give no warning.
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert_eq!(r.config, {
        let mut c = merge(&base, &user);
        c.qport.as_mut().unwrap().platform = Some("j6p".into());
        c
    });
    assert_eq!(r.config.op_config["Conv"].qtype, Some(Precision::Int8));
    assert_eq!(
        r.config.op_config["Conv"].output_type,
        Some(Precision::Int16)
    );
    assert_eq!(
        r.precision_mix(),
        BTreeMap::from([
            (Precision::Int8, 4),
            (Precision::Int16, 1),
            (Precision::Float32, 1)
        ])
    );
}

#[test]
fn defaults_without_any_config() {
    let reg = Registry::builtin();
    let r = resolve(
        &model(),
        reg.get("j6e").unwrap(),
        &QuantConfig::default(),
        None,
    )
    .unwrap();
    assert!(r.nodes.iter().all(|n| n.qtype == Precision::Int8
        && n.input_types.is_empty()
        && n.output_type.is_none()));
    assert_eq!(
        r.activation.methods,
        vec![CalibMethod::Max, CalibMethod::Kl]
    );
    assert_eq!(
        (r.activation.num_bin, r.activation.max_num_bin),
        (1024, 16384)
    );
    assert_eq!(r.activation.ema_momentum, 0.9);
    assert!(r.weight.per_channel);
    assert_eq!(r.tail_output, HighAccuracyOutput::Int32Dequantize);
    assert_eq!(
        r.config.qport.as_ref().unwrap().platform.as_deref(),
        Some("j6e")
    );
}

#[test]
fn warnings_for_foreign_platform_and_placement_on_hosts() {
    let reg = Registry::builtin();
    let c = parse(r#"{"node_config":{"/blk/Conv":{"ON":"BPU"}},"qport":{"platform":"j6p"}}"#);
    let w: Vec<String> = c
        .validate(reg.get("x86-vnni").unwrap(), None)
        .unwrap()
        .iter()
        .map(|w| w.to_string())
        .collect();
    assert_eq!(
        w,
        vec![
            "node_config./blk/Conv.ON: x86-vnni has no accelerator; the placement is recorded but means nothing there",
            "qport.platform: the config was made for j6p, checked for x86-vnni",
        ]
    );
}

#[test]
fn template_names() {
    for t in Template::ALL {
        assert_eq!(Template::from_name(t.name()).unwrap(), t);
    }
    assert_eq!(
        Template::from_name("Full_Int16").unwrap(),
        Template::FullInt16
    );
    let e = Template::from_name("int4").unwrap_err().to_string();
    assert_eq!(
        e,
        "unknown template 'int4'; valid: default, full-int16, fast-perf, int8"
    );
}

/// A `tensor_config` entry's fixed scale applies to its own grid (its
/// `grid`, else a grid of its `qtype`'s width, else any); `other_grids`
/// give the scales of the same tensor on further grids; anything else is
/// calibrated.
#[test]
fn tensor_overrides_apply_to_their_grids() {
    use qport_quant::Grid;
    let reg = Registry::builtin();
    let user = parse(
        r#"{"tensor_config":{
              "c":{"scale":0.5,"zero_point":3,"grid":"uint8",
                   "other_grids":[{"grid":"uint16","scale":[0.002],"zero_point":[30000]}]},
              "r":{"scale":0.25,"qtype":"int16"},
              "s":{"scale":0.125}}}"#,
    );
    let r = resolve(
        &model(),
        reg.get("j6m").unwrap(),
        &QuantConfig::default(),
        Some(&user),
    )
    .unwrap();
    let o = &r.tensor_overrides;
    assert_eq!(o["c"].fixed(Grid::Uint8), Some((vec![0.5], vec![3])));
    assert_eq!(o["c"].fixed(Grid::Uint16), Some((vec![0.002], vec![30000])));
    assert_eq!(o["c"].fixed(Grid::Int8), None);
    assert_eq!(o["r"].fixed(Grid::Int16), Some((vec![0.25], vec![0])));
    assert_eq!(o["r"].fixed(Grid::Uint16), Some((vec![0.25], vec![0])));
    assert_eq!(o["r"].fixed(Grid::Uint8), None);
    assert_eq!(o["s"].fixed(Grid::Int16), Some((vec![0.125], vec![0])));
    // bad other_grids entries are named when the file is read
    let e = QuantConfig::from_json_str(
        r#"{"tensor_config":{"c":{"scale":0.5,"grid":"uint8",
              "other_grids":[{"grid":"uint8","scale":[0.1]},{"grid":"int16","scale":[-1.0],"zero_point":[1,2]}]}}}"#,
        "qc.json",
    )
    .unwrap_err();
    assert_eq!(
        e.messages(),
        vec![
            "qc.json: tensor_config.c.other_grids[0]: grid uint8 is given twice",
            "qc.json: tensor_config.c.other_grids[1].scale: every scale must be a positive finite number",
            "qc.json: tensor_config.c.other_grids[1].zero_point: 2 zero points for 1 scales",
        ]
    );
}
