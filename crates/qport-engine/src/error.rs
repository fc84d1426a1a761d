//! Engine errors: operator-level [`OpError`] and plan-level [`EngineError`],
//! which always names the node and op type where an operator failed.

use qport_core::DType;

/// An error raised by one operator while building or evaluating.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// Inputs or attributes violate the operator's contract.
    #[error("{0}")]
    Invalid(String),
    /// A valid form of the operator that qport does not implement.
    #[error("not supported: {0}")]
    Unsupported(String),
    /// A core tensor error (shape, dtype, size).
    #[error(transparent)]
    Core(#[from] qport_core::Error),
    /// An attribute error from the IR.
    #[error(transparent)]
    Onnx(#[from] qport_onnx::OnnxError),
}

impl OpError {
    /// Shorthand for [`OpError::Invalid`].
    pub fn invalid(msg: impl Into<String>) -> OpError {
        OpError::Invalid(msg.into())
    }

    /// Shorthand for [`OpError::Unsupported`].
    pub fn unsupported(msg: impl Into<String>) -> OpError {
        OpError::Unsupported(msg.into())
    }

    /// An input of a dtype the operator does not accept.
    pub fn dtype(what: &str, dtype: DType) -> OpError {
        OpError::Unsupported(format!("{what} of type {dtype}"))
    }
}

/// Result alias for operator code.
pub type OpResult<T> = std::result::Result<T, OpError>;

/// An error building or running a [`crate::Plan`].
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// An operator failed; names the node and op type.
    #[error("node '{node}' ({op}): {source}")]
    Node {
        /// Node name.
        node: String,
        /// Op type (with domain prefix if not the default domain).
        op: String,
        /// The operator's error (boxed: keeps `Result<_, EngineError>` small).
        #[source]
        source: Box<OpError>,
    },
    /// The model uses operators qport does not implement.
    #[error("unsupported operator(s): {}", .ops.join(", "))]
    Unsupported {
        /// `op_type (count)` entries, sorted.
        ops: Vec<String>,
    },
    /// A required graph input was not supplied.
    #[error("missing input '{name}' (expected {dtype} {shape})")]
    MissingInput {
        /// Input name.
        name: String,
        /// Declared dtype.
        dtype: String,
        /// Declared shape.
        shape: String,
    },
    /// An input was supplied that the graph does not declare.
    #[error("unknown input '{name}'; the model's inputs are: {}", .expected.join(", "))]
    UnknownInput {
        /// The name given.
        name: String,
        /// The declared input names.
        expected: Vec<String>,
    },
    /// An input's shape does not match the declared shape.
    #[error("input '{name}': expected shape {expected}, got {actual:?}")]
    InputShape {
        /// Input name.
        name: String,
        /// Declared shape (symbolic dims shown by name).
        expected: String,
        /// Given shape.
        actual: Vec<usize>,
    },
    /// An input's dtype does not match the declared dtype.
    #[error("input '{name}': expected dtype {expected}, got {actual}")]
    InputDType {
        /// Input name.
        name: String,
        /// Declared dtype.
        expected: DType,
        /// Given dtype.
        actual: DType,
    },
    /// Integer execution was asked of a model with no quantized node.
    #[error("model '{model}' has no QuantizeLinear/DequantizeLinear (or other quantized) nodes: it is a float model; quantize it first with `qport quantize MODEL --platform P --calib DATA`")]
    NotQuantized {
        /// The graph's name.
        model: String,
    },
    /// The graph is malformed in a way that prevents planning.
    #[error("invalid graph: {0}")]
    Graph(String),
    /// An error from the ONNX layer.
    #[error(transparent)]
    Onnx(#[from] qport_onnx::OnnxError),
}
