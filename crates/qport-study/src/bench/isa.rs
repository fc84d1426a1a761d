//! The host machine as a benchmark records it: CPU model, logical cores,
//! the dot-product-relevant ISA features detected at run time, the row of
//! qport's kernel dispatch table that really runs ([`qport_kernels::isa`],
//! after `QPORT_SIMD` and `QPORT_FORCE_GENERIC`), and the kernel table's
//! prediction of the INT8-vs-FP32 sign for each ISA class
//! (claim C1 of the study in `shared/seeds/004_…`).

use serde::Serialize;

/// ISA features detected at run time. Features of the other architecture
/// are always `false`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct IsaFeatures {
    /// x86 AVX2 (256-bit integer SIMD; `vpmaddubsw`).
    pub avx2: bool,
    /// x86 FMA3.
    pub fma: bool,
    /// x86 F16C (half-precision conversions).
    pub f16c: bool,
    /// x86 AVX-512 Foundation.
    pub avx512f: bool,
    /// x86 AVX-512 Byte/Word.
    pub avx512bw: bool,
    /// x86 AVX-512 VNNI (`vpdpbusd` on 512-bit vectors).
    pub avx512_vnni: bool,
    /// x86 AVX-VNNI (`vpdpbusd` on 256-bit vectors, VEX encoded).
    pub avx_vnni: bool,
    /// x86 AMX-INT8 tile instructions, reported by the CPU and enabled by
    /// the operating system.
    pub amx_int8: bool,
    /// Arm NEON (Advanced SIMD).
    pub neon: bool,
    /// Arm dot product (`sdot`/`udot`).
    pub dotprod: bool,
    /// Arm int8 matrix multiply (`smmla`).
    pub i8mm: bool,
}

impl IsaFeatures {
    /// Detects the features of the CPU this process runs on.
    pub fn detect() -> IsaFeatures {
        detect_impl()
    }

    /// `(name, present)` for every feature, in a fixed order; names as
    /// people write them (`avx512-vnni`, `amx-int8`).
    pub fn list(&self) -> [(&'static str, bool); 11] {
        [
            ("avx2", self.avx2),
            ("fma", self.fma),
            ("f16c", self.f16c),
            ("avx512f", self.avx512f),
            ("avx512bw", self.avx512bw),
            ("avx512-vnni", self.avx512_vnni),
            ("avx-vnni", self.avx_vnni),
            ("amx-int8", self.amx_int8),
            ("neon", self.neon),
            ("dotprod", self.dotprod),
            ("i8mm", self.i8mm),
        ]
    }

    /// The ISA class of the kernel table these features fall in (the
    /// CPU's best dot-product instruction, which qport's kernels may not
    /// use: see [`kernel_class`]), `None` when no row applies (an x86 CPU without AVX2, another architecture).
    pub fn class(&self) -> Option<IsaClass> {
        if self.avx512_vnni || self.avx_vnni {
            Some(IsaClass::X86Vnni)
        } else if self.avx2 {
            Some(IsaClass::X86Avx2)
        } else if self.dotprod {
            Some(IsaClass::ArmDotprod)
        } else if self.neon {
            Some(IsaClass::ArmNeon)
        } else {
            None
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn detect_impl() -> IsaFeatures {
    use std::is_x86_feature_detected as has;
    IsaFeatures {
        avx2: has!("avx2"),
        fma: has!("fma"),
        f16c: has!("f16c"),
        avx512f: has!("avx512f"),
        avx512bw: has!("avx512bw"),
        avx512_vnni: has!("avx512vnni"),
        avx_vnni: has!("avxvnni"),
        amx_int8: qport_kernels::dispatch::amx_int8(),
        ..IsaFeatures::default()
    }
}

#[cfg(target_arch = "aarch64")]
fn detect_impl() -> IsaFeatures {
    use std::arch::is_aarch64_feature_detected as has;
    IsaFeatures {
        neon: has!("neon"),
        dotprod: has!("dotprod"),
        i8mm: has!("i8mm"),
        ..IsaFeatures::default()
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn detect_impl() -> IsaFeatures {
    IsaFeatures::default()
}

/// The machine a benchmark ran on.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// `std::env::consts::ARCH` (`x86_64`, `aarch64`, ...).
    pub arch: &'static str,
    /// The CPU model from `/proc/cpuinfo` (`model name`, else `Hardware`
    /// or `Model`); `None` where unavailable.
    pub cpu_model: Option<String>,
    /// Logical cores available to this process
    /// (`std::thread::available_parallelism`).
    pub logical_cores: usize,
    /// ISA features detected at run time.
    pub isa: IsaFeatures,
    /// The kernels qport runs here.
    pub kernels: Kernels,
    /// The kernel-table class of the kernels qport runs here (not of the
    /// CPU's best instruction: an AVX-VNNI host without AVX-512 VNNI, or
    /// a VNNI host under `QPORT_SIMD=avx2`, runs the AVX2 kernel), if any
    /// row applies.
    pub isa_class: Option<IsaClass>,
}

/// The row of qport's kernel dispatch table in use
/// ([`qport_kernels::dispatch::Isa`]).
#[derive(Debug, Clone, Serialize)]
pub struct Kernels {
    /// The row's name (`generic`, `avx2`, `avx512`, `avx512-vnni`, `amx`, `neon`,
    /// `dotprod`).
    pub isa: &'static str,
    /// The instruction of the exact u8×s8 GEMM's inner loop.
    pub int8_gemm: &'static str,
    /// The SIMD level of the `f32` kernels.
    pub f32_simd: &'static str,
}

impl Kernels {
    /// The kernels of the calling thread.
    pub fn detect() -> Kernels {
        let isa = qport_kernels::isa();
        Kernels {
            isa: isa.name(),
            int8_gemm: isa.int8_gemm(),
            f32_simd: isa.f32_simd(),
        }
    }
}

/// The kernel-table class of a dispatch-table row: the class of the
/// instruction its u8×s8 GEMM runs on.
pub fn kernel_class(isa: qport_kernels::Isa) -> Option<IsaClass> {
    use qport_kernels::Isa;
    match isa {
        // (the AMX row runs the VNNI kernel's products on tiles: the same
        // class of exact byte dot products, faster)
        Isa::Avx512Vnni | Isa::Amx => Some(IsaClass::X86Vnni),
        Isa::Avx2 | Isa::Avx512 => Some(IsaClass::X86Avx2),
        Isa::Dotprod => Some(IsaClass::ArmDotprod),
        Isa::Neon => Some(IsaClass::ArmNeon),
        _ => None,
    }
}

impl Machine {
    /// Describes the machine this process runs on.
    pub fn detect() -> Machine {
        let isa = IsaFeatures::detect();
        Machine {
            arch: std::env::consts::ARCH,
            cpu_model: std::fs::read_to_string("/proc/cpuinfo")
                .ok()
                .and_then(|t| cpu_model(&t)),
            logical_cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            isa,
            kernels: Kernels::detect(),
            isa_class: kernel_class(qport_kernels::isa()),
        }
    }
}

/// The CPU model named in the text of `/proc/cpuinfo`.
pub fn cpu_model(cpuinfo: &str) -> Option<String> {
    for key in ["model name", "Hardware", "Model"] {
        for line in cpuinfo.lines() {
            if let Some((k, v)) = line.split_once(':') {
                if k.trim() == key && !v.trim().is_empty() {
                    return Some(v.trim().to_string());
                }
            }
        }
    }
    None
}

/// A row of the kernel table: a class of CPUs by their u8×s8 (or s8×s8)
/// dot-product instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IsaClass {
    /// x86 with AVX2 but neither AVX-512 VNNI nor AVX-VNNI.
    X86Avx2,
    /// x86 with AVX-512 VNNI or AVX-VNNI.
    X86Vnni,
    /// Arm with the dot-product extension.
    ArmDotprod,
    /// Arm NEON without the dot-product extension.
    ArmNeon,
}

/// The INT8-vs-FP32 latency sign a kernel-table row expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Expect {
    /// INT8 expected faster than FP32.
    Faster,
    /// INT8 expected slower than FP32.
    Slower,
}

/// What the kernel table predicts for one ISA class.
#[derive(Debug, Clone, Serialize)]
pub struct Prediction {
    /// The class.
    pub class: IsaClass,
    /// The class for people.
    pub isa: &'static str,
    /// The instruction(s) an INT8 GEMM's inner loop uses there.
    pub instruction: &'static str,
    /// The expected sign of INT8 vs FP32 latency.
    pub expect: Expect,
    /// Why, with the study's measurement where it has one.
    pub evidence: &'static str,
    /// This row describes the host.
    pub this_host: bool,
}

/// The kernel table, with the row of `host` marked.
pub fn predictions(host: Option<IsaClass>) -> Vec<Prediction> {
    let row = |class, isa, instruction, expect, evidence| Prediction {
        class,
        isa,
        instruction,
        expect,
        evidence,
        this_host: host == Some(class),
    };
    vec![
        row(
            IsaClass::X86Avx2,
            "x86 AVX2 without VNNI",
            "vpmaddubsw + vpmaddwd",
            Expect::Slower,
            "u8*s8 pairs saturate to int16 and need a second widening step; \
             study C1: 1.76x slower than FP32 on a Core i9-10900K",
        ),
        row(
            IsaClass::X86Vnni,
            "x86 AVX-512 VNNI / AVX-VNNI",
            "vpdpbusd",
            Expect::Faster,
            "4 u8*s8 products summed into int32 in one instruction, no saturation",
        ),
        row(
            IsaClass::ArmDotprod,
            "Arm with dotprod",
            "sdot / udot",
            Expect::Faster,
            "study C1: 1.83x faster on Cortex-A76, 2.11x on Cortex-A78AE",
        ),
        row(
            IsaClass::ArmNeon,
            "Arm NEON without dotprod",
            "smull + sadalp",
            Expect::Slower,
            "widening multiplies and pairwise adds give little over FP32 FMA; \
             study C1: 1.65x slower on Cortex-A53",
        ),
    ]
}

/// The honest caveat printed beside the kernel table.
pub const KERNEL_NOTE: &str = "qport's exact u8*s8 convolutions run on the host's \
dot-product instruction, chosen at run time: vpdpbusd (AVX-512 VNNI, weights packed \
when the plan is built; stride-1 layers with kernels wider than 1x1 read the image in \
channel quads with no im2col), sdot (Arm dotprod) or a NEON widening fallback, AVX2 \
vpmaddwd on widened operands, else portable code; the avx2-u8s8 profile's \
saturating pairs run on vpmaddubsw where AVX2 exists. Depthwise layers accumulate \
exactly in 16-bit pairs (vpdpwssd with AVX-512 VNNI, vpmaddwd with AVX-512BW or AVX2), \
requantization and \
residual adds are vectorized loops, per-channel lookups run on vpermi2b (AVX-512 VBMI), \
QGemm with constant weights runs on the same kernels (a matrix-vector body for a \
batch-1 head). QLinearMatMul, pooling and im2col are portable code, so the measured ratio is qport's, not the ISA's ceiling; the table \
is what an ISA-specific runtime (such as onnxruntime's MLAS) shows.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_follow_the_dot_product_instruction() {
        let avx2 = IsaFeatures {
            avx2: true,
            fma: true,
            ..IsaFeatures::default()
        };
        assert_eq!(avx2.class(), Some(IsaClass::X86Avx2));
        let vnni = IsaFeatures {
            avx_vnni: true,
            ..avx2
        };
        assert_eq!(vnni.class(), Some(IsaClass::X86Vnni));
        let neon = IsaFeatures {
            neon: true,
            ..IsaFeatures::default()
        };
        assert_eq!(neon.class(), Some(IsaClass::ArmNeon));
        let dot = IsaFeatures {
            dotprod: true,
            ..neon
        };
        assert_eq!(dot.class(), Some(IsaClass::ArmDotprod));
        assert_eq!(IsaFeatures::default().class(), None);
    }

    #[test]
    fn features_of_the_other_architecture_are_false() {
        let f = IsaFeatures::detect();
        if cfg!(target_arch = "x86_64") {
            assert!(!f.neon && !f.dotprod && !f.i8mm);
        } else {
            assert!(!f.avx2 && !f.avx512f && !f.amx_int8);
        }
        // VNNI implies the base feature set on real CPUs
        if f.avx512_vnni {
            assert!(f.avx512f);
        }
    }

    #[test]
    fn isa_serialises_with_every_feature() {
        let m = Machine::detect();
        let v = serde_json::to_value(&m).unwrap();
        for k in [
            "avx2",
            "fma",
            "f16c",
            "avx512f",
            "avx512bw",
            "avx512_vnni",
            "avx_vnni",
            "amx_int8",
            "neon",
            "dotprod",
            "i8mm",
        ] {
            assert!(v["isa"][k].is_boolean(), "{k}: {v}");
        }
        assert!(v["logical_cores"].as_u64().unwrap() >= 1);
        assert_eq!(v["kernels"]["isa"], qport_kernels::isa().name());
        let p = serde_json::to_value(predictions(Some(IsaClass::ArmDotprod))).unwrap();
        assert_eq!(p[2]["class"], "arm-dotprod");
        assert_eq!(p[2]["expect"], "faster");
        assert_eq!(p[2]["this_host"], true);
        assert_eq!(p[0]["this_host"], false);
    }

    #[test]
    fn the_class_follows_the_kernel_that_runs() {
        use qport_kernels::{with_isa, Isa};
        assert_eq!(kernel_class(Isa::Avx512Vnni), Some(IsaClass::X86Vnni));
        assert_eq!(kernel_class(Isa::Amx), Some(IsaClass::X86Vnni));
        assert_eq!(kernel_class(Isa::Avx512), Some(IsaClass::X86Avx2));
        assert_eq!(kernel_class(Isa::Generic), None);
        // an AVX-512 VNNI host under the avx2 cap runs (and reports) the
        // AVX2 kernel
        if Isa::Avx2.supported() {
            let m = with_isa(Isa::Avx2, Machine::detect);
            assert_eq!(m.isa_class, Some(IsaClass::X86Avx2));
            assert_eq!(m.kernels.isa, "avx2");
        }
    }

    #[test]
    fn cpu_model_is_read_from_cpuinfo() {
        let x86 = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t: avx2\n";
        assert_eq!(cpu_model(x86).as_deref(), Some("AMD EPYC 7B13"));
        let arm = "processor\t: 0\nCPU part\t: 0xd0b\n\nModel\t: Raspberry Pi 5\n";
        assert_eq!(cpu_model(arm).as_deref(), Some("Raspberry Pi 5"));
        assert_eq!(cpu_model("processor: 0\n"), None);
    }
}
