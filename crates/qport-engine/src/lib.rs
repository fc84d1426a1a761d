//! Executable plans built from qport's ONNX IR.
//!
//! - [`Plan`]: a model compiled into a list of operator steps over value
//!   slots; runs with inputs resolved at run time (dynamic dimensions are
//!   bound by the actual input shapes), frees intermediates after their last
//!   use (recycling their storage), and can report every intermediate value
//!   to a tap. [`PlanOptions`] controls plan-time fusion (Conv with
//!   BatchNormalization and activations, see [`plan`]).
//! - [`integer`]: [`IntegerPlan`], a QDQ artifact lowered to integer
//!   operators and run under an integer-arithmetic profile.
//! - [`ops`]: the operator registry ([`ops::registry`]) and the operator
//!   implementations, one builder per ONNX op type.
//! - [`LineAligned`]: the global allocator a program that runs plans
//!   installs to have its activations start on a cache line.
#![deny(missing_docs)]

mod buffers;
pub mod error;
pub mod integer;
mod layout;
pub mod lower;
pub mod ops;
mod optimize;
pub mod plan;

pub use error::{EngineError, OpError};
pub use integer::{quantized_node_count, IntegerPlan};
pub use lower::{lower_qdq, Coverage, FloatGroup, Lowered, MacCount};
pub use ops::{BuildCtx, Op, OpBuilder, Registry};
pub use optimize::fold_batch_norms;
pub use plan::{unsupported_ops, Plan, PlanOptions, Session};
pub use qport_kernels::aligned::LineAligned;
