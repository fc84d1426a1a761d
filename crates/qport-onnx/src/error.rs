//! Errors from reading, writing and validating ONNX models.

use std::path::PathBuf;

/// What can go wrong loading, saving or validating an ONNX model.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not a valid ONNX protobuf.
    #[error("not a valid ONNX model: {0}")]
    Decode(String),
    /// The protobuf decoded but its content is malformed.
    #[error("malformed model: {0}")]
    Malformed(String),
    /// A tensor in the model could not be converted.
    #[error("tensor '{name}': {reason}")]
    Tensor {
        /// Tensor (initializer, attribute or constant) name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A node attribute is missing or has the wrong type.
    #[error("node '{node}' ({op}): attribute '{attr}': {reason}")]
    Attribute {
        /// Node name.
        node: String,
        /// Op type.
        op: String,
        /// Attribute name.
        attr: String,
        /// What is wrong.
        reason: String,
    },
    /// The graph is structurally invalid.
    #[error("invalid graph: {0}")]
    Invalid(String),
    /// A core tensor error.
    #[error(transparent)]
    Core(#[from] qport_core::Error),
}

/// Result alias for this crate.
pub type Result<T, E = OnnxError> = std::result::Result<T, E>;
