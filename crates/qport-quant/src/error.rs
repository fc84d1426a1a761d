//! [`QuantError`]: what can go wrong quantizing a model.

/// Errors from calibration, export and import.
#[derive(Debug, thiserror::Error)]
pub enum QuantError {
    /// A tensor operation failed (shape, dtype).
    #[error(transparent)]
    Core(#[from] qport_core::Error),
    /// The model could not be processed.
    #[error(transparent)]
    Onnx(#[from] qport_onnx::OnnxError),
    /// The engine failed running the model.
    #[error(transparent)]
    Engine(#[from] qport_engine::EngineError),
    /// Reading calibration or evaluation data failed.
    #[error(transparent)]
    Data(#[from] qport_data::DataError),
    /// A calibrator could not compute a range.
    #[error("tensor '{tensor}': {source}")]
    Calib {
        /// The tensor being calibrated.
        tensor: String,
        /// What went wrong.
        #[source]
        source: crate::calib::CalibError,
    },
    /// Calibration data holds NaN or infinity.
    #[error(
        "{sample}: tensor '{tensor}' has {count} NaN/Inf value(s); calibration data must be finite"
    )]
    NonFinite {
        /// Which sample.
        sample: String,
        /// Which tensor (a model input or an intermediate value).
        tensor: String,
        /// How many values.
        count: usize,
    },
    /// A model output holds NaN or an infinity (names the first node that
    /// produced one).
    #[error("{0}")]
    NonFiniteOutput(#[from] qport_core::compare::NonFiniteOutput),
    /// The outputs to compare cannot be compared as asked (an unknown
    /// `--output`, an axis an output lacks, runs that disagree on them).
    #[error("{0}")]
    Outputs(String),
    /// The calibration set is empty.
    #[error("the calibration set is empty: give at least one sample")]
    EmptyCalibration,
    /// The model cannot be exported at the opset the quantization needs.
    #[error("cannot upgrade node '{node}' ({op}) from opset {from} to {to}: {reason}")]
    Opset {
        /// Node name.
        node: String,
        /// Op type.
        op: String,
        /// The model's opset.
        from: i64,
        /// The opset needed.
        to: i64,
        /// Why not.
        reason: String,
    },
    /// A QDQ model could not be read back.
    #[error("cannot import QDQ model: {0}")]
    Import(String),
    /// A tensor named in the config or needed by the export has no calibration data.
    #[error("tensor '{0}' was never observed during calibration")]
    Unobserved(String),
    /// Calibration shards that cannot be merged, or a calibration that
    /// cannot be sharded exactly (names the problem; see
    /// [`crate::shard`]).
    #[error("{0}")]
    Shard(String),
    /// An internal invariant failed (a bug).
    #[error("internal error: {0}")]
    Internal(String),
}
