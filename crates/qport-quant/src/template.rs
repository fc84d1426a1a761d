//! The starting `quant_config` of each platform (the "platform experience
//! template" of the vendor manual), in four variants.
//!
//! The default variant follows the platform's `default_template`:
//! - `int8-int16` (J6E/M/B): global int8; sensitive ops are promoted to
//!   int16 later by the user or the tuning search (seed §J6E/M/B Starting
//!   Strategy: "int8 + int16 mixed accuracy, with int8 as the default").
//! - `float16-gemm-int8` (J6H/P/S6P): global float16, with Conv,
//!   ConvTranspose, Gemm, MatMul, Resize and GridSample in int8 (seed
//!   §J6H/P/S6P Starting Strategy).
//! - `int8` (host CPU, GPU and PCIe-NPU archetypes): global int8. Host CPUs
//!   get asymmetric (uint8) activations, the usual form for x86/Arm int8
//!   kernels; GPU and PCIe-NPU get symmetric activations.
//! - any other name (a platform added by TOML): global int8 when the platform
//!   runs int8, else its first precision.
//!
//! Every variant sets: `model_output_type` float32; activations per-tensor,
//! `calibration_type` `["max", "kl"]` (a search keeping the better of the
//! two by output cosine, the vendor default), `num_bin` 1024, `max_num_bin`
//! 16384, `max_percentile` 0.99995 (used by the `percentile` calibrator when
//! a user adds it); weights per-channel symmetric; and the `qport` section
//! (platform, template name, high-accuracy tail output form).

use crate::config::{
    ActivationConfig, ConfigError, ModelConfig, NodeEntry, OneOrMany, QportMeta, QuantConfig,
    WeightConfig,
};
use crate::types::{CalibMethod, Precision};
use qport_platform::Platform;

/// A template variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Template {
    /// The platform's default starting point (its `default_template`).
    Default,
    /// Every node int16: the accuracy upper bound of fixed point (seed
    /// §J6E/M/B step 3, "full int16 calibration").
    FullInt16,
    /// Every node int8, calibration `max` only: a quick performance baseline
    /// (the vendor's `--fast-perf`; the CLI feeds synthetic samples).
    FastPerf,
    /// Every node int8 with the default calibration search.
    Int8,
}

impl Template {
    /// Every variant, in listing order.
    pub const ALL: [Template; 4] = [
        Template::Default,
        Template::FullInt16,
        Template::FastPerf,
        Template::Int8,
    ];

    /// Name as written on the command line and in `qport.template`.
    pub fn name(self) -> &'static str {
        match self {
            Template::Default => "default",
            Template::FullInt16 => "full-int16",
            Template::FastPerf => "fast-perf",
            Template::Int8 => "int8",
        }
    }

    /// The variant called `name` (case-insensitive, `_` accepted for `-`);
    /// the error lists the valid names.
    pub fn from_name(name: &str) -> Result<Template, ConfigError> {
        let want = name.trim().to_ascii_lowercase().replace('_', "-");
        Template::ALL
            .into_iter()
            .find(|t| t.name() == want)
            .ok_or_else(|| ConfigError::UnknownTemplate {
                name: name.to_string(),
                valid: Template::ALL.map(Template::name).join(", "),
            })
    }
}

impl std::fmt::Display for Template {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Op types kept in int8 by the `float16-gemm-int8` template.
pub const FLOAT16_TEMPLATE_INT8_OPS: [&str; 6] = [
    "Conv",
    "ConvTranspose",
    "Gemm",
    "MatMul",
    "Resize",
    "GridSample",
];

/// The starting config of `platform` in the given variant.
///
/// ```
/// use qport_platform::Registry;
/// use qport_quant::template::{template, Template};
/// use qport_quant::Precision;
///
/// let r = Registry::builtin();
/// let c = template(r.get("j6p").unwrap(), Template::Default);
/// let mc = c.model_config.as_ref().unwrap();
/// assert_eq!(mc.all_node_type, Some(Precision::Float16));
/// assert_eq!(c.op_config["MatMul"].qtype, Some(Precision::Int8));
/// ```
pub fn template(platform: &Platform, variant: Template) -> QuantConfig {
    let host_cpu = platform.family == "host-cpu";
    let global = match variant {
        Template::FullInt16 => Precision::Int16,
        Template::FastPerf | Template::Int8 => Precision::Int8,
        Template::Default => match platform.default_template.as_str() {
            "float16-gemm-int8" => Precision::Float16,
            "int8-int16" | "int8" => Precision::Int8,
            _ if platform.precisions.contains(&Precision::Int8) => Precision::Int8,
            _ => platform
                .precisions
                .first()
                .copied()
                .unwrap_or(Precision::Int8),
        },
    };
    let mut op_config = std::collections::BTreeMap::new();
    if variant == Template::Default && platform.default_template == "float16-gemm-int8" {
        for op in FLOAT16_TEMPLATE_INT8_OPS {
            op_config.insert(
                op.to_string(),
                NodeEntry {
                    qtype: Some(Precision::Int8),
                    ..NodeEntry::default()
                },
            );
        }
    }
    let calibration = if variant == Template::FastPerf {
        OneOrMany::One(CalibMethod::Max)
    } else {
        OneOrMany::Many(vec![CalibMethod::Max, CalibMethod::Kl])
    };
    QuantConfig {
        model_config: Some(ModelConfig {
            all_node_type: Some(global),
            model_output_type: Some(Precision::Float32),
            activation: Some(ActivationConfig {
                calibration_type: Some(calibration),
                num_bin: Some(1024),
                max_num_bin: Some(16384),
                max_percentile: Some(OneOrMany::One(0.99995)),
                per_channel: Some(OneOrMany::One(false)),
                // hosts: u8 activations (the fast x86 path); otherwise both
                // symmetries are tried, as the vendor default
                // `asymmetric: [true, false]` does
                asymmetric: Some(if host_cpu {
                    OneOrMany::One(true)
                } else {
                    OneOrMany::Many(vec![true, false])
                }),
                ema_momentum: None,
                power_of_two: None,
            }),
            weight: Some(WeightConfig {
                per_channel: Some(true),
                asymmetric: Some(false),
                power_of_two: None,
                bias_correction: None,
            }),
            modelwise_search: None,
            layerwise_search: None,
        }),
        op_config,
        qport: Some(QportMeta {
            platform: Some(platform.name.clone()),
            template: Some(variant.name().to_string()),
            tail_output: Some(platform.tail_output),
        }),
        ..QuantConfig::default()
    }
}
