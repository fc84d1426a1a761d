//! Reading a model file once: its bytes give the size and sha256 that
//! reports record, and the IR through `qport_onnx::from_bytes`.

use anyhow::{Context, Result};
use qport_onnx::Model;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Facts about a file that reports record.
#[derive(Debug, Clone)]
pub struct FileFacts {
    /// The path as given on the command line.
    pub path: PathBuf,
    /// Size in bytes.
    pub size: u64,
    /// Lower-case hex sha256 of the content.
    pub sha256: String,
}

impl FileFacts {
    /// The facts of `bytes`, the content of the file at `path`.
    pub fn new(path: &Path, bytes: &[u8]) -> FileFacts {
        FileFacts {
            path: path.to_path_buf(),
            size: bytes.len() as u64,
            sha256: sha256_hex(bytes),
        }
    }
}

/// Reads the whole file at `path` with its facts; the error says
/// `cannot read WHAT 'PATH'` (`cannot read 'PATH'` for an empty `what`).
pub fn read(path: &Path, what: &str) -> Result<(Vec<u8>, FileFacts)> {
    let bytes = std::fs::read(path).with_context(|| match what {
        "" => format!("cannot read '{}'", path.display()),
        _ => format!("cannot read {what} '{}'", path.display()),
    })?;
    let facts = FileFacts::new(path, &bytes);
    Ok((bytes, facts))
}

/// Size and hash of a small input file (`--config`) for a report.
pub fn file_facts(path: &Path) -> Result<FileFacts> {
    Ok(read(path, "")?.1)
}

/// Lower-case hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lower-case hex of `bytes` (a digest).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A loaded model with its file facts and how long loading took.
pub struct LoadedModel {
    /// The IR.
    pub model: Model,
    /// Size and hash of the file.
    pub facts: FileFacts,
    /// Time to read and convert the file.
    pub load_time: Duration,
}

/// Reads and converts the ONNX model at `path`; errors name the file.
pub fn load(path: &Path) -> Result<LoadedModel> {
    let t0 = Instant::now();
    let (bytes, facts) = read(path, "model")?;
    let base = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let model = qport_onnx::load::from_vec(bytes, Some(base))
        .with_context(|| format!("cannot load model '{}'", path.display()))?;
    Ok(LoadedModel {
        model,
        facts,
        load_time: t0.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_known_input() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
