//! Deployment checks: compile-time `max_l2m_size`, the runtime per-core L2M
//! allocation string, core count and binding, scheduling advice and allowed
//! IPs. Each [`Finding`] names its rule, severity and source.
//!
//! Assumptions where the public rule is not fully known:
//! * the runtime string `HB_DNN_USER_DEFINED_L2M_SIZES` ("6:6:6:6", MiB per
//!   core) has exactly one entry per compiled core (vt.md: "must match compile
//!   core_num"), and every core the model is bound to must be allocated at
//!   least the compile-time `max_l2m_size` (seed §L2M: "If L2M is specified at
//!   compile time but not allocated enough at runtime, inference may directly
//!   fail");
//! * the sum of the runtime allocation must stay within the platform's L2M cap.

use crate::{Ip, ModelLayout, Platform, PlatformError};
use serde::Serialize;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// For information.
    Info,
    /// A risk, not a failure.
    Warning,
    /// Deployment fails or silently loses the intended benefit.
    Error,
}

/// One result of a check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Rule identifier, e.g. `l2m-cap`.
    pub rule: &'static str,
    /// Severity.
    pub severity: Severity,
    /// What was found, naming the platform and values.
    pub message: String,
    /// Where the rule is documented for users: a section of the public
    /// vendor manual ("OE manual, Platform Differences > L2M"), never an
    /// internal file.
    pub source: &'static str,
}

/// What a deployment intends to do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeployRequest {
    /// Compile-time `core_num`; `None` = 1.
    pub compiled_cores: Option<u32>,
    /// Runtime core binding (core indices); empty = cores `0..compiled_cores`.
    pub bind: Vec<u32>,
    /// Compile-time `max_l2m_size` in bytes.
    pub max_l2m_size: Option<u64>,
    /// Runtime per-core L2M allocation string, MiB per core ("6:6:6:6").
    pub runtime_l2m: Option<String>,
    /// IPs the application schedules tasks on.
    pub ips: Vec<Ip>,
    /// Whether tasks are scheduled with `HB_UCP_BPU_CORE_ANY`.
    pub core_any: bool,
}

use crate::registry::MIB;
const SRC_L2M: &str = "OE manual, Platform Differences > L2M; OE manual, hb_compile configuration (max_l2m_size 0..25165824, not on nash-b/e/m)";
const SRC_RT: &str =
    "OE manual, UCP multi-core and L2M (HB_DNN_USER_DEFINED_L2M_SIZES must match core_num); OE manual, Platform Differences > L2M";
const SRC_CORES: &str =
    "OE manual, hb_compile configuration (core_num 1 on nash-b/e/m, 1-4 on nash-h/p); OE manual, UCP multi-core and L2M";
const SRC_ANY: &str = "OE manual, Platform Differences > Multi-core and Core Binding";
const SRC_IP: &str =
    "OE manual, Platform Differences (introduction: on S6P, UCP supports only the BPU IP)";

/// Parses a runtime L2M allocation string ("6:6:6:6", MiB per core).
pub fn parse_runtime_l2m(s: &str) -> Result<Vec<u64>, PlatformError> {
    let bad = |m: String| PlatformError::BadRuntimeL2m { message: m };
    let t = s.trim();
    if t.is_empty() {
        return Err(bad("empty; expected MiB per core like \"6:6:6:6\"".into()));
    }
    t.split(':')
        .map(|p| {
            p.trim().parse::<u64>().map_err(|_| {
                bad(format!(
                    "`{s}`: `{p}` is not a whole number of MiB (expected e.g. \"6:6:6:6\")"
                ))
            })
        })
        .collect()
}

fn f(rule: &'static str, severity: Severity, message: String, source: &'static str) -> Finding {
    Finding {
        rule,
        severity,
        message,
        source,
    }
}

/// Checks a deployment request against a platform. `Err` only for input that
/// does not parse (the runtime L2M string); rule violations are findings.
pub fn deploy_check(p: &Platform, req: &DeployRequest) -> Result<Vec<Finding>, PlatformError> {
    use Severity::{Error, Info, Warning};
    let mut out = Vec::new();
    let name = &p.name;
    let compiled = req.compiled_cores.unwrap_or(1);
    let bind: Vec<u32> = if req.bind.is_empty() {
        (0..compiled).collect()
    } else {
        req.bind.clone()
    };
    if compiled == 0 || compiled > p.bpu_cores.max(1) || (compiled > 1 && !p.multi_core) {
        let msg = format!(
            "{name}: core_num {compiled} not supported (BPU cores: {}, multi-core: {})",
            p.bpu_cores, p.multi_core
        );
        out.push(f("core-num", Error, msg, SRC_CORES));
    }
    for &c in &bind {
        if c >= p.bpu_cores.max(1) {
            out.push(f(
                "core-bind",
                Error,
                format!(
                    "{name}: core {c} does not exist ({} BPU cores)",
                    p.bpu_cores
                ),
                SRC_CORES,
            ));
        }
    }
    if bind.len() > 1 && !p.multi_core {
        out.push(f(
            "core-bind",
            Error,
            format!("{name}: binding to several cores needs multi-core support"),
            SRC_CORES,
        ));
    }
    let l2m = req.max_l2m_size.unwrap_or(0);
    match p.l2m_cap_bytes {
        None if l2m > 0 => out.push(f(
            "l2m-cap",
            Error,
            format!("{name}: L2M not available, max_l2m_size {l2m} must be 0"),
            SRC_L2M,
        )),
        Some(cap) if l2m > cap => out.push(f(
            "l2m-cap",
            Error,
            format!(
                "{name}: max_l2m_size {l2m} B exceeds the {cap} B ({} MiB) cap",
                cap / MIB
            ),
            SRC_L2M,
        )),
        _ => {}
    }
    match (&req.runtime_l2m, l2m) {
        (None, 0) => {}
        (None, _) if p.l2m_cap_bytes.is_none() => {}
        (None, _) => out.push(f(
            "runtime-l2m-missing",
            Error,
            format!("{name}: max_l2m_size {l2m} B set at compile time but no runtime L2M allocated; inference may fail or lose the benefit"),
            SRC_RT,
        )),
        (Some(s), _) => {
            let mib = parse_runtime_l2m(s)?;
            if mib.len() != compiled as usize {
                let msg = format!("{name}: runtime L2M `{s}` has {} entries, compiled core_num is {compiled}", mib.len());
                out.push(f("runtime-l2m-cores", Error, msg, SRC_RT));
            }
            let total = mib.iter().try_fold(0u64, |a, &m| a.checked_add(m.checked_mul(MIB)?)).unwrap_or(u64::MAX);
            match p.l2m_cap_bytes {
                None if total > 0 => out.push(f("runtime-l2m-cap", Error, format!("{name}: L2M not available, runtime `{s}` must be all 0"), SRC_L2M)),
                Some(cap) if total > cap => out.push(f(
                    "runtime-l2m-cap",
                    Error,
                    format!("{name}: runtime L2M `{s}` totals {} MiB, over the {} MiB cap", total / MIB, cap / MIB),
                    SRC_L2M,
                )),
                _ => {}
            }
            if l2m == 0 && total > 0 {
                let msg = format!("{name}: runtime L2M `{s}` allocated but the model was compiled without max_l2m_size: no benefit");
                out.push(f("runtime-l2m-unused", Info, msg, SRC_RT));
            }
            for &c in &bind {
                let have = mib.get(c as usize).map_or(0, |m| m.saturating_mul(MIB));
                if l2m > 0 && have < l2m {
                    let msg = format!("{name}: core {c} gets {} MiB at runtime, less than max_l2m_size {l2m} B; inference may fail or lose the benefit", have / MIB);
                    out.push(f("runtime-l2m-covers", Error, msg, SRC_RT));
                }
            }
        }
    }
    if req.core_any {
        let msg = format!("{name}: HB_UCP_BPU_CORE_ANY scheduling adds latency variance; split the model or pipeline by function, orchestrate statically and bind cores");
        out.push(f("core-any", Warning, msg, SRC_ANY));
    }
    for ip in &req.ips {
        if !p.allowed_ips.contains(ip) {
            let allowed: Vec<String> = p
                .allowed_ips
                .iter()
                .map(|i| format!("{i:?}").to_lowercase())
                .collect();
            let msg = format!(
                "{name}: IP {} not supported (allowed: {})",
                format!("{ip:?}").to_lowercase(),
                allowed.join(", ")
            );
            out.push(f("ip", Error, msg, SRC_IP));
        }
    }
    Ok(out)
}

/// The `io-memory` finding (info) of `deploy-check --model`: the aligned
/// bytes the model's inputs and outputs occupy on `p`, the padding over the
/// dense size, and how many tensors are sized only at run time.
pub fn io_memory(p: &Platform, layout: &ModelLayout) -> Finding {
    let all: Vec<_> = layout.inputs.iter().chain(&layout.outputs).collect();
    let dynamic = all.iter().filter(|d| d.is_dynamic()).count();
    let aligned: u64 = all
        .iter()
        .filter(|d| !d.is_dynamic())
        .map(|d| d.aligned_byte_size.max(0) as u64)
        .sum();
    let dense: u64 = all.iter().filter_map(|d| d.dense_byte_size().ok()).sum();
    let pad = if dense > 0 {
        format!(
            ", {:+.1}% over dense {dense} B",
            (aligned as f64 / dense as f64 - 1.0) * 100.0
        )
    } else {
        String::new()
    };
    let dynamic = if dynamic > 0 {
        format!("; {dynamic} dynamic tensor(s) sized at runtime")
    } else {
        String::new()
    };
    Finding {
        rule: "io-memory",
        severity: Severity::Info,
        message: format!(
            "{}: {} input and {} output tensor(s) need {aligned} B aligned{pad}{dynamic}; allocate alignedByteSize per tensor",
            p.name,
            layout.inputs.len(),
            layout.outputs.len()
        ),
        source: "OE manual, Platform Differences > stride, padding, and aligned byte size Differences",
    }
}

/// Whether any finding is an error (the CLI exits 1).
pub fn has_errors(findings: &[Finding]) -> bool {
    findings.iter().any(|f| f.severity == Severity::Error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Registry;

    fn check(p: &str, req: DeployRequest) -> Vec<Finding> {
        deploy_check(Registry::builtin().get(p).unwrap(), &req).unwrap()
    }
    fn rules(v: &[Finding]) -> Vec<&str> {
        v.iter().map(|f| f.rule).collect()
    }

    #[test]
    fn valid_requests_pass() {
        let req = DeployRequest {
            compiled_cores: Some(4),
            max_l2m_size: Some(6 * MIB),
            runtime_l2m: Some("6:6:6:6".into()),
            ips: vec![Ip::Bpu, Ip::Dsp],
            ..Default::default()
        };
        assert_eq!(check("j6p", req), vec![]);
        assert_eq!(check("j6e", DeployRequest::default()), vec![]);
    }

    #[test]
    fn documented_failures_are_rejected_naming_the_rule() {
        let over = DeployRequest {
            max_l2m_size: Some(25 * MIB),
            runtime_l2m: Some("25".into()),
            ..Default::default()
        };
        let v = check("j6p", over);
        assert!(has_errors(&v) && rules(&v).contains(&"l2m-cap"), "{v:?}");
        let s6p = DeployRequest {
            max_l2m_size: Some(24 * MIB),
            runtime_l2m: Some("24".into()),
            ..Default::default()
        };
        let v = check("s6p", s6p);
        assert!(
            rules(&v).contains(&"l2m-cap") && rules(&v).contains(&"runtime-l2m-cap"),
            "{v:?}"
        );
        assert!(v[0].message.contains("12 MiB"));
        let count = DeployRequest {
            compiled_cores: Some(2),
            max_l2m_size: Some(MIB),
            runtime_l2m: Some("6:6:6:6".into()),
            ..Default::default()
        };
        assert!(rules(&check("j6h", count)).contains(&"runtime-l2m-cores"));
        let little = DeployRequest {
            compiled_cores: Some(2),
            max_l2m_size: Some(8 * MIB),
            runtime_l2m: Some("8:4".into()),
            ..Default::default()
        };
        let v = check("j6h", little);
        assert_eq!(rules(&v), vec!["runtime-l2m-covers"]);
        assert!(v[0].message.contains("core 1"));
        let dsp = DeployRequest {
            ips: vec![Ip::Dsp],
            ..Default::default()
        };
        let v = check("s6p", dsp.clone());
        assert_eq!(rules(&v), vec!["ip"]);
        assert!(v[0].message.contains("dsp") && v[0].source.contains("BPU"));
        assert_eq!(check("j6p", dsp), vec![]);
    }

    #[test]
    fn cores_l2m_availability_and_core_any() {
        let v = check(
            "j6e",
            DeployRequest {
                compiled_cores: Some(2),
                ..Default::default()
            },
        );
        assert!(rules(&v).contains(&"core-num"));
        let v = check(
            "j6m",
            DeployRequest {
                max_l2m_size: Some(1),
                ..Default::default()
            },
        );
        assert_eq!(rules(&v), vec!["l2m-cap"]);
        let v = check(
            "j6p",
            DeployRequest {
                bind: vec![5],
                ..Default::default()
            },
        );
        assert_eq!(rules(&v), vec!["core-bind"]);
        let v = check(
            "j6p",
            DeployRequest {
                max_l2m_size: Some(MIB),
                ..Default::default()
            },
        );
        assert_eq!(rules(&v), vec!["runtime-l2m-missing"]);
        let v = check(
            "j6p",
            DeployRequest {
                core_any: true,
                ..Default::default()
            },
        );
        assert_eq!(
            (rules(&v), v[0].severity),
            (vec!["core-any"], Severity::Warning)
        );
        assert!(v[0].message.contains("bind cores") && !has_errors(&v));
    }

    #[test]
    fn bad_runtime_string_is_an_error() {
        for s in ["", "6:x", "6::6", "-1", "6.5"] {
            let e = parse_runtime_l2m(s).unwrap_err().to_string();
            assert!(e.contains("runtime L2M"), "{e}");
        }
        assert_eq!(parse_runtime_l2m(" 24:0:0:0 ").unwrap(), vec![24, 0, 0, 0]);
        let req = DeployRequest {
            runtime_l2m: Some("a:b".into()),
            ..Default::default()
        };
        assert!(deploy_check(Registry::builtin().get("j6p").unwrap(), &req).is_err());
    }
}
