//! Lint of a QDQ artifact for one platform: what the platform's native
//! flow will ignore, reject or handle differently (`qport lint`).
//!
//! The study (seed 004, §6) found that vendor NPUs own quantization: a
//! bring-your-own QDQ graph compiled and ran on one NPU with its external
//! scales silently replaced (accuracy 0.75 → 0.005) and was refused by the
//! other's compiler. The vendor manual adds the platform facts: precisions,
//! high-accuracy tail output form, image input rules. Every rule in
//! [`RULES`] reads those facts from the [`Platform`] record (its
//! `byo_qdq`, `precisions`, `tail_output`, `image_stride_align`,
//! `default_arith_profile`) and from the platform's starting template
//! ([`qport_quant::template`]), not from platform names.
//!
//! The QDQ structure comes from [`qport_quant::import`] (activation and
//! weight parameters, node precisions, the float graph); the forms that
//! import cannot read (blocked, 4-bit, float8) are checked on the raw graph
//! first, so a model that fails import still gets those findings.
//!
//! ```
//! use qport_core::{DType, Tensor};
//! use qport_onnx::graph::ModelBuilder;
//! use qport_platform::Registry;
//! // x -> Q -> DQ -> Relu: one activation with an external scale
//! let m = ModelBuilder::new(13)
//!     .input("x", DType::F32, &[1, 4])
//!     .initializer("s", Tensor::scalar(0.1f32))
//!     .initializer("z", Tensor::scalar(0u8))
//!     .op("QuantizeLinear", ["x", "s", "z"], ["xq"])
//!     .op("DequantizeLinear", ["xq", "s", "z"], ["xd"])
//!     .op("Relu", ["xd"], ["y"])
//!     .output("y", DType::F32, &[1, 4])
//!     .build();
//! let r = Registry::builtin();
//! let j6m = qport_study::lint::lint(&m, r.get("j6m").unwrap()).unwrap();
//! assert_eq!(j6m.count_rule("external-scales"), 1);
//! let host = qport_study::lint::lint(&m, r.get("x86-vnni").unwrap()).unwrap();
//! assert_eq!(host.count_rule("external-scales"), 0);
//! ```

mod checks;
mod fused;
mod rules;
mod sarif;

pub use rules::{rule, rule_ids, Rule, RULES};
pub use sarif::to_sarif;

use crate::StudyError;
use qport_platform::{Platform, Severity};
use serde::Serialize;
use std::collections::BTreeMap;

/// One finding: a rule that fired on some nodes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LintFinding {
    /// The rule's id (see [`RULES`]).
    pub rule: &'static str,
    /// Severity of this finding (the rule's default unless the platform
    /// data says otherwise).
    pub severity: Severity,
    /// What was found, naming the platform and the values.
    pub message: String,
    /// The offending node names (of the artifact; a graph input or output
    /// has none).
    pub nodes: Vec<String>,
    /// The tensors concerned (values or initializers).
    pub tensors: Vec<String>,
}

/// What the artifact holds in QDQ terms, so a clean lint of a float model
/// says how little it checked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct QdqCensus {
    /// QuantizeLinear nodes.
    pub quantize_nodes: usize,
    /// DequantizeLinear nodes.
    pub dequantize_nodes: usize,
    /// Activations with QDQ parameters (from the import).
    pub quantized_activations: usize,
    /// Weights and biases stored as integers (from the import).
    pub quantized_weights: usize,
    /// Values and constants rounded to float16 (Cast pairs).
    pub float16_values: usize,
    /// Whether the QDQ import succeeded (the rules that need it ran).
    pub imported: bool,
}

/// The result of [`lint`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LintReport {
    /// The platform linted for.
    pub platform: String,
    /// What the artifact holds.
    pub census: QdqCensus,
    /// The findings, in rule order (within a rule, in the order found:
    /// graph nodes in order, quantized tensors by name).
    pub findings: Vec<LintFinding>,
    /// What was not checked and why, in words.
    pub notes: Vec<String>,
}

impl LintReport {
    /// Findings of severity `s`.
    pub fn count(&self, s: Severity) -> usize {
        self.findings.iter().filter(|f| f.severity == s).count()
    }

    /// Findings of the rule `id`.
    pub fn count_rule(&self, id: &str) -> usize {
        self.findings.iter().filter(|f| f.rule == id).count()
    }

    /// Findings per rule id (rules without findings left out).
    pub fn counts_by_rule(&self) -> BTreeMap<&'static str, usize> {
        let mut m = BTreeMap::new();
        for f in &self.findings {
            *m.entry(f.rule).or_default() += 1;
        }
        m
    }

    /// Drops the findings of the rules in `ids`, which must all be rule
    /// ids; the error lists the valid ones.
    pub fn allow(&mut self, ids: &[String]) -> Result<(), StudyError> {
        if let Some(bad) = ids.iter().find(|i| rule(i).is_none()) {
            return Err(StudyError::Input(format!(
                "unknown lint rule `{bad}`; valid rules: {}",
                rule_ids()
            )));
        }
        self.findings.retain(|f| !ids.iter().any(|i| i == f.rule));
        Ok(())
    }

    /// True when some finding has severity `error`, or `warning` too when
    /// `deny_warnings`.
    pub fn failed(&self, deny_warnings: bool) -> bool {
        self.findings.iter().any(|f| {
            f.severity == Severity::Error || (deny_warnings && f.severity == Severity::Warning)
        })
    }
}

/// Lints `model` (a QDQ artifact, or any ONNX model) for `platform`; see
/// the [module docs](self). Fails only when the platform names an unknown
/// arithmetic profile (a malformed registry override).
pub fn lint(model: &qport_onnx::Model, platform: &Platform) -> Result<LintReport, StudyError> {
    let profile = qport_core::arith::ArithProfile::preset(&platform.default_arith_profile)?;
    let mut c = checks::Checker::new(model, platform, profile);
    c.run();
    let (census, mut findings, notes) = c.finish();
    let order = |id: &str| RULES.iter().position(|r| r.id == id).unwrap_or(usize::MAX);
    // stable: node order within a rule is kept
    findings.sort_by_key(|f| order(f.rule));
    Ok(LintReport {
        platform: platform.name.clone(),
        census,
        findings,
        notes,
    })
}

#[cfg(test)]
#[path = "lint_tests.rs"]
mod tests;
