//! The platform registry: what each deployment target requires, as data.
//!
//! The built-in platforms are data in `platforms.toml` (embedded in the
//! binary), each with a comment naming its source: the platform-differences
//! chapter of the vendor manual and the vendor toolchain's documented
//! numbers. Host CPU, GPU and PCIe-NPU entries are qport archetypes (no
//! vendor claim): they have no padding rule.

use crate::PlatformError;
use serde::{Deserialize, Serialize};

/// A numeric precision a platform can execute (ordered int8 < int16 < float16 < float32).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// 8-bit integer.
    Int8,
    /// 16-bit integer.
    Int16,
    /// IEEE float16.
    Float16,
    /// IEEE float32.
    Float32,
}

/// The output form of the high-accuracy tail of GEMM-class operators
/// (seed §High-Accuracy Output Form Differences).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HighAccuracyOutput {
    /// The operator outputs int32, software dequantizes to float32 (J6E/M).
    Int32Dequantize,
    /// The operator outputs float32 directly (J6B/H/P/S6P, hosts).
    Float32,
}

/// An IP block a runtime task can be scheduled on (vt.md §Multi-core / L2M).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ip {
    /// The neural-network accelerator.
    Bpu,
    /// Digital signal processor.
    Dsp,
    /// Geometric distortion correction.
    Gdc,
    /// JPEG unit.
    Jpu,
    /// Video processing unit.
    Vpu,
    /// Image pyramid.
    Pyramid,
    /// Image signal processor.
    Isp,
}

/// What a platform's native flow does with a bring-your-own QDQ graph (one
/// quantized elsewhere, its scales in QuantizeLinear/DequantizeLinear nodes).
/// The study (seed 004, §6, C3): vendor NPUs own quantization; one ignored
/// the external scales silently, the other's compiler refused the graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ByoQdq {
    /// The runtime executes the QDQ graph with its scales (onnxruntime,
    /// TensorRT explicit quantization).
    #[default]
    Honours,
    /// The native flow calibrates the float model itself: external scales
    /// are replaced by its calibrator's, without an error.
    Recalibrates,
    /// The native compiler refuses a graph that carries QDQ nodes.
    Rejects,
}

impl ByoQdq {
    /// True when the platform's own flow (a vendor compiler) decides the
    /// quantization, i.e. anything but [`ByoQdq::Honours`].
    pub fn native_flow(self) -> bool {
        self != ByoQdq::Honours
    }
}

/// What a deployment target requires. Data, not code paths.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Platform {
    /// Registry name (`j6e`, `x86-avx2`, ...).
    pub name: String,
    /// Compiler march name (`nash-e`, ...); accepted as an alias by [`Registry::get`].
    pub march: Option<String>,
    /// Family (`nash`, `host-cpu`, `gpu`, `pcie-npu`).
    pub family: String,
    /// Precisions the platform executes.
    pub precisions: Vec<Precision>,
    /// Name of the default quantization template.
    pub default_template: String,
    /// High-accuracy output form of tail GEMM-class operators.
    pub tail_output: HighAccuracyOutput,
    /// Stride alignment in bytes of image (nv12 and other image) rows; 1 = dense.
    pub image_stride_align: u64,
    /// Padding multiple, in elements, of the two innermost axes of featuremap
    /// tensors; 1 = no padding. See [`crate::layout`] for the assumption.
    pub featuremap_align_elems: u64,
    /// Minimum memory unit in bytes for non-image tensors; `alignedByteSize`
    /// is a multiple of it. 1 = none.
    pub min_memory_unit: u64,
    /// Number of BPU (accelerator) cores; 0 for hosts.
    pub bpu_cores: u32,
    /// Whether one model may run on several cores / bind cores explicitly.
    pub multi_core: bool,
    /// Upper bound of `max_l2m_size` in bytes; `None` = L2M not available.
    pub l2m_cap_bytes: Option<u64>,
    /// IPs that runtime tasks may use.
    pub allowed_ips: Vec<Ip>,
    /// Name of the default arithmetic profile, one of `qport_core::arith`'s
    /// presets (an archetype, not a silicon claim).
    pub default_arith_profile: String,
    /// What the native flow does with a bring-your-own QDQ graph
    /// (default `honours`).
    #[serde(default)]
    pub byo_qdq: ByoQdq,
}

/// One mebibyte, for L2M capacities.
pub(crate) const MIB: u64 = 1024 * 1024;

/// The built-in registry as data: `platforms.toml` beside this file.
const BUILTIN_TOML: &str = include_str!("platforms.toml");

/// All known platforms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Registry {
    /// The platforms, in listing order.
    pub platforms: Vec<Platform>,
}

impl Registry {
    /// The built-in registry, parsed from the embedded `platforms.toml`
    /// (each platform's values with the source they come from).
    pub fn builtin() -> Self {
        // The file is part of the binary and checked by the tests below, so
        // a parse failure is a bug in qport, not a user error.
        toml::from_str(BUILTIN_TOML).expect("the embedded platforms.toml is valid")
    }

    /// Platform names in listing order.
    pub fn names(&self) -> Vec<&str> {
        self.platforms.iter().map(|p| p.name.as_str()).collect()
    }

    /// Looks a platform up by name or march alias, case-insensitively.
    pub fn get(&self, name: &str) -> Result<&Platform, PlatformError> {
        let want = name.trim().to_ascii_lowercase();
        self.platforms
            .iter()
            .find(|p| {
                p.name.eq_ignore_ascii_case(&want)
                    || p.march
                        .as_deref()
                        .is_some_and(|m| m.eq_ignore_ascii_case(&want))
            })
            .ok_or_else(|| PlatformError::UnknownPlatform {
                name: name.to_string(),
                valid: self.names().join(", "),
            })
    }
}

impl Registry {
    /// A human-readable table of the registry, one platform a line.
    pub fn to_table(&self) -> String {
        let mut out = String::from(
            "platform     march   template           tail-output      nv12-align  mem-unit  cores  multi  l2m-cap   ips\n",
        );
        for p in &self.platforms {
            let l2m = p
                .l2m_cap_bytes
                .map_or("-".to_string(), |b| format!("{}MiB", b / MIB));
            let ips: Vec<String> = p
                .allowed_ips
                .iter()
                .map(|i| format!("{i:?}").to_lowercase())
                .collect();
            out.push_str(&format!(
                "{:<12} {:<7} {:<18} {:<16} {:<11} {:<9} {:<6} {:<6} {:<9} {}\n",
                p.name,
                p.march.as_deref().unwrap_or("-"),
                p.default_template,
                format!("{:?}", p.tail_output),
                format!("{} B", p.image_stride_align),
                format!("{} B", p.min_memory_unit),
                p.bpu_cores,
                p.multi_core,
                l2m,
                if ips.is_empty() {
                    "-".to_string()
                } else {
                    ips.join(",")
                },
            ));
        }
        out
    }
}

impl Platform {
    /// Whether the platform has a padding rule at all (false for host archetypes).
    pub fn pads(&self) -> bool {
        self.image_stride_align > 1 || self.featuremap_align_elems > 1 || self.min_memory_unit > 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_values_match_the_manual() {
        let r = Registry::builtin();
        let g = |n: &str| r.get(n).unwrap().clone();
        assert_eq!(g("j6e").tail_output, HighAccuracyOutput::Int32Dequantize);
        assert_eq!(g("j6m").tail_output, HighAccuracyOutput::Int32Dequantize);
        for n in ["j6b", "j6h", "j6p", "s6p"] {
            assert_eq!(g(n).tail_output, HighAccuracyOutput::Float32, "{n}");
        }
        for (n, a, u) in [("j6e", 32, 64), ("j6m", 32, 64), ("j6b", 32, 128)] {
            assert_eq!(
                (g(n).image_stride_align, g(n).min_memory_unit),
                (a, u),
                "{n}"
            );
            assert_eq!(g(n).l2m_cap_bytes, None);
            assert!(!g(n).multi_core);
        }
        for n in ["j6h", "j6p", "s6p"] {
            assert_eq!(
                (g(n).image_stride_align, g(n).min_memory_unit),
                (64, 256),
                "{n}"
            );
            assert!(g(n).multi_core);
            assert_eq!(g(n).default_template, "float16-gemm-int8");
        }
        for n in ["j6e", "j6m", "j6b"] {
            assert_eq!(
                g(n).precisions,
                vec![Precision::Int8, Precision::Int16, Precision::Float32],
                "{n}"
            );
        }
        for n in ["j6h", "j6p", "s6p"] {
            assert!(g(n).precisions.contains(&Precision::Float16), "{n}");
        }
        assert_eq!(g("j6p").l2m_cap_bytes, Some(25_165_824));
        assert_eq!(g("s6p").l2m_cap_bytes, Some(12 * MIB));
        assert_eq!(g("s6p").allowed_ips, vec![Ip::Bpu]);
        assert!(g("j6p").allowed_ips.contains(&Ip::Dsp));
        assert_eq!(r.platforms.len(), 12);
        for n in ["j6e", "j6m", "j6b", "j6h", "j6p", "s6p"] {
            assert_eq!(g(n).byo_qdq, ByoQdq::Recalibrates, "{n}");
        }
        assert_eq!(g("pcie-npu").byo_qdq, ByoQdq::Rejects);
        assert_eq!(g("x86-avx2").byo_qdq, ByoQdq::Honours);
    }

    #[test]
    fn default_arith_profiles_are_presets() {
        for p in &Registry::builtin().platforms {
            assert!(
                qport_core::arith::ArithProfile::preset(&p.default_arith_profile).is_ok(),
                "{}: {}",
                p.name,
                p.default_arith_profile
            );
        }
    }

    #[test]
    fn json_round_trip_and_table() {
        let r = Registry::builtin();
        let j = serde_json::to_string(&r).unwrap();
        assert!(j.contains("\"tail_output\":\"int32-dequantize\""));
        assert_eq!(serde_json::from_str::<Registry>(&j).unwrap(), r);
        let t = r.to_table();
        assert_eq!(t.lines().count(), 13);
        assert!(t.contains("s6p") && t.contains("12MiB") && t.contains("nash-e"));
    }

    #[test]
    fn march_aliases_are_case_insensitive() {
        let r = Registry::builtin();
        for (alias, name) in [
            ("nash-e", "j6e"),
            ("NASH-M", "j6m"),
            ("Nash-B", "j6b"),
            ("nash-h", "j6h"),
            ("nash-p", "j6p"),
            ("J6P", "j6p"),
        ] {
            assert_eq!(r.get(alias).unwrap().name, name);
        }
    }

    #[test]
    fn unknown_platform_lists_valid_names() {
        let e = Registry::builtin().get("j7").unwrap_err().to_string();
        assert!(
            e.contains("`j7`")
                && e.contains("j6e")
                && e.contains("x86-avx2")
                && e.contains("pcie-npu"),
            "{e}"
        );
    }
}
