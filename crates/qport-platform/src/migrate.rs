//! Migration between platforms: a checklist of everything that changes for
//! the user, each with severity and source (what `qport migrate` prints).
//!
//! Severity: `Error` = deployment code or settings break if left unchanged
//! (output type, per-tensor strides and byte sizes, settings over a new cap,
//! IPs no longer allowed); `Warning` = re-evaluate (template, alignment rules,
//! lower caps, lost precisions); `Info` = new capability.

use crate::deploy::{deploy_check, DeployRequest, Severity};
use crate::model_layout::ModelLayout;
use crate::{Platform, PlatformError, TensorDescriptor};
use serde::Serialize;

/// One item of the migration checklist.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    /// What changes (`tail-output`, `tensor:<name>`, ...).
    pub item: String,
    /// How much it matters.
    pub severity: Severity,
    /// Value on the source platform.
    pub from: String,
    /// Value on the target platform.
    pub to: String,
    /// What the user has to do.
    pub note: String,
    /// Where the rule comes from.
    pub source: &'static str,
}

fn ch(
    item: &str,
    severity: Severity,
    from: String,
    to: String,
    note: &str,
    source: &'static str,
) -> Change {
    Change {
        item: item.into(),
        severity,
        from,
        to,
        note: note.into(),
        source,
    }
}

fn mib(b: Option<u64>) -> String {
    b.map_or("not available".into(), |b| {
        format!("{} MiB", b / (1024 * 1024))
    })
}

/// Both lists in wire form when `b` lacks some entry of `a`.
fn lost<T: PartialEq + Serialize>(a: &[T], b: &[T]) -> Option<(String, String)> {
    a.iter()
        .any(|x| !b.contains(x))
        .then(|| (qport_core::wire::wire(&a), qport_core::wire::wire(&b)))
}

/// Platform-level changes from `a` to `b`.
pub fn migrate_platform(a: &Platform, b: &Platform) -> Vec<Change> {
    use Severity::{Error, Info, Warning};
    let mut out = Vec::new();
    // Fields compared by their rendering (each rendering tells values apart).
    type Show = fn(&Platform) -> String;
    let rendered: [(&str, Severity, Show, &str, &'static str); 4] = [
        (
            "template",
            Warning,
            |p| p.default_template.clone(),
            "start quantization from the target's template (J6H/P/S6P: global float16 + Conv/GEMM/MatMul/ConvTranspose int8, Resize/GridSample int8; J6E/M/B: int8 + int16 for sensitive ops)",
            "OE manual, Platform Differences > ONNX Model Quantization Platform Differences",
        ),
        (
            "tail-output",
            Error,
            |p| qport_core::wire::wire(&p.tail_output),
            "tail GEMM-class outputs change type: adapt post-processing and consistency comparison (int32 + software dequantize vs direct float32)",
            "OE manual, Platform Differences > High-Accuracy Output Form Differences",
        ),
        (
            "nv12-align",
            Warning,
            |p| format!("{} B", p.image_stride_align),
            "nv12/image row stride alignment changes: check pyramid/resizer configs and input preparation; parse by stride, never hard-code",
            "OE manual, Platform Differences > stride, padding, and aligned byte size Differences",
        ),
        (
            "memory-unit",
            Warning,
            |p| format!("{} B", p.min_memory_unit),
            "alignedByteSize of non-image tensors is rounded to a different unit: allocate by alignedByteSize",
            "OE manual, Platform Differences > stride, padding, and aligned byte size Differences",
        ),
    ];
    for (item, severity, show, note, source) in rendered {
        let (from, to) = (show(a), show(b));
        if from != to {
            out.push(ch(item, severity, from, to, note, source));
        }
    }
    if a.l2m_cap_bytes != b.l2m_cap_bytes {
        let (sev, note) = match (a.l2m_cap_bytes, b.l2m_cap_bytes) {
            (None, Some(_)) => (Info, "L2M becomes available: set max_l2m_size at compile time AND allocate it per core at runtime"),
            (Some(x), Some(y)) if y > x => (Info, "larger L2M cap"),
            (Some(_), None) => (Error, "L2M not available: compile with max_l2m_size 0 and drop the runtime L2M allocation"),
            _ => (Warning, "smaller L2M cap: re-evaluate max_l2m_size and the runtime allocation against the new cap"),
        };
        out.push(ch(
            "l2m-cap",
            sev,
            mib(a.l2m_cap_bytes),
            mib(b.l2m_cap_bytes),
            note,
            "OE manual, Platform Differences > L2M",
        ));
    }
    if (a.bpu_cores, a.multi_core) != (b.bpu_cores, b.multi_core) {
        let note = if b.multi_core {
            "multi-core and core binding available: split by function, bind cores, avoid CORE_ANY"
        } else {
            "single core: compile with core_num 1 and drop core binding"
        };
        let sev = if b.bpu_cores < a.bpu_cores {
            Warning
        } else {
            Info
        };
        let f = |p: &Platform| format!("{} core(s), multi-core {}", p.bpu_cores, p.multi_core);
        out.push(ch(
            "cores",
            sev,
            f(a),
            f(b),
            note,
            "OE manual, Platform Differences > Multi-core and Core Binding; OE manual, UCP multi-core and L2M",
        ));
    }
    // Lists that warn when the target lacks some entry of the source's.
    let shrunk = [
        (
            "ips",
            lost(&a.allowed_ips, &b.allowed_ips),
            "move tasks on the lost IPs elsewhere",
            "OE manual, Platform Differences (introduction: on S6P, UCP supports only the BPU IP)",
        ),
        (
            "precisions",
            lost(&a.precisions, &b.precisions),
            "nodes configured with the lost precisions must change",
            "OE manual, quant_config (the precisions each platform runs)",
        ),
    ];
    for (item, lists, note, source) in shrunk {
        if let Some((from, to)) = lists {
            out.push(ch(item, Warning, from, to, note, source));
        }
    }
    out
}

fn desc(d: &TensorDescriptor) -> String {
    format!(
        "{} stride {:?} alignedShape {:?} alignedByteSize {}",
        qport_core::wire::wire(&d.kind),
        d.stride,
        d.aligned_shape,
        d.aligned_byte_size
    )
}

/// Per-tensor changes between the same model's layouts on two platforms.
pub fn migrate_layout(a: &ModelLayout, b: &ModelLayout) -> Vec<Change> {
    let mut out = Vec::new();
    let src =
        "OE manual, Platform Differences > stride, padding, and aligned byte size Differences";
    let pairs = a.inputs.iter().chain(&a.outputs);
    for da in pairs {
        let db = b
            .inputs
            .iter()
            .chain(&b.outputs)
            .find(|d| d.name == da.name);
        let item = format!("tensor:{}", da.name);
        match db {
            None => out.push(ch(
                &item,
                Severity::Warning,
                desc(da),
                "absent".into(),
                "tensor not present on the target layout",
                src,
            )),
            Some(db)
                if (da.kind, &da.stride, da.aligned_byte_size)
                    != (db.kind, &db.stride, db.aligned_byte_size) =>
            {
                let note = "prepare inputs / parse outputs from the new validShape, stride and alignedByteSize";
                out.push(ch(&item, Severity::Error, desc(da), desc(db), note, src));
            }
            Some(_) => {}
        }
    }
    out
}

/// Findings of the user's deployment settings re-checked on the target,
/// as checklist items (e.g. a `max_l2m_size` over the target's cap).
pub fn migrate_deploy(b: &Platform, req: &DeployRequest) -> Result<Vec<Change>, PlatformError> {
    Ok(deploy_check(b, req)?
        .into_iter()
        .map(|f| Change {
            item: format!("deploy:{}", f.rule),
            severity: f.severity,
            from: "current settings".into(),
            to: b.name.clone(),
            note: f.message,
            source: f.source,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Ip, Registry, TensorType};

    fn items(v: &[Change]) -> Vec<&str> {
        v.iter().map(|c| c.item.as_str()).collect()
    }

    #[test]
    fn j6m_to_j6p() {
        let r = Registry::builtin();
        let v = migrate_platform(r.get("j6m").unwrap(), r.get("j6p").unwrap());
        assert_eq!(
            items(&v),
            vec![
                "template",
                "tail-output",
                "nv12-align",
                "memory-unit",
                "l2m-cap",
                "cores"
            ]
        );
        assert_eq!((v[2].from.as_str(), v[2].to.as_str()), ("32 B", "64 B"));
        assert_eq!((v[3].from.as_str(), v[3].to.as_str()), ("64 B", "256 B"));
        assert_eq!(v[1].severity, Severity::Error);
        assert_eq!(v[4].to, "24 MiB");
    }

    #[test]
    fn j6p_to_s6p_flags_cap_and_ips() {
        let r = Registry::builtin();
        let (a, b) = (r.get("j6p").unwrap(), r.get("s6p").unwrap());
        let v = migrate_platform(a, b);
        assert_eq!(items(&v), vec!["l2m-cap", "ips"]);
        assert_eq!((v[0].from.as_str(), v[0].to.as_str()), ("24 MiB", "12 MiB"));
        let req = DeployRequest {
            max_l2m_size: Some(24 << 20),
            runtime_l2m: Some("24".into()),
            ips: vec![Ip::Dsp],
            ..Default::default()
        };
        let v = migrate_deploy(b, &req).unwrap();
        assert_eq!(
            items(&v),
            vec!["deploy:l2m-cap", "deploy:runtime-l2m-cap", "deploy:ip"]
        );
        assert!(migrate_deploy(a, &req).unwrap().is_empty());
    }

    #[test]
    fn per_tensor_changes() {
        let r = Registry::builtin();
        let mk = |p: &str| {
            let p = r.get(p).unwrap();
            let d = TensorDescriptor::featuremap("out", TensorType::F32, &[3], p, false).unwrap();
            ModelLayout {
                platform: p.name.clone(),
                inputs: vec![],
                outputs: vec![d],
                assumptions: vec![],
            }
        };
        let v = migrate_layout(&mk("j6m"), &mk("j6p"));
        assert_eq!(items(&v), vec!["tensor:out"]);
        assert!(
            v[0].from.ends_with("alignedByteSize 64") && v[0].to.ends_with("alignedByteSize 256"),
            "{v:?}"
        );
        assert!(migrate_layout(&mk("j6h"), &mk("j6p")).is_empty());
    }
}
