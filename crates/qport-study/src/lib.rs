//! Measurement studies on a quantized artifact, with the artifact and its
//! scales held fixed and the integer arithmetic as the only free variable
//! (the study in `shared/seeds/004_…`), and the latency benchmark that
//! asks whether INT8 is faster at all on the host ([`bench`](mod@bench)). The
//! documents `qport agree` and `qport diverge` write are built from a
//! study's result in [`agree::report`] and [`diverge::report`]; the samples
//! are `qport_data`'s ([`qport_data::Sample`]). [`dump`] writes and reads
//! dump directories (every intermediate value of one run) and localizes
//! the first value where a target's dump departs from qport's; [`verify`]
//! names the cause when a target's outputs differ from qport's; [`lint`]
//! checks a QDQ artifact against a platform's native flow without running
//! it; [`report`] holds the whole study's report (`qport.study/1`) and
//! renders it as one HTML page and a terminal summary.
#![deny(missing_docs)]

pub mod agree;
pub mod bench;
pub mod coverage;
pub mod diverge;
pub mod dump;
pub mod lint;
pub mod regime_plot;
pub mod report;
pub mod study;
pub mod svg;
pub mod sweep;
pub mod verify;

use qport_core::arith::ProfileError;
use qport_engine::EngineError;

/// An error of a study: the engine, a profile, or the data given.
#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    /// Building or running a plan failed (includes a float model given
    /// where a quantized one is needed: [`EngineError::NotQuantized`]).
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A profile name or file was not usable.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// The data or the request does not fit the model (names what).
    #[error("{0}")]
    Input(String),
    /// Reading a sample from a data source failed (names the sample).
    #[error(transparent)]
    Data(#[from] qport_data::DataError),
    /// Running a plan on one sample failed.
    #[error("running the model on {sample} failed")]
    Sample {
        /// The sample's id (where it came from: an image file, `FILE[i]`).
        sample: String,
        /// What the engine reported.
        #[source]
        source: EngineError,
    },
    /// A model output holds NaN or an infinity under some run (names the
    /// first node that produced one).
    #[error("{0}")]
    NonFiniteOutput(#[from] qport_core::compare::NonFiniteOutput),
    /// A study's internal cross-check failed (names what did not match):
    /// a bug in qport, not in the input.
    #[error("internal check failed: {0}; this is a bug in qport, please report it")]
    Inconsistent(String),
}
