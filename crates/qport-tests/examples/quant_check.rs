//! Runs onnxruntime-quantized models through the engine and compares with
//! onnxruntime's recorded outputs:
//! `cargo run --release -p qport-tests --example quant_check -- [MODEL...]`.
//!
//! `MODEL` names a folder under `$QPORT_FIXTURES/parity/` (default
//! `~/.cache/qport/fixtures`), whose model is `models/MODEL.onnx`; with none
//! given, the three quantized EfficientNet-Lite0 variants are checked. For
//! each model it reports the share of output elements within one
//! quantization step of onnxruntime's (the step is the scale of the
//! `DequantizeLinear` that produces the output), the largest difference in
//! steps, and the top-1 agreement over the parity inputs.

use qport_core::Tensor;
use qport_engine::Plan;
use std::path::{Path, PathBuf};

const DEFAULT_MODELS: [&str; 3] = [
    "efficientnet-lite0.qdq-u8s8",
    "efficientnet-lite0.qdq-s8s8",
    "efficientnet-lite0.qop-u8s8",
];

fn main() {
    let root = std::env::var("QPORT_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/qport/fixtures")
        });
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--layers") && args.len() == 3 {
        // --layers DIR MODEL: compare every intermediate of input 00 with
        // DIR/<value name>.npy files dumped from onnxruntime.
        let model = args.pop().unwrap_or_default();
        let dir = PathBuf::from(args.pop().unwrap_or_default());
        if let Err(e) = layers(&root, &model, &dir) {
            println!("{model}: ERROR {e}");
            std::process::exit(1);
        }
        return;
    }
    let models: Vec<String> = if args.is_empty() {
        DEFAULT_MODELS.iter().map(|s| s.to_string()).collect()
    } else {
        args
    };
    let mut failed = false;
    for m in &models {
        if let Err(e) = check(&root, m) {
            println!("{m}: ERROR {e}");
            failed = true;
        }
    }
    if failed {
        std::process::exit(1);
    }
}

fn check(root: &Path, name: &str) -> Result<(), String> {
    let model_path = root.join("models").join(format!("{name}.onnx"));
    let model = qport_onnx::load::load(&model_path)
        .map_err(|e| format!("load {}: {e}", model_path.display()))?;
    let plan = Plan::new(&model).map_err(|e| format!("plan: {e}"))?;
    let input_name = plan
        .inputs()
        .next()
        .ok_or("model has no inputs")?
        .name
        .clone();
    let out_name = plan
        .output_names()
        .next()
        .ok_or("model has no outputs")?
        .to_string();
    let step = qport_tests::output_step(&model, &out_name);
    let dir = root.join("parity").join(name);
    let (mut within, mut total, mut top1, mut cases) = (0usize, 0usize, 0usize, 0usize);
    let mut max_diff = 0f32;
    let start = std::time::Instant::now();
    for i in 0.. {
        let inp = dir.join(format!("{i:02}.input.npy"));
        if !inp.exists() {
            break;
        }
        let x = read_npy(&inp)?;
        let want = read_npy(&dir.join(format!("{i:02}.output_0.npy")))?;
        let got = plan
            .run(vec![(input_name.clone(), x)])
            .map_err(|e| format!("run {i:02}: {e}"))?;
        let have = got[0].1.to_f32_vec().map_err(|e| e.to_string())?;
        let want = want.to_f32_vec().map_err(|e| e.to_string())?;
        if have.len() != want.len() {
            return Err(format!(
                "{i:02}: {} outputs, expected {}",
                have.len(),
                want.len()
            ));
        }
        for (a, b) in have.iter().zip(&want) {
            let d = (a - b).abs();
            max_diff = max_diff.max(d);
            if d <= step.unwrap_or(0.0) * 1.0001 {
                within += 1;
            }
        }
        total += have.len();
        top1 += (argmax(&have) == argmax(&want)) as usize;
        cases += 1;
    }
    if cases == 0 {
        return Err(format!("no parity inputs in {}", dir.display()));
    }
    let per = start.elapsed().as_secs_f64() / cases as f64;
    match step {
        Some(s) => println!(
            "{name}: {:.2}% of {total} output elements within one step ({s:.5}) of onnxruntime; max diff {:.2} steps; top-1 agreement {top1}/{cases}; {per:.2} s/input",
            100.0 * within as f64 / total as f64,
            max_diff / s
        ),
        None => println!(
            "{name}: float output (no quantization step); max abs diff {max_diff:.5}; top-1 agreement {top1}/{cases}; {per:.2} s/input"
        ),
    }
    Ok(())
}

fn layers(root: &Path, name: &str, dump: &Path) -> Result<(), String> {
    let model_path = root.join("models").join(format!("{name}.onnx"));
    let model = qport_onnx::load::load(&model_path).map_err(|e| format!("load: {e}"))?;
    let plan = Plan::new(&model).map_err(|e| format!("plan: {e}"))?;
    let input_name = plan.inputs().next().ok_or("no inputs")?.name.clone();
    let x = read_npy(&root.join("parity").join(name).join("00.input.npy"))?;
    let mut report = vec![];
    plan.run_with_tap(vec![(input_name, x)], &mut |value, t| {
        let file: String = value
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let p = dump.join(format!("{file}.npy"));
        let Ok(want) = read_npy(&p) else { return };
        let (Ok(a), Ok(b)) = (t.to_f32_vec(), want.to_f32_vec()) else {
            return;
        };
        if a.len() != b.len() {
            report.push(format!(
                "{value}: {} elements, onnxruntime has {}",
                a.len(),
                b.len()
            ));
            return;
        }
        let diff = a.iter().zip(&b).filter(|(x, y)| x != y).count();
        let max = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        report.push(format!(
            "{value}: {diff}/{} differ, max diff {max}",
            a.len()
        ));
    })
    .map_err(|e| format!("run: {e}"))?;
    for r in report {
        println!("{r}");
    }
    Ok(())
}

fn argmax(v: &[f32]) -> usize {
    v.iter()
        .enumerate()
        .fold((0, f32::NEG_INFINITY), |(bi, bv), (i, &x)| {
            if x > bv {
                (i, x)
            } else {
                (bi, bv)
            }
        })
        .0
}

/// Reads a `.npy` file with qport's own reader.
fn read_npy(path: &Path) -> Result<Tensor, String> {
    qport_data::npy::read(path).map_err(|e| e.to_string())
}
