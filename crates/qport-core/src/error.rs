//! The core error type: what can go wrong when building or viewing tensors.

use crate::DType;

/// Errors raised by tensor construction, views and conversions.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// The data length does not match the product of the shape.
    #[error("shape {shape:?} needs {expected} elements but {actual} were given")]
    LengthMismatch {
        /// Requested shape.
        shape: Vec<usize>,
        /// Element count implied by the shape.
        expected: usize,
        /// Element count actually provided.
        actual: usize,
    },
    /// A tensor of one dtype was used where another was required.
    #[error("expected a {expected} tensor, got {actual}")]
    DTypeMismatch {
        /// Required dtype.
        expected: DType,
        /// Actual dtype.
        actual: DType,
    },
    /// Two shapes cannot be broadcast together (numpy rules).
    #[error("shapes {a:?} and {b:?} cannot be broadcast together")]
    Broadcast {
        /// Left shape.
        a: Vec<usize>,
        /// Right shape.
        b: Vec<usize>,
    },
    /// A reshape changes the element count.
    #[error("cannot reshape {from:?} ({from_len} elements) to {to:?} ({to_len} elements)")]
    Reshape {
        /// Source shape.
        from: Vec<usize>,
        /// Element count of the source.
        from_len: usize,
        /// Target shape.
        to: Vec<usize>,
        /// Element count of the target.
        to_len: usize,
    },
    /// A shape's element count overflows or exceeds the allowed maximum.
    #[error("shape {shape:?} is too large ({reason})")]
    TooLarge {
        /// Offending shape (as declared, possibly huge).
        shape: Vec<u64>,
        /// Why it was refused.
        reason: String,
    },
    /// A conversion between dtypes is not defined (e.g. string to float).
    #[error("cannot convert {from} to {to}")]
    Conversion {
        /// Source dtype.
        from: DType,
        /// Target dtype.
        to: DType,
    },
}

/// Result alias for core operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;
