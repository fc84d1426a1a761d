//! Per-layer localization against onnxruntime: qport's dump of
//! EfficientNet-Lite0's u8s8 QDQ artifact (`qport_study::dump`) against
//! onnxruntime's, written by `scripts/oracle/ort_dump.py` (default session,
//! only the values qport's dump lists exposed, so onnxruntime still fuses
//! its QDQ groups into integer kernels).
//!
//! Under `f32-rne` (the profile that models onnxruntime's kernels on a
//! VNNI host, see `ort_default.rs`) nothing may depart; under `gemmlowp`
//! (Q31 fixed-point requantization) localization must name a value that
//! departs by whole LSBs, with every value before it matching.
//!
//! Fixtures: `models/efficientnet-lite0.qdq-u8s8.onnx` and the first input
//! of `parity/efficientnet-lite0.qdq-u8s8/` (`scripts/fetch-fixtures`);
//! onnxruntime from the oracle venv (`QPORT_PYTHON`).

use qport_core::arith::ArithProfile;
use qport_engine::IntegerPlan;
use qport_study::dump::{
    localize, run_dumped, DiffMetric, DumpIndex, DumpMeta, DumpWriter, Localization, TargetDump,
    Tolerance,
};
use qport_tests::{fixture, python_ok, repo_root};
use std::path::Path;

const MODEL: &str = "models/efficientnet-lite0.qdq-u8s8.onnx";
const INPUT: &str = "parity/efficientnet-lite0.qdq-u8s8/00.input.npy";

/// qport's dump of the artifact under `profile` (plan unfused) into `dir`.
fn qport_dump(profile: &str, dir: &Path) -> DumpIndex {
    let path = fixture(MODEL);
    let model = qport_onnx::load(&path).unwrap();
    let ip =
        IntegerPlan::with_fusion(&model, &ArithProfile::preset(profile).unwrap(), false).unwrap();
    let meta = DumpMeta {
        model_path: path.display().to_string(),
        model_sha256: String::new(),
        profile: profile.to_string(),
    };
    let mut w = DumpWriter::create(dir, meta, ip.model(), &[]).unwrap();
    w.add_quant_from(&model);
    let x = qport_data::npy::read(&fixture(INPUT)).unwrap();
    run_dumped(ip.plan(), vec![("input".to_string(), x)], &mut w).unwrap();
    w.finish().unwrap().index
}

/// onnxruntime's dump (default session) of the values `values_from` lists.
fn ort_dump(values_from: &Path, out: &Path) -> TargetDump {
    let script = repo_root().join("scripts/oracle/ort_dump.py");
    let input = format!("input={}", fixture(INPUT).display());
    python_ok([
        script.as_os_str(),
        fixture(MODEL).as_os_str(),
        input.as_ref(),
        "--out".as_ref(),
        out.as_os_str(),
        "--values-from".as_ref(),
        values_from.as_os_str(),
    ]);
    TargetDump::open(out).unwrap()
}

fn show(tag: &str, l: &Localization) {
    for v in &l.values {
        eprintln!(
            "{tag} {:<60} {:<16} {:?}{}",
            v.name,
            v.op.as_deref().unwrap_or("-"),
            v.metric,
            if v.departs { "  DEPARTS" } else { "" }
        );
    }
    eprintln!(
        "{tag}: {} compared, first departure {:?}, missing in target {:?}, target only {:?}",
        l.values.len(),
        l.first().map(|v| &v.name),
        l.missing_in_target,
        l.target_only
    );
}

#[test]
fn localization_names_the_first_value_departing_from_onnxruntime() {
    let tmp = tempfile::tempdir().unwrap();
    let rne = qport_dump("f32-rne", &tmp.path().join("rne"));
    let ort = ort_dump(&tmp.path().join("rne"), &tmp.path().join("ort"));
    let l = localize(&rne, &ort, &Tolerance::default()).unwrap();
    show("f32-rne", &l);
    // every value compared (the graph input and each integer or float value
    // qport computes), none departs
    assert!(
        l.missing_in_target.is_empty() && l.target_only.is_empty(),
        "{l:?}"
    );
    assert_eq!(l.values.len(), rne.values.len());
    assert!(l.values.len() > 50, "{}", l.values.len());
    assert_eq!(l.first(), None);

    let gemm = qport_dump("gemmlowp", &tmp.path().join("gemm"));
    let names = |i: &DumpIndex| i.values.iter().map(|v| v.name.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&gemm),
        names(&rne),
        "both profiles lower the same groups"
    );
    let l = localize(&gemm, &ort, &Tolerance::default()).unwrap();
    show("gemmlowp", &l);
    let i = l
        .first_departure
        .expect("gemmlowp departs from onnxruntime");
    let first = &l.values[i];
    match first.metric {
        DiffMetric::Integer {
            differing, max_lsb, ..
        } => assert!(differing > 0 && max_lsb >= 1.0, "{first:?}"),
        ref m => panic!("first departure is not an integer value: {m:?}"),
    }
    assert!(
        first.op.as_deref().is_some_and(|op| op.contains("QLinear")),
        "{first:?}"
    );
    assert!(i > 0 && l.values[..i].iter().all(|v| !v.departs));
    // tolerating the largest difference seen moves the first departure on
    // (or removes it), never earlier
    let worst = l
        .values
        .iter()
        .filter_map(|v| match v.metric {
            DiffMetric::Integer { max_lsb, .. } => Some(max_lsb),
            DiffMetric::Float { .. } => None,
        })
        .fold(0.0, f64::max);
    let loose = Tolerance {
        lsb: worst as u64,
        ..Tolerance::default()
    };
    let l2 = localize(&gemm, &ort, &loose).unwrap();
    assert!(
        l2.first_departure.is_none_or(|j| j > i),
        "{:?}",
        l2.first_departure
    );
}
