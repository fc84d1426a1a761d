//! Unit tests of the report model on hand-made values; the report of a
//! real study is tested in `crates/qport-tests/tests/study_report.rs`.

use super::*;
use qport_quant::ptq::PrecisionMix;

fn inputs() -> Inputs {
    Inputs {
        model: FileJson {
            path: "m<1>.onnx".into(),
            size_bytes: 10,
            sha256: "aa".into(),
        },
        data: DataRef {
            path: "d".into(),
            samples: 4,
            sha256: "bb".into(),
        },
        eval: None,
        seeds: vec![Seed {
            name: "s".into(),
            value: 7,
        }],
    }
}

#[test]
fn an_empty_study_says_so() {
    let r = StudyReport::new(
        Header::new(vec!["qport".into()]),
        inputs(),
        Sections::default(),
    );
    assert!(r.verdict.claims.is_empty() && r.verdict.timing.claims.is_empty());
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["sections"], serde_json::json!({}));
    let html = render_html(&r);
    assert!(html.contains("No stage of this study produced a finding."));
    assert!(html.contains("<h1>qport study: m&lt;1&gt;.onnx</h1>"));
    assert_eq!(
        html.matches("<section id=").count(),
        2,
        "verdict and claim map"
    );
    assert!(!html.contains("<svg"));
    assert!(render_human(&r).contains("(no findings)"));
}

#[test]
fn provenance_takes_the_study_facts() {
    let mut h = Header::new(vec!["qport".into(), "study".into()]);
    h.git_commit = Some("abc".into());
    let p = Provenance::new(&h, &inputs(), vec!["qport".into(), "agree".into()])
        .with_profiles(&[qport_core::arith::ArithProfile::preset("gemmlowp").unwrap()])
        .with_artifacts(&["agree.json"]);
    assert_eq!(p.git_commit.as_deref(), Some("abc"));
    assert_eq!(
        (p.model_sha256.as_str(), p.data_sha256.as_str()),
        ("aa", "bb")
    );
    assert_eq!(p.seeds, inputs().seeds);
    assert_eq!(p.profiles[0].name, "gemmlowp");
    // the hash is over the definition: another profile hashes otherwise
    let other = Definition::profile(&qport_core::arith::ArithProfile::preset("exact").unwrap());
    assert_eq!(p.profiles[0].sha256.len(), 64);
    assert_ne!(p.profiles[0].sha256, other.sha256);
    assert_eq!(p.artifacts, ["agree.json"]);
}

#[test]
fn mac_shares_follow_the_mix() {
    let mut m = PrecisionMix::default();
    m.macs.insert("int8".into(), 300);
    m.macs.insert("int16".into(), 100);
    let s = PrecisionShare::from(&m);
    assert_eq!(s.mac_share["int8"], 0.75);
    assert_eq!(s.mac_share["int16"], 0.25);
    // no MACs: no shares rather than NaN
    let s = PrecisionShare::from(&PrecisionMix::default());
    assert!(s.mac_share.is_empty());
}

#[test]
fn samples_hash_covers_names_shapes_and_values() {
    use qport_core::Tensor;
    let sample = |name: &str, v: Vec<f32>| qport_data::Sample {
        index: 0,
        origin: "x".into(),
        inputs: vec![(name.into(), Tensor::from_vec(vec![1, v.len()], v).unwrap())],
    };
    let a = samples_sha256([&sample("x", vec![1.0, 2.0])]);
    assert_eq!(a, samples_sha256([&sample("x", vec![1.0, 2.0])]));
    assert_ne!(a, samples_sha256([&sample("y", vec![1.0, 2.0])]));
    assert_ne!(a, samples_sha256([&sample("x", vec![1.0, 2.5])]));
    assert_ne!(
        a,
        samples_sha256([&sample("x", vec![1.0, 2.0]), &sample("x", vec![1.0, 2.0])])
    );
}

#[test]
fn severities_order_and_convert() {
    assert!(Severity::Info < Severity::Warning && Severity::Warning < Severity::Error);
    assert_eq!(
        Severity::from(qport_platform::Severity::Error),
        Severity::Error
    );
    assert_eq!(
        serde_json::to_string(&Severity::Warning).unwrap(),
        "\"warning\""
    );
}
