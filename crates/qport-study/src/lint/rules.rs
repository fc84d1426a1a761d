//! The catalogue of lint rules: id, default severity, what it flags, the
//! fix, and where the rule comes from. A finding may raise or lower its
//! rule's default severity where the platform data says so (external
//! scales are a warning where the native flow recalibrates, an error where
//! its compiler refuses QDQ graphs).

use qport_platform::Severity;

/// One lint rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// Stable identifier (`external-scales`), what `--allow` takes.
    pub id: &'static str,
    /// Default severity: `error` the platform rejects it, `warning` it is
    /// silently ignored or handled differently, `info` for the record.
    pub severity: Severity,
    /// One line on what the rule flags.
    pub summary: &'static str,
    /// How to fix or silence it.
    pub help: &'static str,
    /// Where the rule comes from: a section of the vendor manual, the
    /// study, the ONNX specification or a platform registry field.
    pub source: &'static str,
}

use Severity::{Error, Info, Warning};

/// Every rule, in report order.
pub const RULES: &[Rule] = &[
    Rule {
        id: "external-scales",
        severity: Warning,
        summary: "activation scale carried in QDQ nodes that the platform's own flow replaces (or refuses)",
        help: "give the native flow the float model and calibration data (hb_compile calibration_parameters); compare the deployed model's outputs with this artifact's instead of assuming its scales survive",
        source: "Is INT8 Portable? (Shin 2026) §6 C3 (external scales ignored: accuracy 0.75 -> 0.005, no error; or the compiler refuses the graph); platform registry `byo_qdq`",
    },
    Rule {
        id: "per-channel-activation",
        severity: Warning,
        summary: "activation quantized per channel where the platform's template quantizes activations per tensor",
        help: "re-quantize activations per tensor, or let the native calibrator decide (quant_config activation.per_channel)",
        source: "OE manual, quant_config (activation.per_channel); qport platform template (activations per tensor)",
    },
    Rule {
        id: "asymmetric-weight",
        severity: Warning,
        summary: "weight with a non-zero zero point where the platform quantizes weights symmetrically",
        help: "quantize weights symmetric (int8, zero point 0), per output channel",
        source: "OE manual, quant_config (weight has no asymmetric option); qport platform template (weights per-channel symmetric)",
    },
    Rule {
        id: "weight-axis",
        severity: Warning,
        summary: "per-channel weight scales along an axis other than the output channel",
        help: "quantize weights per output channel: axis 0 for Conv and Gemm(transB=1), 1 for ConvTranspose and Gemm(transB=0), the last axis for MatMul",
        source: "OE manual, runtime tensor descriptor (quantizeAxis); qport platform template (weights per channel)",
    },
    Rule {
        id: "non-pot-scale",
        severity: Warning,
        summary: "scale that is not a power of two on a target whose requantization is a bare shift",
        help: "rewrite the scales to powers of two (quant_config power_of_two; `qport agree --pot nearest` measures the effect) and re-check accuracy",
        source: "Is INT8 Portable? (Shin 2026) §5/§11 (power-of-two scales); platform registry `default_arith_profile` (requant pot-shift)",
    },
    Rule {
        id: "unsupported-precision",
        severity: Error,
        summary: "node computing in a precision (int16, float16, float32) the platform does not run",
        help: "change the node's precision to one the platform lists (`qport platforms`), e.g. int16 -> int8 or float16 -> int16",
        source: "OE manual, Platform Differences > Quantization Strategy Differences; platform registry `precisions`",
    },
    Rule {
        id: "float32-node",
        severity: Warning,
        summary: "compute node left in float32: the native flow quantizes it per its template or places it on the CPU (a Relu/Clip/LeakyRelu/HardSwish/HardSigmoid fused into the quantized Conv/Gemm/MatMul/Add it solely reads, with a quantized output, is not counted)",
        help: "quantize the node (int8/int16, or float16 where the platform runs it) or mark it float32 with ON: CPU in quant_config knowingly",
        source: "OE manual, quant_config (node_config qtype float32 with ON: CPU); OE manual, Platform Differences > ONNX Model Quantization Platform Differences",
    },
    Rule {
        id: "template-precision",
        severity: Info,
        summary: "quantized node whose precision differs from the platform's starting template (the native flow re-decides it)",
        help: "expect the native flow to start this op at the template's precision (`qport quantize --platform P` writes the template); pin it in quant_config node_config if the artifact's precision matters",
        source: "OE manual, Platform Differences > ONNX Model Quantization Platform Differences (J6E/M/B int8 + int16; J6H/P/S6P float16 + int8 GEMMs); platform registry `default_template`",
    },
    Rule {
        id: "concat-requant",
        severity: Warning,
        summary: "Concat whose inputs and output have different scales: the target inserts a requantization",
        help: "give every Concat input the output's scale and zero point (share one QDQ parameter set)",
        source: "Is INT8 Portable? (Shin 2026) §5 (integer results differ where requantization differs); ONNX QDQ semantics",
    },
    Rule {
        id: "add-requant",
        severity: Info,
        summary: "Add whose quantized inputs have different scales: each input is rescaled in integers on the target",
        help: "nothing to do unless the Add is accuracy-sensitive; then promote it to int16",
        source: "Is INT8 Portable? (Shin 2026) §5 (integer results differ where requantization differs); ONNX QDQ semantics",
    },
    Rule {
        id: "tail-output-form",
        severity: Info,
        summary: "model output produced by a GEMM-class tail, whose high-accuracy output form the platform fixes",
        help: "drop the 8-bit output quantization of the tail and compare against the platform's form (int32 + software dequantize, or float32)",
        source: "OE manual, Platform Differences > High-Accuracy Output Form Differences; platform registry `tail_output`",
    },
    Rule {
        id: "nv12-odd-size",
        severity: Warning,
        summary: "3-channel image input with an odd height or width: it cannot be fed as nv12",
        help: "resize the model input to even H and W, or feed it as rgb/bgr/featuremap",
        source: "OE manual, hb_compile input_type_rt (nv12 needs even H, W); OE manual, Platform Differences > stride, padding, and aligned byte size Differences",
    },
    Rule {
        id: "image-channels",
        severity: Info,
        summary: "4-D input whose channel count is not 3: not an nv12/rgb image, it is fed as a featuremap",
        help: "if it is an image, give it 3 channels (NCHW or NHWC); else allocate it by alignedByteSize (`qport layout`)",
        source: "OE manual, hb_compile input_type_rt (nv12/rgb/bgr/yuv444 are 3-channel); platform registry `image_stride_align`, `min_memory_unit`",
    },
    Rule {
        id: "dynamic-dim",
        severity: Warning,
        summary: "graph input or output with a symbolic or unknown dimension: the compiler needs fixed shapes",
        help: "export the model with fixed shapes (or set input_shape in the hb_compile YAML) and calibrate at that shape",
        source: "OE manual, hb_compile input_parameters (input_shape); OE manual, Platform Differences > pyramid / resizer Input Differences",
    },
    Rule {
        id: "blocked-quant",
        severity: Error,
        summary: "blocked quantization (QuantizeLinear/DequantizeLinear `block_size`), which the parser does not take",
        help: "quantize per tensor or per channel instead of per block",
        source: "ONNX DequantizeLinear-21 (block_size); platform registry `precisions` (no blocked form)",
    },
    Rule {
        id: "subbyte-grid",
        severity: Error,
        summary: "int4/uint4 (or 2-bit) QDQ grid, which no listed platform precision covers",
        help: "quantize to int8 (or int16 where the platform runs it)",
        source: "ONNX QuantizeLinear-21 (int4/uint4); platform registry `precisions`",
    },
    Rule {
        id: "float8-grid",
        severity: Error,
        summary: "float8 QDQ grid, which no listed platform precision covers",
        help: "quantize to int8, or keep the node in float16 where the platform runs it",
        source: "ONNX QuantizeLinear-19 (float8 types); platform registry `precisions`",
    },
    Rule {
        id: "opset-qdq-form",
        severity: Error,
        summary: "QDQ form newer than the model's opset (per-axis before 13, 16-bit before 21): an invalid graph for any parser",
        help: "raise the default-domain opset (13 for per-channel, 21 for int16/uint16 QDQ) or change the form",
        source: "ONNX QuantizeLinear/DequantizeLinear-13 (axis) and -21 (16-bit types)",
    },
    Rule {
        id: "non-standard-op",
        severity: Error,
        summary: "operator outside the ONNX default domain or in QOperator form (QLinearConv, com.microsoft ops)",
        help: "export the QDQ form with default-domain operators only (onnxruntime quantize_static quant_format=QDQ, no contrib ops)",
        source: "OE manual, quant_config (op_config keys are ONNX operator types); Is INT8 Portable? (Shin 2026) §6 C3 (only the native path yields a correct engine)",
    },
    Rule {
        id: "qdq-pair-mismatch",
        severity: Warning,
        summary: "QuantizeLinear -> DequantizeLinear pair with different scales or zero points: a hidden rescale",
        help: "give both halves of the pair the same scale and zero point; put an explicit Mul where a rescale is meant",
        source: "ONNX QDQ semantics (a pair is one tensor's quantization; a compiler folding it keeps one parameter set)",
    },
];

/// The rule called `id`.
pub fn rule(id: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.id == id)
}

/// Every rule id, comma-separated, for error messages.
pub fn rule_ids() -> String {
    RULES.iter().map(|r| r.id).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_kebab_case_and_sourced() {
        let mut ids: Vec<&str> = RULES.iter().map(|r| r.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), RULES.len());
        assert!(RULES.len() >= 12);
        for r in RULES {
            assert!(
                r.id.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{}",
                r.id
            );
            assert!(!r.source.is_empty() && !r.help.is_empty() && !r.summary.is_empty());
        }
        assert!(RULES
            .iter()
            .any(|r| r.source.contains("OE manual, Platform Differences")));
        assert!(RULES.iter().any(|r| r.source.contains("Is INT8 Portable?")));
    }
}
