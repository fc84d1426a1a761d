//! Support for qport's fixture-based integration tests.
//!
//! Fixtures (real models, photos, ONNX node tests, onnxruntime reference
//! outputs) are produced by `scripts/fetch-fixtures` into the cache
//! directory [`fixtures_dir`]. A missing fixture is a test failure with a
//! message saying how to produce it, never a silent skip.
#![deny(missing_docs)]

pub mod browser;
pub mod cli;
pub mod conformance;
pub mod parity;
pub mod schema;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The fixture cache: `$QPORT_FIXTURES`, else `~/.cache/qport/fixtures`.
pub fn fixtures_dir() -> PathBuf {
    match std::env::var_os("QPORT_FIXTURES") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/qport/fixtures"),
    }
}

/// The path of fixture `rel` inside the cache.
///
/// # Panics
/// Panics (failing the test) when the fixture is missing, telling the user
/// to run `scripts/fetch-fixtures`.
pub fn fixture(rel: &str) -> PathBuf {
    let p = fixtures_dir().join(rel);
    assert!(
        p.exists(),
        "missing fixture {}: run `bash scripts/fetch-fixtures` (the README's test command does)",
        p.display()
    );
    p
}

/// The repository root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repo root")
}

/// The Python interpreter of the oracle venv: `$QPORT_PYTHON`, else
/// `<repo>/.venv/bin/python`.
///
/// # Panics
/// Panics when the venv is missing (run `bash scripts/setup-venv`).
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("QPORT_PYTHON") {
        return PathBuf::from(p);
    }
    let p = repo_root().join(".venv/bin/python");
    assert!(
        p.exists(),
        "missing {}: run `bash scripts/setup-venv`",
        p.display()
    );
    p
}

/// Runs the oracle venv's Python ([`python`]) with `args`, capturing its
/// output.
///
/// # Panics
/// Panics (failing the test) when it cannot start or does not succeed,
/// showing its stderr.
pub fn python_ok<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    output_ok(Command::new(python()).args(args))
}

/// Runs `cmd`, capturing its output.
///
/// # Panics
/// Panics (failing the test) when it cannot start or does not succeed,
/// showing its stderr.
pub fn output_ok(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// [`python_ok`] of the oracle script `scripts/oracle/{script}` with `args`.
///
/// # Panics
/// As [`python_ok`].
pub fn oracle<S: AsRef<OsStr>>(script: &str, args: &[S]) -> Output {
    let path = repo_root().join("scripts/oracle").join(script);
    python_ok(std::iter::once(path.as_os_str()).chain(args.iter().map(AsRef::as_ref)))
}

/// The bit patterns of a tensor's values as f32 (for bit-for-bit
/// comparisons that tell -0.0 from 0.0 and compare NaNs by payload).
pub fn f32_bits(t: &qport_core::Tensor) -> Vec<u32> {
    t.to_f32_vec()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

/// The quantization step of graph output `output`: the scale of the
/// `DequantizeLinear` that produces it, if one does.
pub fn output_step(model: &qport_onnx::Model, output: &str) -> Option<f32> {
    let node = model
        .graph
        .nodes
        .iter()
        .find(|n| n.outputs.iter().any(|o| o == output))?;
    if node.op_type != "DequantizeLinear" {
        return None;
    }
    let scale = model.graph.initializers.get(node.input(1)?)?;
    scale.to_f32_vec().ok()?.first().copied()
}

/// The first `n` samples of a fixture image folder (`datasets/...`),
/// preprocessed with `preset`, as PTQ samples for a model whose only input
/// is `input` with declared shape `shape` (negative = dynamic).
///
/// # Panics
/// Panics (failing the test) when the fixture is missing or unreadable.
pub fn image_samples(
    rel: &str,
    preset: &str,
    input: &str,
    shape: &[i64],
    n: usize,
) -> Vec<qport_quant::ptq::Sample> {
    use qport_data::dataset::{Dataset, InputSpec};
    let inputs = [InputSpec::new(input, Some(shape.to_vec()))];
    let pp = qport_data::preprocess::Preprocess::from_preset(preset).expect("preset");
    let ds = Dataset::open(&fixture(rel), &inputs, Some(pp)).expect("open dataset");
    ds.samples()
        .take(n)
        .map(|s| s.expect("read sample"))
        .collect()
}

/// [`image_samples`] of the EfficientNet-Lite0 photo crops
/// (`datasets/photo-crops/{split}`, preset `effnet-lite`).
pub fn photo_crops(split: &str, n: usize) -> Vec<qport_quant::ptq::Sample> {
    image_samples(
        &format!("datasets/photo-crops/{split}"),
        "effnet-lite",
        "input",
        &[1, 3, 224, 224],
        n,
    )
}
