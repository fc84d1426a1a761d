//! Runs ONNX backend node tests against the engine.
//!
//! A node test is a directory holding `model.onnx` and one or more
//! `test_data_set_N/` folders with `input_J.pb` / `output_J.pb` tensors (the
//! layout written by `onnx.backend.test.cmd_tools`). Outputs are compared
//! with the ONNX backend's default tolerance (`rtol = 1e-3`, `atol = 1e-7`),
//! loosened only where the test's own generator says so.

use qport_core::{Tensor, TensorData};
use qport_engine::Plan;
use std::path::{Path, PathBuf};

/// The outcome of one node test.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Every data set matched.
    Pass,
    /// Something failed; the message says what and where.
    Fail(String),
}

/// Relative tolerance used for float outputs (the ONNX backend default).
pub const RTOL: f64 = 1e-3;
/// Absolute tolerance used for float outputs (the ONNX backend default).
pub const ATOL: f64 = 1e-7;

/// Runs the node test in `dir` (see the module docs for the layout).
pub fn run_case(dir: &Path) -> Outcome {
    match run_case_inner(dir) {
        Ok(()) => Outcome::Pass,
        Err(e) => Outcome::Fail(e),
    }
}

fn run_case_inner(dir: &Path) -> Result<(), String> {
    let model = qport_onnx::load::load(dir.join("model.onnx")).map_err(|e| format!("load: {e}"))?;
    let plan = Plan::new(&model).map_err(|e| format!("plan: {e}"))?;
    let mut sets: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("test_data_set_"))
        })
        .collect();
    sets.sort();
    if sets.is_empty() {
        return Err("no test_data_set_N folder".into());
    }
    let input_names: Vec<String> = plan.inputs().map(|v| v.name.clone()).collect();
    for set in sets {
        let inputs = read_numbered(&set, "input")?;
        let expected = read_numbered(&set, "output")?;
        // Inputs are matched by position against the graph's real inputs
        // (the .pb names are informative only).
        let named: Vec<(String, Tensor)> = input_names
            .iter()
            .cloned()
            .zip(inputs.into_iter().map(|(_, t)| t))
            .collect();
        let got = plan.run(named).map_err(|e| format!("run: {e}"))?;
        if got.len() < expected.len() {
            return Err(format!(
                "expected {} outputs, got {}",
                expected.len(),
                got.len()
            ));
        }
        for (j, ((_, want), (name, have))) in expected.iter().zip(&got).enumerate() {
            compare(want, have).map_err(|e| {
                format!(
                    "{}: output {j} '{name}': {e}",
                    set.file_name().unwrap_or_default().to_string_lossy()
                )
            })?;
        }
    }
    Ok(())
}

fn read_numbered(dir: &Path, prefix: &str) -> Result<Vec<(String, Tensor)>, String> {
    let mut out = vec![];
    for j in 0.. {
        let p = dir.join(format!("{prefix}_{j}.pb"));
        if !p.exists() {
            break;
        }
        out.push(qport_onnx::read_tensor_pb(&p).map_err(|e| format!("{}: {e}", p.display()))?);
    }
    Ok(out)
}

/// Compares an output against the expected tensor: same dtype and shape;
/// floats within [`RTOL`]/[`ATOL`] (NaN matches NaN), everything else exact.
pub fn compare(want: &Tensor, have: &Tensor) -> Result<(), String> {
    if want.dtype() != have.dtype() {
        return Err(format!(
            "dtype {} expected, got {}",
            want.dtype(),
            have.dtype()
        ));
    }
    if want.shape() != have.shape() {
        return Err(format!(
            "shape {:?} expected, got {:?}",
            want.shape(),
            have.shape()
        ));
    }
    if want.dtype().is_float() {
        let a = want
            .cast(qport_core::DType::F64)
            .map_err(|e| e.to_string())?;
        let b = have
            .cast(qport_core::DType::F64)
            .map_err(|e| e.to_string())?;
        let (a, b) = (a.as_slice::<f64>().unwrap(), b.as_slice::<f64>().unwrap());
        let mut bad = 0usize;
        let mut first = None;
        for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
            let ok = (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= ATOL + RTOL * x.abs();
            if !ok {
                bad += 1;
                first.get_or_insert((i, x, y));
            }
        }
        if let Some((i, x, y)) = first {
            return Err(format!(
                "{bad} of {} elements differ; first at {i}: expected {x}, got {y}",
                a.len()
            ));
        }
        return Ok(());
    }
    let same = match (want.data(), have.data()) {
        (TensorData::Str(a), TensorData::Str(b)) => a == b,
        (a, b) => a == b,
    };
    if same {
        Ok(())
    } else {
        Err("integer/bool/string values differ".into())
    }
}

/// One manifest line.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// Tests matching the pattern must run and pass.
    Include(String),
    /// Tests matching the pattern are not run, for the stated reason.
    Exclude {
        /// Name or `*` glob.
        pattern: String,
        /// Why the test is excluded.
        reason: String,
    },
}

/// The allow-list manifest: one test name or `*` glob per line; `exclude
/// NAME reason...` excludes with a reason; `#` starts a comment.
#[derive(Debug, Clone, Default)]
pub struct Manifest {
    /// Entries in file order.
    pub entries: Vec<Entry>,
}

/// How a test is treated by a manifest.
#[derive(Debug, Clone, PartialEq)]
pub enum Listing {
    /// Listed: must pass.
    Included,
    /// Excluded with a reason.
    Excluded(String),
    /// Not in the manifest.
    Unlisted,
}

impl Manifest {
    /// Parses manifest text; an `exclude` line without a reason is an error.
    pub fn parse(text: &str) -> Result<Manifest, String> {
        let mut entries = vec![];
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            if let Some(rest) = line.strip_prefix("exclude ") {
                let rest = rest.trim();
                let (pattern, reason) = rest
                    .split_once(char::is_whitespace)
                    .ok_or_else(|| format!("line {}: 'exclude {rest}' needs a reason", i + 1))?;
                entries.push(Entry::Exclude {
                    pattern: pattern.to_string(),
                    reason: reason.trim().to_string(),
                });
            } else if line.contains(char::is_whitespace) {
                return Err(format!("line {}: unexpected text '{line}'", i + 1));
            } else {
                entries.push(Entry::Include(line.to_string()));
            }
        }
        Ok(Manifest { entries })
    }

    /// How `name` is listed: an exclusion anywhere wins over an inclusion.
    pub fn listing(&self, name: &str) -> Listing {
        let mut included = false;
        for e in &self.entries {
            match e {
                Entry::Exclude { pattern, reason } if glob(pattern, name) => {
                    return Listing::Excluded(reason.clone())
                }
                Entry::Include(p) if glob(p, name) => included = true,
                _ => {}
            }
        }
        if included {
            Listing::Included
        } else {
            Listing::Unlisted
        }
    }
}

pub use qport_core::pattern::glob;

/// True when every op of the model in `dir` is in the registry (the test
/// exercises only operators qport claims to support).
pub fn model_supported(dir: &Path) -> bool {
    match qport_onnx::load::load(dir.join("model.onnx")) {
        Ok(m) => qport_engine::unsupported_ops(&m).is_empty(),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_and_glob() {
        let m =
            Manifest::parse("# c\ntest_abs\ntest_conv_*\nexclude test_conv_x needs foo\n").unwrap();
        assert_eq!(m.listing("test_abs"), Listing::Included);
        assert_eq!(m.listing("test_conv_y"), Listing::Included);
        assert_eq!(
            m.listing("test_conv_x"),
            Listing::Excluded("needs foo".into())
        );
        assert_eq!(m.listing("test_add"), Listing::Unlisted);
        assert!(Manifest::parse("exclude test_a").is_err());
        assert!(glob("a*b*c", "axxbyyc"));
        assert!(!glob("a*b", "ab_c"));
    }
}
