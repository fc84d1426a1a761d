//! Dump directories: every intermediate value of one run as a `.npy` file,
//! with an index, and the per-layer comparison of two such directories.
//!
//! This module owns the on-disk format (`qport.dump/1`), its writer
//! ([`DumpWriter`], fed by the engine's tap as values are produced, so a
//! dump never holds more than one value in memory beyond the run itself),
//! its reader ([`DumpIndex`]) and [`localize`], which walks one dump's
//! values in execution order against another's (a target's, written by
//! `scripts/ort_dump.py` or any tool that uses the same file names) and
//! names the first value that departs.
//!
//! # Format
//!
//! - One file per value: the ONNX value name escaped by
//!   [`escape_value_name`] plus `.npy`.
//! - `index.json`, written last (atomically), so a directory with an index
//!   is a complete dump:
//!
//! ```text
//! {
//!   "schema": "qport.dump/1",
//!   "qport_version": str,
//!   "model": { "path": str, "sha256": str },
//!   "profile": "fp32" | str,
//!   "values": [ {
//!       "name": str, "file": str, "dtype": str, "shape": [int],
//!       "producer": str | null,      // node name; null for a graph input
//!       "op": str | null,            // its op type (domain:Op outside ONNX)
//!       "quant": null | { "scale": [f32], "zero_point": [i64], "axis": int | null }
//!   } ]                              // execution order, graph inputs first
//! }
//! ```
//!
//! `quant` is given for an integer value whose quantization parameters the
//! executed graph (or the artifact it was lowered from) states: the output
//! of a `QuantizeLinear` or the input of a `DequantizeLinear` (also when a
//! lowered integer operator now produces or reads it), and values an
//! integer data-movement operator (`Reshape`, `Transpose`, `MaxPool`, ...)
//! passes through. `axis` is `null` for per-tensor parameters.
//!
//! # What a dump holds
//!
//! Graph inputs and every value a node produces, in execution order; not
//! initializers. `qport run --dump` compiles the plan without the
//! plan-time fusions ([`qport_engine::PlanOptions::unfused`]), so a
//! float graph's dump has every ONNX value (a Conv output before its
//! BatchNormalization too) and its outputs may differ in the last bits
//! from a fused run. Under an integer profile the executed graph is the
//! lowered one: a lowered QDQ group is one integer operator, so its
//! integer input and output are dumped (with their scales) but the float
//! values inside the group (the DequantizeLinear outputs, the float Conv
//! output) are not, because they are never computed; groups left in float
//! dump every value.

mod index;
mod localize;
mod writer;

pub use index::{DumpIndex, DumpModel, DumpedValue, QuantParams, SCHEMA};
pub use localize::{localize, DiffMetric, Localization, TargetDump, Tolerance, ValueDiff};
pub use writer::{
    dump_integer_run, run_dumped, run_dumped_with, DumpMeta, DumpSummary, DumpWriter,
};

use std::path::PathBuf;

/// The name of a dump directory's index file.
pub const INDEX_FILE: &str = "index.json";

/// An error reading or writing a dump directory (names the file).
#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A `.npy` file could not be read or written.
    #[error(transparent)]
    Npy(#[from] qport_data::DataError),
    /// The directory is not a dump, or not one this reader can use.
    #[error("{}: {reason}", path.display())]
    Invalid {
        /// The file or directory involved.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A value file disagrees with what it is compared to or listed as.
    #[error("{}: {what}: expected {expected}, found {found}", path.display())]
    Mismatch {
        /// The file.
        path: PathBuf,
        /// What disagrees (`dtype`, `shape`).
        what: &'static str,
        /// What the index (or the reference dump) says.
        expected: String,
        /// What the file holds.
        found: String,
    },
    /// A value name the dump does not hold.
    #[error("{}: no value named '{name}' in the dump", dir.display())]
    UnknownValue {
        /// The dump directory.
        dir: PathBuf,
        /// The name asked for.
        name: String,
    },
    /// Running the plan failed.
    #[error(transparent)]
    Engine(#[from] qport_engine::EngineError),
}

impl DumpError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> DumpError {
        DumpError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn invalid(path: impl Into<PathBuf>, reason: impl Into<String>) -> DumpError {
        DumpError::Invalid {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

fn kept_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')
}

/// The file stem of value `name` in a dump: every byte of its UTF-8 form
/// outside `[A-Za-z0-9._-]` written as `%XX` (upper-case hex), and a
/// leading `.` as `%2E` (so no dump file is hidden). Add `.npy` for the
/// file name.
///
/// ```
/// use qport_study::dump::{escape_value_name, unescape_value_name};
/// assert_eq!(escape_value_name("conv/out:0"), "conv%2Fout%3A0");
/// assert_eq!(escape_value_name(".x%"), "%2Ex%25");
/// assert_eq!(unescape_value_name("conv%2Fout%3A0").as_deref(), Some("conv/out:0"));
/// ```
pub fn escape_value_name(name: &str) -> String {
    let mut s = String::with_capacity(name.len());
    for (i, &b) in name.as_bytes().iter().enumerate() {
        if kept_byte(b) && !(i == 0 && b == b'.') {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

/// The value name of a file stem written by [`escape_value_name`]
/// (lower-case hex accepted); `None` for a stem that no name escapes to
/// (a bad `%` sequence, a byte that should have been escaped, or bytes
/// that are not UTF-8).
pub fn unescape_value_name(stem: &str) -> Option<String> {
    let b = stem.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else if kept_byte(b[i]) && !(i == 0 && b[i] == b'.') {
            out.push(b[i]);
            i += 1;
        } else {
            return None;
        }
    }
    String::from_utf8(out).ok()
}

/// The file name of value `name` in a dump (escaped name plus `.npy`).
pub fn value_file_name(name: &str) -> String {
    format!("{}.npy", escape_value_name(name))
}

#[cfg(test)]
mod tests;
