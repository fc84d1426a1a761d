//! Sweep models for the latency regime ([`qport_platform::regime`]): ONNX
//! models of one fixed compute and controlled output sizes, for a user to
//! run on a target's own runtime and measure D2H time per output size
//! (the study's controlled sweep, seed `004_…` Table 5).
//!
//! Every model of a sweep has the same graph head:
//!
//! ```text
//! x: float32[R, K] ── MatMul(W: float32[K, K], seeded) ── h: float32[R, K]   (R·K·K MACs)
//! h ── Reshape [1, R·K] ── (Tile [1, t] when E > R·K) ── Slice [0, E) ── y: float32[1, E]
//! ```
//!
//! so the multiply-accumulates are the MatMul's, identical in every model
//! of the sweep, and the output `y` holds exactly `E = bytes / 4` float32
//! values, every one a function of the input (a compiler cannot fold it
//! away). The tail only copies (`E` elements): it adds no MACs, but its
//! memory traffic grows with the output, like any output head's. A size
//! that is not a multiple of 4 cannot be a float32 tensor and is refused
//! ([`SweepError`] names the nearest sizes that are).
//!
//! `R` and `K` are chosen so `R·K²` is within 0.01% of the requested MACs
//! (or as close as any `K <= 1024` gets), with the largest such `K`, so
//! the input stays small; the manifest records the exact count. Weights are drawn from [`qport_data::rng::SplitMix`]
//! with the given seed and scaled by `1/sqrt(K)`, so the same request
//! gives the same files.
//!
//! ```
//! use qport_study::sweep::{build_sweep, SweepRequest};
//! let s = build_sweep(&SweepRequest { macs: 100_000, outputs: vec![16, 4096], seed: 1 }).unwrap();
//! assert_eq!(s[1].output_bytes, 4096);
//! assert_eq!(s[0].macs, s[1].macs);
//! ```

use qport_core::{DType, Tensor};
use qport_data::rng::{mix, SplitMix};
use qport_onnx::{Model, ModelBuilder, Node};
use serde::Serialize;

/// Opset of the generated models.
pub const OPSET: i64 = 13;
/// Largest `K` of the MatMul.
const MAX_K: u64 = 1024;
/// Largest accepted MAC count (a [R, 1024] input of 64 MiB).
pub const MAX_MACS: u64 = 1 << 34;

/// Why a sweep cannot be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SweepError {
    /// An output size that is not a positive multiple of 4 bytes.
    #[error(
        "output size {bytes} B is not a positive multiple of 4 (float32 outputs); \
         nearest sizes: {below} or {above}"
    )]
    NotFloat32 {
        /// The size asked for.
        bytes: u64,
        /// The nearest multiple of 4 below (at least 4).
        below: u64,
        /// The nearest multiple of 4 above.
        above: u64,
    },
    /// A MAC count out of range.
    #[error("MACs must be between 1 and {MAX_MACS}, got {0}")]
    Macs(u64),
    /// No sizes, or a size given twice.
    #[error("{0}")]
    Outputs(String),
    /// A model whose MACs cannot be counted (names the node).
    #[error("cannot count the MACs of {0}")]
    Uncounted(String),
}

/// What to build.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepRequest {
    /// Multiply-accumulates per inference (about).
    pub macs: u64,
    /// Output sizes in bytes (multiples of 4).
    pub outputs: Vec<u64>,
    /// Seed of the weights.
    pub seed: u64,
}

/// One generated model and its facts (the manifest's entry).
#[derive(Debug, Clone, Serialize)]
pub struct SweepModel {
    /// File name: `sweep_<bytes>B.onnx`.
    pub file: String,
    /// Exact multiply-accumulates per inference.
    pub macs: u64,
    /// Output bytes (float32, `[1, E]`).
    pub output_bytes: u64,
    /// Input `x` shape `[R, K]`.
    pub input_shape: Vec<usize>,
    /// Output `y` shape `[1, E]`.
    pub output_shape: Vec<usize>,
    /// The model.
    #[serde(skip)]
    pub model: Model,
}

/// `(R, K)` for `macs` (see the module docs): the largest `K <= 1024`
/// whose `R·K²` is within 0.01% of `macs` (or as close as any `K` gets),
/// so the input `[R, K]` stays small.
pub fn matmul_dims(macs: u64) -> (u64, u64) {
    let cands: Vec<(u64, u64, u64)> = (1..=MAX_K)
        .take_while(|k| k * k <= macs.max(1))
        .map(|k| {
            let r = ((macs as f64) / (k * k) as f64).round().max(1.0) as u64;
            (r, k, (r * k * k).abs_diff(macs))
        })
        .collect();
    let best = cands.iter().map(|c| c.2).min().unwrap_or(0);
    let tol = best.max(macs / 10_000);
    cands
        .into_iter()
        .filter(|c| c.2 <= tol)
        .max_by_key(|c| c.1)
        .map_or((1, 1), |(r, k, _)| (r, k))
}

fn check_outputs(outputs: &[u64]) -> Result<(), SweepError> {
    if outputs.is_empty() {
        return Err(SweepError::Outputs("no output sizes given".into()));
    }
    for (i, &b) in outputs.iter().enumerate() {
        if b == 0 || b % 4 != 0 {
            return Err(SweepError::NotFloat32 {
                bytes: b,
                below: (b / 4 * 4).max(4),
                above: (b / 4 + 1) * 4,
            });
        }
        if outputs[..i].contains(&b) {
            return Err(SweepError::Outputs(format!(
                "output size {b} B is given twice"
            )));
        }
    }
    Ok(())
}

/// Builds one model per output size.
pub fn build_sweep(req: &SweepRequest) -> Result<Vec<SweepModel>, SweepError> {
    if req.macs == 0 || req.macs > MAX_MACS {
        return Err(SweepError::Macs(req.macs));
    }
    check_outputs(&req.outputs)?;
    let (r, k) = matmul_dims(req.macs);
    let mut rng = SplitMix::new(mix(req.seed));
    let scale = 1.0 / (k as f32).sqrt();
    let w: Vec<f32> = (0..k * k).map(|_| rng.next_signed_unit() * scale).collect();
    let w = Tensor::from_vec(vec![k as usize, k as usize], w).expect("k*k values");
    Ok(req
        .outputs
        .iter()
        .map(|&bytes| {
            let e = bytes / 4;
            SweepModel {
                file: format!("sweep_{bytes}B.onnx"),
                macs: r * k * k,
                output_bytes: bytes,
                input_shape: vec![r as usize, k as usize],
                output_shape: vec![1, e as usize],
                model: sweep_model(r, k, e, &w),
            }
        })
        .collect())
}

fn i64s(v: &[i64]) -> Tensor {
    Tensor::from_vec(vec![v.len()], v.to_vec()).expect("1-d")
}

/// The model of one sweep point: `[r, k] @ w` then `e` outputs.
fn sweep_model(r: u64, k: u64, e: u64, w: &Tensor) -> Model {
    let n = (r * k) as i64;
    let reps = (e as i64 + n - 1) / n;
    let b = ModelBuilder::new(OPSET)
        .producer("qport sweep-models", env!("CARGO_PKG_VERSION"))
        .input("x", DType::F32, &[r as usize, k as usize])
        .initializer("W", w.clone())
        .initializer("flat_shape", i64s(&[1, n]))
        .initializer("starts", i64s(&[0]))
        .initializer("ends", i64s(&[e as i64]))
        .initializer("axes", i64s(&[1]))
        .node(Node::new("compute", "MatMul", ["x", "W"], ["h"]))
        .node(Node::new("flatten", "Reshape", ["h", "flat_shape"], ["hf"]));
    // Tile only when the output is larger than the MatMul's result
    let (b, src) = if reps > 1 {
        let b = b.initializer("reps", i64s(&[1, reps])).node(Node::new(
            "repeat",
            "Tile",
            ["hf", "reps"],
            ["ht"],
        ));
        (b, "ht")
    } else {
        (b, "hf")
    };
    b.node(Node::new(
        "cut",
        "Slice",
        [src, "starts", "ends", "axes"],
        ["y"],
    ))
    .output("y", DType::F32, &[1, e as usize])
    .build()
}

/// Multiply-accumulates of one inference of `model` (Conv, ConvTranspose,
/// Gemm, MatMul, from statically inferred shapes; fix dynamic input
/// dimensions first). Errors name a GEMM-class node whose shapes are not
/// known.
pub fn model_macs(model: &Model) -> Result<u64, SweepError> {
    let inferred = qport_onnx::infer_shapes(model);
    let values: qport_quant::qdq::ValueFacts = inferred
        .values()
        .iter()
        .filter_map(|(name, v)| {
            let shape = qport_onnx::infer::concrete_shape(v)?;
            Some((name.clone(), (v.dtype?, shape)))
        })
        .collect();
    let mut total = 0u64;
    for n in &model.graph.nodes {
        let gemm_class = ["Conv", "ConvTranspose", "Gemm", "MatMul"]
            .iter()
            .any(|op| n.is_onnx(op));
        if !gemm_class {
            continue;
        }
        let macs = qport_quant::ptq::node_macs(model, n, &values);
        if macs == 0 {
            return Err(SweepError::Uncounted(format!(
                "node `{}` ({}): its shapes are not known statically (fix dynamic input \
                 dimensions with --input-shape)",
                n.name, n.op_type
            )));
        }
        total += macs;
    }
    if total == 0 {
        return Err(SweepError::Uncounted(
            "the model: it has no Conv, ConvTranspose, Gemm or MatMul node".into(),
        ));
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dims_close_to_macs() {
        assert_eq!(matmul_dims(1), (1, 1));
        assert_eq!(matmul_dims(10), (10, 1));
        // EfficientNet-Lite0 at 224x224, and ResNet-50-sized requests
        for macs in [385_187_552u64, 4_100_000_000, 1_000_000, 655_360] {
            let (r, k) = matmul_dims(macs);
            assert!(
                (r * k * k).abs_diff(macs) <= macs / 10_000,
                "{macs}: {r} {k}"
            );
            assert!(
                macs < 100_000_000 || k >= 512,
                "{macs}: K {k}: the input [R, K] stays small"
            );
        }
    }

    #[test]
    fn sizes_must_be_float32_multiples() {
        let e = build_sweep(&SweepRequest {
            macs: 1000,
            outputs: vec![8, 10],
            seed: 0,
        })
        .unwrap_err();
        assert_eq!(
            e,
            SweepError::NotFloat32 {
                bytes: 10,
                below: 8,
                above: 12
            }
        );
        let twice = SweepRequest {
            macs: 1000,
            outputs: vec![8, 8],
            seed: 0,
        };
        assert!(build_sweep(&twice)
            .unwrap_err()
            .to_string()
            .contains("twice"));
        let none = SweepRequest {
            macs: 0,
            outputs: vec![8],
            seed: 0,
        };
        assert_eq!(build_sweep(&none).unwrap_err(), SweepError::Macs(0));
    }

    #[test]
    fn same_macs_counted_back_and_deterministic() {
        let req = SweepRequest {
            macs: 300_000,
            outputs: vec![3920, 256_368],
            seed: 5,
        };
        let a = build_sweep(&req).unwrap();
        let b = build_sweep(&req).unwrap();
        for (m, n) in a.iter().zip(&b) {
            assert_eq!(model_macs(&m.model).unwrap(), m.macs);
            assert_eq!(
                qport_onnx::to_bytes(&m.model),
                qport_onnx::to_bytes(&n.model)
            );
            qport_onnx::validate(&m.model.graph).unwrap();
        }
        // qport's engine runs them: exactly the requested output bytes
        for m in &a {
            let x = Tensor::from_vec(
                m.input_shape.clone(),
                vec![0.5f32; m.input_shape.iter().product()],
            )
            .unwrap();
            let out = qport_engine::Plan::new(&m.model)
                .unwrap()
                .run(vec![("x".into(), x)])
                .unwrap();
            assert_eq!(out[0].1.shape(), &m.output_shape[..]);
            assert_eq!(out[0].1.len() as u64 * 4, m.output_bytes);
        }
        let other = build_sweep(&SweepRequest { seed: 6, ..req }).unwrap();
        assert_ne!(
            qport_onnx::to_bytes(&a[0].model),
            qport_onnx::to_bytes(&other[0].model)
        );
    }
}
