//! [`DataError`]: what can go wrong reading or writing data files.

use std::path::PathBuf;

/// Errors from reading, decoding, encoding or writing data files.
///
/// Variants carry the file (and, inside an `.npz`, the key) involved. Errors
/// raised while decoding from memory use the placeholder path `<memory>`
/// unless the caller supplied a name.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A `.npy` file (or `.npz` member) is malformed or unsupported.
    #[error("{}{}: {reason}", path.display(), key_suffix(key))]
    Npy {
        /// The file involved.
        path: PathBuf,
        /// The `.npz` key, when the array is an archive member.
        key: Option<String>,
        /// What is wrong.
        reason: String,
    },
    /// A `.npz` archive is malformed (not a zip, bad member, duplicate key).
    #[error("{}: {reason}", path.display())]
    Npz {
        /// The archive involved.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A key was asked for that an `.npz` archive does not hold.
    #[error("{}: no array named '{key}' (the archive holds: {})", path.display(), list_or_none(available))]
    MissingKey {
        /// The archive involved.
        path: PathBuf,
        /// The key asked for.
        key: String,
        /// The keys the archive holds.
        available: Vec<String>,
    },
    /// An image could not be decoded, or has an unsupported form.
    #[error("{}: {reason}", path.display())]
    Image {
        /// The image file involved.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Preprocessing was asked for something impossible (zero-sized target,
    /// wrong number of channel statistics).
    #[error("preprocessing: {0}")]
    Preprocess(String),
    /// A preprocessing spec is invalid: unknown key or preset, malformed
    /// value, contradictory settings. `origin` names where the spec came
    /// from (a TOML file, a `key=value` override, a preset).
    #[error("{origin}: {reason}")]
    Spec {
        /// The TOML file or override text involved.
        origin: String,
        /// What is wrong (naming the key, and the valid choices).
        reason: String,
    },
    /// A dataset cannot be opened, or does not fit the model's inputs
    /// (empty folder, missing or extra `.npz` keys, no preprocessing spec).
    #[error("{}: {reason}", path.display())]
    Dataset {
        /// The folder or file involved.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// One sample does not fit the model input it feeds (shape, dtype).
    #[error("{}{}: input '{input}': {reason}", path.display(), index_suffix(index))]
    Sample {
        /// The image or array file involved.
        path: PathBuf,
        /// The sample index inside an array file.
        index: Option<usize>,
        /// The model input the sample feeds.
        input: String,
        /// What is wrong.
        reason: String,
    },
    /// A sample holds NaN or infinite values.
    #[error(
        "{}{}: input '{input}' has {count} non-finite value(s) (NaN or Inf) among {total}",
        path.display(),
        index_suffix(index)
    )]
    NonFinite {
        /// The image or array file involved.
        path: PathBuf,
        /// The sample index inside an array file.
        index: Option<usize>,
        /// The model input the sample feeds.
        input: String,
        /// How many values are NaN or infinite.
        count: usize,
        /// How many values the sample has.
        total: usize,
    },
    /// A tensor of this dtype cannot be stored in the requested format.
    #[error("{}{}: cannot store a {dtype} tensor in a .npy file", path.display(), key_suffix(key))]
    UnsupportedDType {
        /// The file involved.
        path: PathBuf,
        /// The `.npz` key, when the array is an archive member.
        key: Option<String>,
        /// The offending dtype.
        dtype: qport_core::DType,
    },
}

fn key_suffix(key: &Option<String>) -> String {
    match key {
        Some(k) => format!(" (array '{k}')"),
        None => String::new(),
    }
}

fn index_suffix(index: &Option<usize>) -> String {
    match index {
        Some(i) => format!(" (sample {i})"),
        None => String::new(),
    }
}

fn list_or_none(v: &[String]) -> String {
    if v.is_empty() {
        "nothing".into()
    } else {
        v.join(", ")
    }
}

impl DataError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> DataError {
        DataError::Io {
            path: path.into(),
            source,
        }
    }
}

/// Result alias for this crate.
pub type Result<T, E = DataError> = std::result::Result<T, E>;
