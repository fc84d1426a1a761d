//! Errors of the platform crate; every variant names the platform or tensor.

/// Errors from the registry, descriptors and packing.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlatformError {
    /// A platform name or march alias that the registry does not know.
    #[error("unknown platform `{name}`; valid platforms: {valid}")]
    UnknownPlatform {
        /// The name asked for.
        name: String,
        /// Comma-separated valid names.
        valid: String,
    },
    /// NV12 needs even height and width (vt.md §hb_compile YAML).
    #[error("tensor `{tensor}`: NV12 needs even height and width, got {height}x{width}")]
    OddNv12 {
        /// Tensor name.
        tensor: String,
        /// Height.
        height: u64,
        /// Width.
        width: u64,
    },
    /// A shape that does not fit the tensor type.
    #[error("tensor `{tensor}`: invalid shape {shape:?}: {reason}")]
    BadShape {
        /// Tensor name.
        tensor: String,
        /// The shape given.
        shape: Vec<i64>,
        /// Why it is rejected.
        reason: String,
    },
    /// A size computation overflowed 64 bits.
    #[error("tensor `{tensor}`: size overflows 64 bits")]
    Overflow {
        /// Tensor name.
        tensor: String,
    },
    /// The descriptor still has dynamic (-1) strides; resolve it first.
    #[error("tensor `{tensor}`: dynamic stride must be resolved from the actual shape first")]
    Unresolved {
        /// Tensor name.
        tensor: String,
    },
    /// A buffer whose length does not match the descriptor.
    #[error("tensor `{tensor}`: {what} buffer has {got} bytes, expected {expected}")]
    BufferSize {
        /// Tensor name.
        tensor: String,
        /// Which buffer (dense or padded).
        what: &'static str,
        /// Its length.
        got: u64,
        /// The length the descriptor requires.
        expected: u64,
    },
    /// A platform override file that does not parse or is invalid.
    #[error("platform overrides `{origin}`: {message}")]
    Override {
        /// File name (or `<string>`).
        origin: String,
        /// What is wrong, with line and column where known.
        message: String,
    },
    /// An override file that cannot be read.
    #[error("cannot read platform overrides `{path}`: {message}")]
    Io {
        /// The path.
        path: String,
        /// The I/O error.
        message: String,
    },
    /// A runtime L2M allocation string that does not parse.
    #[error("runtime L2M string: {message}")]
    BadRuntimeL2m {
        /// What is wrong.
        message: String,
    },
}
