//! The named arithmetic presets. Each is an archetype that differs from
//! `f32-rne` (the onnxruntime CPU arithmetic on cores with a dot-product
//! instruction) in as few policies as possible, so that a study comparing
//! them attributes a divergence to one policy. None is a claim about a
//! particular vendor's silicon.
//!
//! Each preset also says which QDQ groups it runs as integer operators
//! ([`Lowering`]): the two that model onnxruntime's CPU kernels
//! (`f32-rne`, `avx2-u8s8`) lower what onnxruntime fuses on this host,
//! `ort-unfused` nothing, and the integer-target archetypes (`exact`,
//! `gemmlowp`, `pot-shift`, `float-bias`, `fp16-epilogue`) every group
//! qport can lower.
//!
//! Sources are cited by name in each preset's `sources`:
//! "study §N" is the measurement study "Is INT8 Portable?"
//! (`shared/seeds/004_…`); "fixtures.md" is
//! `shared/reference/fixtures.md` (onnxruntime measurements on an AVX2
//! machine without VNNI).

use super::{
    Accumulator, ArithProfile, BiasPlacement, Epilogue, Lowering, NonGemm, Requant, Rounding,
};

/// Names of the presets, in listing order.
pub const PRESET_NAMES: [&str; 8] = [
    "exact",
    "f32-rne",
    "avx2-u8s8",
    "ort-unfused",
    "gemmlowp",
    "pot-shift",
    "float-bias",
    "fp16-epilogue",
];

const STUDY_C2: &str = "study §5 (C2), Table 3: INT8 agreement is 1000/1000 when two targets \
                        share an integer kernel, 958-965/1000 when they do not";
const ONNX_QLINEARCONV: &str = "ONNX QLinearConv: bias is int32 with scale x_scale*w_scale and \
                                zero point 0 (https://onnx.ai/onnx/operators/onnx__QLinearConv.html)";
const ONNX_QUANTIZE: &str = "ONNX QuantizeLinear rounds half to even \
                             (https://onnx.ai/onnx/operators/onnx__QuantizeLinear.html)";
const MLAS: &str = "onnxruntime MLAS requantization: f32(acc) * f32 scale, rounded to nearest \
                    even, plus zero point, saturated (fixtures.md; \
                    onnxruntime/core/mlas/lib/quantize.cpp)";
const GEMMLOWP: &str = "gemmlowp fixed point: SaturatingRoundingDoublingHighMul and \
                        RoundingDivideByPOT (https://github.com/google/gemmlowp, \
                        doc/quantization.md, fixedpoint/fixedpoint.h)";
const TFLITE: &str = "TFLite quantization spec: int8 with int32 bias at scale s_in*s_w, \
                      multiplier as Q31 + shift (https://www.tensorflow.org/lite/performance/\
                      quantization_spec; QuantizeMultiplier in \
                      tensorflow/lite/kernels/internal/quantization_util.cc)";

const ORT_FUSION: &str = "lowering onnxruntime: the QDQ groups onnxruntime 1.32's CPU execution \
                          provider fuses on this host's architecture \
                          (onnxruntime/core/optimizer/qdq_transformer/selectors_actions/\
                          qdq_selectors.cc; off ARM no Conv / MatMul with int8 activations, \
                          QDQIsInt8Allowed)";
const ALL_GROUPS: &str =
    "lowering all: integer targets (NPUs, DSPs, TFLite-style kernels) run every \
                          quantized group in integers, int8 and uint8 activations alike";
const ORT_UNFUSED: &str = "onnxruntime SessionOptions.graph_optimization_level = ORT_DISABLE_ALL: \
                           no QDQ fusion, every QuantizeLinear / DequantizeLinear and the float \
                           operators between them run as written \
                           (https://onnxruntime.ai/docs/performance/model-optimizations/\
                           graph-optimizations.html)";

#[allow(clippy::too_many_arguments)]
fn profile(
    name: &str,
    description: &str,
    accumulator: Accumulator,
    requant: Requant,
    rounding: Rounding,
    bias: BiasPlacement,
    epilogue: Epilogue,
    non_gemm: NonGemm,
    lowering: Lowering,
    sources: &[&str],
) -> ArithProfile {
    ArithProfile {
        name: name.into(),
        description: description.into(),
        accumulator,
        requant,
        rounding,
        bias,
        epilogue,
        non_gemm,
        lowering,
        sources: sources.iter().map(|s| s.to_string()).collect(),
    }
}

/// The presets, in listing order (names in [`PRESET_NAMES`]):
///
/// - **`exact`**: exact i32 accumulation, f64 requantization, half-even,
///   int32 bias, f64 epilogue, float non-GEMM ops. The reference every other
///   profile is measured against: the QDQ graph's integer semantics with the
///   least rounding a machine adds (ONNX QuantizeLinear's half-even).
/// - **`f32-rne`**: exact i32, f32 requant, half-even, int32 bias, f32
///   epilogue. onnxruntime's CPU (MLAS) arithmetic where the dot product is
///   exact: x86 with VNNI (`vpdpbusd` sums four u8×s8 products straight into
///   i32, no int16 intermediate; Intel Intrinsics Guide
///   `_mm512_dpbusd_epi32`), Arm with the dot-product extension (`SDOT`,
///   Armv8.2-A), or AVX2 with `session.x64quantprecision=1`. The study's
///   Pi 5 A76 and Orin A78AE share this kernel and agree 1000/1000 (§5,
///   Table 3) and it is the fast INT8 path of §4 (Table 2).
/// - **`avx2-u8s8`**: `f32-rne` with the AVX2 u8×s8 accumulator: `vpmaddubsw`
///   multiplies u8 by s8 and adds adjacent pairs with int16 saturation
///   (Intel Intrinsics Guide `_mm256_maddubs_epi16`), then `vpmaddwd` and
///   `vpaddd` widen to i32. fixtures.md: `MatMulInteger` K=64, A=255,
///   B=127 returns 1,048,544 instead of 2,072,640; on EfficientNet-Lite0
///   top-1 agreement with FP32 is 131/152 by default and 144/152 with
///   `x64quantprecision=1`; the same QDQ ResNet-50 scores 74.76% on VNNI and
///   Arm, 68.95% on an AVX2 server. The study's i9-10900K (no VNNI) is the
///   slow-INT8 CPU of §4 and a 958-961/1000 pair of §5.
/// - **`ort-unfused`**: onnxruntime's session with graph optimizations
///   disabled (`ORT_DISABLE_ALL`): no QDQ group is fused (lowering
///   `none`), so the artifact runs in float as written, every
///   QuantizeLinear rounding half to even; the arithmetic fields are
///   `f32-rne`'s and only reach the QuantizeLinear nodes. The optimization
///   level of one runtime is a target of its own: the same artifact under
///   `f32-rne` (onnxruntime's default session) and `ort-unfused` differs
///   wherever a fused integer kernel rounds otherwise than the float
///   operator between a dequantize and a quantize.
/// - **`gemmlowp`**: exact i32, Q31 multiplier + shift, half-away (the
///   final `RoundingDivideByPOT`), int32 bias, fixed-point non-GEMM ops.
///   The integer-only pipeline of gemmlowp and TFLite's int8 kernels,
///   common on microcontrollers and fixed-point NPUs/DSPs.
/// - **`pot-shift`**: exact i32, the multiplier rounded to a power of two
///   and applied as a shift with half-up rounding (add `2^(n−1)`, shift),
///   fixed-point non-GEMM ops: shift-only integer hardware. The study
///   (§5, §11) rewrote scales to powers of two as a mitigation and found it
///   does not transfer across the x86 ↔ A76 boundary (958 → 869 with ceil,
///   919 with nearest).
/// - **`float-bias`**: `f32-rne` with the bias kept in float and added
///   after scaling (runtimes whose requantize step takes a float bias, e.g.
///   ncnn's Requantize layer: int32 × input scale + float bias, then the
///   output scale). Isolates bias placement: an int32 bias is rounded once
///   at quantization time, a float bias never is.
/// - **`fp16-epilogue`**: exact i32 accumulation, f32 scale, the scaled
///   value and a float bias held in f16 before rounding: GPU INT8 kernels
///   (`dp4a`/tensor-core IMMA accumulate exactly in i32; CUTLASS epilogues
///   compute the linear combination in a configurable element type, half
///   included). The study's Orin iGPU (TensorRT) vs A78AE (MLAS) pair agrees
///   961/1000 (§5, Table 3); "The Integer Alibi" (listed with the study)
///   localizes GPU INT8 divergence to scale application and output rounding
///   after the exact accumulator.
pub fn presets() -> Vec<ArithProfile> {
    use Accumulator::{ExactI32, I16SatPairs};
    use BiasPlacement::{FloatAfterScale, Int32Accumulator};
    vec![
        profile(
            "exact",
            "reference: exact i32 accumulation, f64 scale, half-even",
            ExactI32,
            Requant::F64,
            Rounding::HalfEven,
            Int32Accumulator,
            Epilogue::F64,
            NonGemm::Float,
            Lowering::All,
            &[ONNX_QUANTIZE, ONNX_QLINEARCONV, ALL_GROUPS],
        ),
        f32_rne(),
        profile(
            "avx2-u8s8",
            "x86 AVX2 without VNNI: u8*s8 pairs saturated to int16 (vpmaddubsw)",
            I16SatPairs,
            Requant::F32,
            Rounding::HalfEven,
            Int32Accumulator,
            Epilogue::F32,
            NonGemm::Float,
            Lowering::Onnxruntime,
            &[
                ORT_FUSION,
                "Intel Intrinsics Guide: _mm256_maddubs_epi16 / vpmaddubsw multiplies u8 by s8 \
                 and adds adjacent pairs with signed int16 saturation",
                "fixtures.md: MatMulInteger K=64, A=255, B=127 gives 1,048,544 (exact \
                 2,072,640); EfficientNet-Lite0 agreement 131/152 vs 144/152 with \
                 session.x64quantprecision=1",
                "study §4 (C1), Table 2: i9-10900K without VNNI is 1.76x slower in INT8",
                STUDY_C2,
                MLAS,
            ],
        ),
        profile(
            "ort-unfused",
            "onnxruntime with graph optimizations disabled: no QDQ group fused, all in float",
            ExactI32,
            Requant::F32,
            Rounding::HalfEven,
            Int32Accumulator,
            Epilogue::F32,
            NonGemm::Float,
            Lowering::None,
            &[
                ORT_UNFUSED,
                "issue 13: the optimization level of one runtime is itself a target",
            ],
        ),
        profile(
            "gemmlowp",
            "integer-only: Q31 multiplier + rounding shift (gemmlowp, TFLite)",
            ExactI32,
            Requant::Q31Shift,
            Rounding::HalfAway,
            Int32Accumulator,
            Epilogue::F32,
            NonGemm::FixedPoint,
            Lowering::All,
            &[GEMMLOWP, TFLITE, ALL_GROUPS],
        ),
        profile(
            "pot-shift",
            "shift-only hardware: multiplier rounded to a power of two, half-up shift",
            ExactI32,
            Requant::PotShift,
            Rounding::HalfUp,
            Int32Accumulator,
            Epilogue::F32,
            NonGemm::FixedPoint,
            Lowering::All,
            &[
                ALL_GROUPS,
                "study §5, §11: power-of-two scales do not restore x86 <-> A76 agreement \
                 (958 -> 869 ceil / 919 nearest)",
                "half-up rounding shift: add 2^(n-1), arithmetic shift right by n",
            ],
        ),
        profile(
            "float-bias",
            "f32-rne with the bias added in float after scaling",
            ExactI32,
            Requant::F32,
            Rounding::HalfEven,
            FloatAfterScale,
            Epilogue::F32,
            NonGemm::Float,
            Lowering::All,
            &[
                ALL_GROUPS,
                "ncnn Requantize layer (src/layer/requantize.cpp): int32 * scale_in + float \
                 bias, then * scale_out",
                ONNX_QLINEARCONV,
                MLAS,
            ],
        ),
        profile(
            "fp16-epilogue",
            "GPU-like: exact i32 accumulation, scale and bias held in f16",
            ExactI32,
            Requant::F32,
            Rounding::HalfEven,
            FloatAfterScale,
            Epilogue::F16,
            NonGemm::Float,
            Lowering::All,
            &[
                ALL_GROUPS,
                "study §5 (C2), Table 3: Orin iGPU (TensorRT) vs A78AE (MLAS) 961/1000",
                "'The Integer Alibi' (listed with the study): with an exact int32 dot product, \
                 GPU INT8 divergence lies in scale application and output rounding",
                "CUTLASS epilogues: linear combination computed in a configurable element \
                 type, half included (https://github.com/NVIDIA/cutlass)",
            ],
        ),
    ]
}

/// The `f32-rne` preset: onnxruntime's CPU arithmetic (see [`presets`]).
pub(super) fn f32_rne() -> ArithProfile {
    profile(
        "f32-rne",
        "onnxruntime MLAS with an exact dot product (x86 VNNI, Arm SDOT)",
        Accumulator::ExactI32,
        Requant::F32,
        Rounding::HalfEven,
        BiasPlacement::Int32Accumulator,
        Epilogue::F32,
        NonGemm::Float,
        Lowering::Onnxruntime,
        &[
            MLAS,
            ORT_FUSION,
            "Intel Intrinsics Guide: _mm512_dpbusd_epi32 / vpdpbusd (AVX512-VNNI, AVX-VNNI) \
             sums u8*s8 products into i32 without an int16 stage",
            "Arm A64 SDOT (Armv8.2-A dot product): i8*i8 products summed into i32",
            "study §4 (C1), Table 2: dot-product CPUs gain 1.83-2.11x from INT8",
            STUDY_C2,
        ],
    )
}
