//! Parsing, writing and platform-independent checks of `quant_config` JSON.

use qport_quant::config::{ConfigError, Device, Metric, OneOrMany, QuantConfig};
use qport_quant::{CalibMethod, PowerOfTwo, Precision};

/// The example of `shared/reference/vendor-toolchain.md` §quant_config, verbatim.
const VENDOR_EXAMPLE: &str = r#"{"model_config":{"all_node_type":"int8","model_output_type":"float32","activation":{"calibration_type":["max","kl"],"max_percentile":[0.99995,1.0],"per_channel":[true,false],"asymmetric":[true,false]},"weight":{"bias_correction":{"num_sample":1,"metric":"cosine-similarity"}}},"op_config":{"Softmax":{"qtype":"int16"}},"node_config":{"/blk/MatMul":{"InputType0":"int16","InputType1":"int8"},"/x/Cos":{"qtype":"float32","ON":"CPU"}}}"#;

fn parse(s: &str) -> Result<QuantConfig, ConfigError> {
    QuantConfig::from_json_str(s, "quant_config.json")
}

#[test]
fn vendor_example_parses() {
    let c = parse(VENDOR_EXAMPLE).unwrap();
    let mc = c.model_config.as_ref().unwrap();
    assert_eq!(mc.all_node_type, Some(Precision::Int8));
    assert_eq!(mc.model_output_type, Some(Precision::Float32));
    let a = mc.activation.as_ref().unwrap();
    assert_eq!(
        a.calibration_type,
        Some(OneOrMany::Many(vec![CalibMethod::Max, CalibMethod::Kl]))
    );
    assert_eq!(a.max_percentile, Some(OneOrMany::Many(vec![0.99995, 1.0])));
    assert_eq!(a.per_channel, Some(OneOrMany::Many(vec![true, false])));
    assert_eq!(a.asymmetric, Some(OneOrMany::Many(vec![true, false])));
    let bc = mc
        .weight
        .as_ref()
        .unwrap()
        .bias_correction
        .as_ref()
        .unwrap();
    assert_eq!(bc.num_sample, Some(1));
    assert_eq!(bc.metric, Some(Metric::CosineSimilarity));
    assert_eq!(c.op_config["Softmax"].qtype, Some(Precision::Int16));
    let mm = &c.node_config["/blk/MatMul"];
    assert_eq!(
        (mm.input_type0, mm.input_type1),
        (Some(Precision::Int16), Some(Precision::Int8))
    );
    assert_eq!(c.node_config["/x/Cos"].qtype, Some(Precision::Float32));
    assert_eq!(c.node_config["/x/Cos"].on, Some(Device::Cpu));
}

#[test]
fn round_trip() {
    let mut c = parse(VENDOR_EXAMPLE).unwrap();
    assert_eq!(parse(&c.to_json_pretty()).unwrap(), c);
    // Extensions round-trip too.
    let ext = r#"{
      "model_config": {
        "activation": {"calibration_type": "ema", "ema_momentum": 0.95, "power_of_two": "ceil", "num_bin": 2048},
        "weight": {"per_channel": false, "power_of_two": "nearest"},
        "modelwise_search": {"similarity": 0.995, "metric": "cosine-similarity"},
        "layerwise_search": {}
      },
      "tensor_config": {"x": {"scale": [0.5, 0.25], "zero_point": 3, "qtype": "int8"},
                        "y": {"calibration_type": "percentile"}},
      "subgraph_config": {},
      "qport": {"platform": "j6e", "template": "default", "tail_output": "int32-dequantize"}
    }"#;
    let e = parse(ext).unwrap();
    let a = e
        .model_config
        .as_ref()
        .unwrap()
        .activation
        .as_ref()
        .unwrap();
    assert_eq!(a.ema_momentum, Some(0.95));
    assert_eq!(a.power_of_two, Some(PowerOfTwo::Ceil));
    assert_eq!(
        e.tensor_config["x"].scale,
        Some(OneOrMany::Many(vec![0.5, 0.25]))
    );
    assert_eq!(parse(&e.to_json_pretty()).unwrap(), e);
    assert!(e
        .to_json_pretty()
        .contains("\"tail_output\": \"int32-dequantize\""));
    // Written JSON uses the vendor key names.
    c.node_config.get_mut("/blk/MatMul").unwrap().output_type = Some(Precision::Int16);
    let j = c.to_json_pretty();
    assert!(
        j.contains("\"InputType0\"")
            && j.contains("\"OutputType\"")
            && j.contains("\"ON\": \"CPU\"")
    );
    assert_eq!(parse(&j).unwrap(), c);
    assert_eq!(parse("{}").unwrap().to_json_pretty(), "{}\n");
}

#[test]
fn input_aliases() {
    let c =
        parse(r#"{"node_config":{"n":{"input0":"int16","input1":"int8","ON":"BPU"}}}"#).unwrap();
    let n = &c.node_config["n"];
    assert_eq!(
        (n.input_type0, n.input_type1),
        (Some(Precision::Int16), Some(Precision::Int8))
    );
    assert_eq!(n.on, Some(Device::Bpu));
}

#[test]
fn unknown_key_names_the_path() {
    let e = parse(r#"{"model_config":{"activation":{"calibraton_type":"max"}}}"#)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("quant_config.json: model_config.activation.calibraton_type: unknown field `calibraton_type`"),
        "{e}"
    );
    assert!(e.contains("calibration_type"), "lists the valid keys: {e}");
    let e = parse(r#"{"node_config":{"/a/b":{"qtyp":"int8"}}}"#)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("quant_config.json: node_config./a/b.qtyp: unknown field"),
        "{e}"
    );
    let e = parse(r#"{"model_conf":{}}"#).unwrap_err().to_string();
    assert!(
        e.starts_with("quant_config.json: model_conf: unknown field"),
        "{e}"
    );
}

#[test]
fn bad_values_name_the_path_and_list_valid() {
    let e = parse(r#"{"model_config":{"activation":{"calibration_type":["max","entropy"]}}}"#)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("quant_config.json: model_config.activation.calibration_type[1]: unknown variant `entropy`"),
        "{e}"
    );
    for m in ["max", "ema", "percentile", "kl", "mse", "load"] {
        assert!(e.contains(m), "{e}");
    }
    let e = parse(r#"{"model_config":{"activation":{"calibration_type":"KL"}}}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("calibration_type: unknown variant `KL`"), "{e}");
    let e = parse(r#"{"op_config":{"Conv":{"qtype":"fp16"}}}"#)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("op_config.Conv.qtype: unknown variant `fp16`") && e.contains("float16"),
        "{e}"
    );
    let e = parse(r#"{"model_config":{"activation":{"per_channel":"yes"}}}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("model_config.activation.per_channel:"), "{e}");
    let e = parse("{\"model_config\": [").unwrap_err().to_string();
    assert!(e.starts_with("quant_config.json: "), "{e}");
}

#[test]
fn range_checks_collect_every_error() {
    let e = parse(
        r#"{"model_config":{"model_output_type":"float16","activation":{"num_bin":64,"max_percentile":[0.4,1.0,1.5],"ema_momentum":1.0}},
            "subgraph_config":{"sg":{}},
            "tensor_config":{"t":{"scale":[1.0,-2.0],"zero_point":[0]}}}"#,
    )
    .unwrap_err();
    let msgs = e.messages();
    let want = [
        "quant_config.json: subgraph_config: subgraph_config is not supported yet",
        "quant_config.json: model_config.model_output_type: float16 is not a valid model output type; allowed: int8, int16, float32",
        "quant_config.json: model_config.activation.num_bin: 64 is below the minimum 129",
        "quant_config.json: model_config.activation.max_percentile: 0.4 is outside the range 0.5..=1.0",
        "quant_config.json: model_config.activation.max_percentile: 1.5 is outside the range 0.5..=1.0",
        "quant_config.json: model_config.activation.ema_momentum: 1 is outside the open range (0, 1)",
        "quant_config.json: tensor_config.t.scale: -2 is not a positive finite number",
        "quant_config.json: tensor_config.t.zero_point: 1 zero points for 2 scales",
    ];
    assert_eq!(msgs, want);
    assert_eq!(e.to_string(), want.join("\n"));
    assert!(
        parse(r#"{"model_config":{"activation":{"num_bin":129,"max_percentile":0.5}}}"#).is_ok()
    );
    assert!(parse(r#"{"subgraph_config":{}}"#).is_ok());
}

#[test]
fn from_file_names_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let p = dir.join("quant_config.json");
    std::fs::write(&p, r#"{"op_config":{"Conv":{"qtype":"int16","bogus":1}}}"#).unwrap();
    let e = QuantConfig::from_file(&p).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "{}: op_config.Conv.bogus: unknown field",
            p.display()
        )),
        "{e}"
    );
    let e = QuantConfig::from_file(&dir.join("missing.json"))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("cannot read ") && e.contains("missing.json"),
        "{e}"
    );
}
