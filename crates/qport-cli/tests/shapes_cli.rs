//! `--input-shape` on the dynamic-H/W detector fixture (input `images`
//! `[1,3,height,width]`): the commands that need static shapes (`layout`,
//! `migrate`, `deploy-check --model`, `quantize --fast-perf`, `bench`)
//! refuse it without the flag, naming the dynamic dimension and the flag,
//! and work with it; bad shapes, `bench --int8` of an unrelated model and
//! `bench --data` are checked too.

mod common;

use common::{fixture_arg, help_has, json_stdout, qport, s};
use qport_core::Tensor;
use qport_tests::cli::{assert_input_error, temp_dir};

fn detector() -> String {
    fixture_arg("models/families/yolo-detector.onnx")
}

const SHAPE: &str = "images=1,3,160,160";

/// The five commands on `m` with `extra` arguments; `out` is quantize's
/// output directory.
fn static_commands<'a>(m: &'a str, out: &'a str) -> Vec<Vec<&'a str>> {
    vec![
        vec!["layout", m, "-p", "j6m"],
        vec!["migrate", "--from", "j6m", "--to", "j6p", "--model", m],
        vec!["deploy-check", "-p", "j6m", "--model", m],
        vec!["quantize", m, "-p", "j6m", "--fast-perf", "--out", out],
        vec!["bench", m, "--runs", "1", "--warmup", "0"],
    ]
}

#[test]
fn without_the_flag_the_dynamic_dim_and_the_flag_are_named() {
    let dir = temp_dir("shapes-none");
    let (m, out) = (detector(), s(&dir.join("q")));
    for cmd in static_commands(&m, &out) {
        let o = qport(&cmd);
        assert_input_error(
            &o,
            &[
                "input `images` has dynamic dimension 2 (`height`)",
                "--input-shape images=1,3,<height>,<width>",
            ],
        );
    }
}

#[test]
fn with_the_flag_every_command_works() {
    let dir = temp_dir("shapes-fixed");
    let (m, out) = (detector(), s(&dir.join("q")));
    for mut cmd in static_commands(&m, &out) {
        cmd.extend(["--input-shape", SHAPE, "--format", "json"]);
        let j = json_stdout(&qport(&cmd));
        if cmd[0] == "layout" {
            // levels of stride 16 and 8 on 160x160: 10·10 + 20·20 = 500 anchors
            let shapes: Vec<&serde_json::Value> = j["outputs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| &t["valid_shape"])
                .collect();
            assert_eq!(
                shapes,
                [
                    &serde_json::json!([1, 4, 500]),
                    &serde_json::json!([1, 8, 500])
                ]
            );
            assert!(j["assumptions"][0]
                .as_str()
                .unwrap()
                .contains("shape fixed by --input-shape images=1,3,160,160"));
        }
    }
    // the artifact keeps the fixed shape; bench times it against the model
    let artifact = s(&dir.join("q/model.qdq.onnx"));
    let o = qport(&["info", &artifact]);
    assert!(o.stdout.contains("[1,3,160,160]"), "{}", o.stdout);
    let j = json_stdout(&qport(&[
        "bench",
        &m,
        "--int8",
        &artifact,
        "--profiles",
        "exact",
        "--input-shape",
        SHAPE,
        "--runs",
        "1",
        "--warmup",
        "0",
        "--format",
        "json",
    ]));
    assert_eq!(
        j["settings"]["int8_inputs"][0]["shape"],
        serde_json::json!([1, 3, 160, 160])
    );
    assert_eq!(j["results"].as_array().unwrap().len(), 2);
}

#[test]
fn bad_shapes_are_input_errors() {
    let m = detector();
    let layout = |shape: &str| qport(&["layout", &m, "-p", "j6m", "--input-shape", shape]);
    assert_input_error(
        &layout("image=1,3,160,160"),
        &["no input `image`", "images [1,3,height,width]"],
    );
    assert_input_error(
        &layout("images=1,3,160"),
        &["`images` has rank 4", "[1,3,160] has rank 3"],
    );
    assert_input_error(
        &layout("images=2,3,160,160"),
        &["dimension 0 is fixed at 1", "has 2"],
    );
    // 161 gives 21 next to 22 where the upsampled level meets its skip
    assert_input_error(
        &layout("images=1,3,161,161"),
        &["graph cannot run", "(Concat)", "22 vs 21"],
    );
    let o = layout("images=1,3,h,160");
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("dimension `h` is not a whole number"),
        "{}",
        o.stderr
    );
    // deploy-check without a model has nothing to fix
    let o = qport(&["deploy-check", "-p", "j6m", "--input-shape", SHAPE]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("--model"), "{}", o.stderr);
}

#[test]
fn bench_refuses_an_int8_artifact_of_another_model() {
    let m = detector();
    let other = fixture_arg("models/families/nhwc-classifier.qdq-u8s8.onnx");
    assert_input_error(
        &qport(&["bench", &m, "--int8", &other, "--input-shape", SHAPE]),
        &[
            "is not a quantization of",
            "inputs differ",
            "image [1,128,128,3]",
        ],
    );
}

#[test]
fn bench_times_the_samples_of_a_data_file() {
    let dir = temp_dir("shapes-data");
    let npy = dir.join("x.npy");
    let v: Vec<f32> = (0..2 * 3 * 64 * 64)
        .map(|i| (i % 17) as f32 / 17.0)
        .collect();
    qport_data::npy::write(&npy, &Tensor::from_vec(vec![2, 3, 64, 64], v).unwrap()).unwrap();
    let m = detector();
    let j = json_stdout(&qport(&[
        "bench",
        &m,
        "--data",
        &s(&npy),
        "--runs",
        "3",
        "--warmup",
        "0",
        "--format",
        "json",
    ]));
    let st = &j["settings"];
    assert_eq!(st["data"]["samples"], 2);
    assert_eq!(st["data"]["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(st["inputs"][0]["shape"], serde_json::json!([1, 3, 64, 64]));
    assert_eq!(j["results"][0]["samples"], 3);
    // a folder is not a tensor file
    let o = qport(&["bench", &m, "--data", &s(&dir)]);
    assert_input_error(&o, &["bench takes a .npy or .npz"]);
}

#[test]
fn help_teaches_the_flag() {
    for cmd in [
        "layout",
        "migrate",
        "deploy-check",
        "quantize",
        "bench",
        "agree",
        "diverge",
        "run",
    ] {
        help_has(
            &[cmd],
            &["--input-shape <NAME=D0,D1,...>", "images=1,3,640,640"],
        );
    }
    help_has(
        &["bench"],
        &["--data <FILE.npy|FILE.npz>", "quantization of MODEL"],
    );
}

#[test]
fn run_feeds_against_the_fixed_shape() {
    let dir = temp_dir("shapes-run");
    let npy = dir.join("x.npy");
    let v = vec![0.5f32; 3 * 64 * 64];
    qport_data::npy::write(&npy, &Tensor::from_vec(vec![1, 3, 64, 64], v).unwrap()).unwrap();
    let (m, x) = (detector(), format!("images={}", s(&npy)));
    let j = json_stdout(&qport(&[
        "run",
        &m,
        "--input",
        &x,
        "--input-shape",
        "images=1,3,64,64",
        "--format",
        "json",
    ]));
    assert_eq!(j["outputs"][0]["shape"], serde_json::json!([1, 4, 80]));
    // the model now takes 96x96 only
    let o = qport(&[
        "run",
        &m,
        "--input",
        &x,
        "--input-shape",
        "images=1,3,96,96",
    ]);
    assert_input_error(&o, &["images", "[1,3,96,96]", "[1, 3, 64, 64]"]);
}

#[test]
fn an_output_inference_cannot_reach_names_the_node() {
    use qport_onnx::graph::ModelBuilder;
    let dir = temp_dir("shapes-stop");
    let path = dir.join("nz.onnx");
    let mut m = ModelBuilder::new(13)
        .input("x", qport_core::DType::F32, &[1, 4])
        .op("NonZero", ["x"], ["nz"])
        .op("Cast", ["nz"], ["y"])
        .output("y", qport_core::DType::F32, &[2, 1])
        .build();
    m.graph.nodes[1] = m.graph.nodes[1]
        .clone()
        .with_attr("to", qport_onnx::Attribute::Int(1));
    m.graph.outputs[0].shape = Some(vec![
        qport_onnx::Dim::Known(2),
        qport_onnx::Dim::Param("n".into()),
    ]);
    qport_onnx::save(&m, &path).unwrap();
    let o = qport(&["layout", &s(&path), "-p", "j6m"]);
    assert_input_error(
        &o,
        &[
            "output `y` has dynamic dimension 1 (`n`)",
            "node `NonZero_nz` (NonZero) stops shape inference: its output shape depends on the input values",
        ],
    );
}
