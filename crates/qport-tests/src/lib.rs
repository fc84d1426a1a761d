//! Support for qport's fixture-based integration tests.
//!
//! Fixtures (real models, photos, ONNX node tests, onnxruntime reference
//! outputs) are produced by `scripts/fetch-fixtures` into the cache
//! directory [`fixtures_dir`]. A missing fixture is a test failure with a
//! message saying how to produce it, never a silent skip.
#![deny(missing_docs)]

pub mod cli;
pub mod conformance;

use std::path::{Path, PathBuf};

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
