//! onnxruntime parity folders written by `scripts/qport_fixtures/parity.py`
//! (`parity/<name>/`: `META.json`, `NN.input[_K].npy`, `NN.output_J.npy`).

use qport_core::Tensor;
use std::path::Path;

/// One parity sample: the model's inputs by name, onnxruntime's outputs by
/// name.
pub struct Sample {
    /// The graph inputs fed, in the model's input order.
    pub inputs: Vec<(String, Tensor)>,
    /// onnxruntime's outputs, in the model's output order.
    pub reference: Vec<(String, Tensor)>,
}

/// The parsed `META.json` of a parity folder.
pub fn meta(dir: &Path) -> serde_json::Value {
    let path = dir.join("META.json");
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The samples of a parity folder, read as its `META.json` lists them
/// (`NN.input.npy` or `NN.input_K.npy`, `NN.output_J.npy`).
///
/// # Panics
/// Panics (failing the test) when the folder, a file or a key is missing,
/// or it holds no sample.
pub fn samples(dir: &Path) -> Vec<Sample> {
    let meta = meta(dir);
    let names = |key: &str| -> Vec<(String, String)> {
        meta[key]
            .as_array()
            .unwrap_or_else(|| panic!("{}: META.json has no {key}", dir.display()))
            .iter()
            .map(|v| {
                (
                    v["name"].as_str().unwrap().to_string(),
                    v["file"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let (inputs, outputs) = (names("inputs"), names("outputs"));
    let count = meta["count"].as_u64().unwrap() as usize;
    assert!(count > 0, "{}: no samples", dir.display());
    let read = |n: usize, list: &[(String, String)]| -> Vec<(String, Tensor)> {
        list.iter()
            .map(|(name, file)| {
                let path = dir.join(file.replace("NN", &format!("{n:02}")));
                (name.clone(), qport_data::npy::read(&path).unwrap())
            })
            .collect()
    };
    (0..count)
        .map(|n| Sample {
            inputs: read(n, &inputs),
            reference: read(n, &outputs),
        })
        .collect()
}
