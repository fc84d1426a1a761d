use super::*;
use qport_core::{DType, Tensor};
use qport_onnx::graph::ModelBuilder;
use qport_onnx::Model;

#[test]
fn names_escape_and_round_trip() {
    for (name, stem) in [
        ("conv1", "conv1"),
        ("a/b:0", "a%2Fb%3A0"),
        ("50%", "50%25"),
        (".hidden", "%2Ehidden"),
        ("x.y_z-1", "x.y_z-1"),
        ("ü", "%C3%BC"),
        ("a b", "a%20b"),
    ] {
        assert_eq!(escape_value_name(name), stem);
        assert_eq!(unescape_value_name(stem).as_deref(), Some(name));
    }
    assert_eq!(unescape_value_name("a%2fb").as_deref(), Some("a/b"));
    for bad in ["a%2", "a%zz", ".x", "a b", "%FF"] {
        assert_eq!(unescape_value_name(bad), None, "{bad}");
    }
}

/// x (f32) → QuantizeLinear → q (u8) → Reshape → r → DequantizeLinear → y.
fn qdq_model() -> Model {
    ModelBuilder::new(13)
        .input("x", DType::F32, &[1, 4])
        .initializer("s", Tensor::scalar(0.5f32))
        .initializer("z", Tensor::scalar(3u8))
        .initializer("shape", Tensor::from_vec(vec![2], vec![2i64, 2]).unwrap())
        .op("QuantizeLinear", ["x", "s", "z"], ["q/0"])
        .op("Reshape", ["q/0", "shape"], ["r"])
        .op("DequantizeLinear", ["r", "s", "z"], ["y"])
        .output("y", DType::F32, &[2, 2])
        .build()
}

fn meta() -> DumpMeta {
    DumpMeta {
        model_path: "m.onnx".into(),
        model_sha256: "00".into(),
        profile: "fp32".into(),
    }
}

fn dump(dir: &std::path::Path, filter: &[String]) -> DumpSummary {
    let model = qdq_model();
    let plan =
        qport_engine::Plan::with_options(&model, qport_engine::PlanOptions::unfused()).unwrap();
    let mut w = DumpWriter::create(dir, meta(), &model, filter).unwrap();
    let x = Tensor::from_vec(vec![1, 4], vec![0.0f32, 1.0, -1.0, 2.0]).unwrap();
    run_dumped(&plan, vec![("x".into(), x)], &mut w).unwrap();
    w.finish().unwrap()
}

#[test]
fn writes_every_value_in_order_with_quant_and_reads_back() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let s = dump(&dir, &[]);
    let names: Vec<&str> = s.index.values.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["x", "q/0", "r", "y"]);
    let index = DumpIndex::read(&dir).unwrap();
    assert_eq!(index, s.index);
    let q = index.get("q/0").unwrap();
    assert_eq!(q.file, "q%2F0.npy");
    assert_eq!(
        (q.producer.as_deref(), q.op.as_deref()),
        (Some("QuantizeLinear_q/0"), Some("QuantizeLinear"))
    );
    let p = q.quant.clone().unwrap();
    assert_eq!((p.scale, p.zero_point, p.axis), (vec![0.5], vec![3], None));
    // propagated through the integer Reshape; none on float values
    assert_eq!(
        index.get("r").unwrap().quant.as_ref().unwrap().zero_point,
        [3]
    );
    assert!(index.get("x").unwrap().quant.is_none() && index.get("x").unwrap().producer.is_none());
    let r = index.load("r").unwrap();
    assert_eq!(r.shape(), [2, 2]);
    assert_eq!(r.as_slice::<u8>().unwrap(), [3, 5, 1, 7]);
    assert!(matches!(
        index.load("nope"),
        Err(DumpError::UnknownValue { .. })
    ));
    // a second dump into the same directory replaces the first
    let s2 = dump(&dir, &["q*".to_string(), "y".to_string()]);
    let names: Vec<&str> = s2.index.values.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["q/0", "y"]);
    assert!(!dir.join("r.npy").exists());
}

#[test]
fn reader_errors_name_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let e = DumpIndex::read(&dir).unwrap_err().to_string();
    assert!(e.contains("index.json") && e.contains("no index"), "{e}");
    dump(&dir, &[]);
    let index = DumpIndex::read(&dir).unwrap();
    qport_data::npy::write(
        &dir.join("r.npy"),
        &Tensor::zeros(DType::U8, vec![4]).unwrap(),
    )
    .unwrap();
    let e = index.load("r").unwrap_err().to_string();
    assert!(
        e.contains("r.npy") && e.contains("shape: expected [2, 2], found [4]"),
        "{e}"
    );
    qport_data::npy::write(
        &dir.join("y.npy"),
        &Tensor::zeros(DType::F64, vec![2, 2]).unwrap(),
    )
    .unwrap();
    let e = index.load("y").unwrap_err().to_string();
    assert!(
        e.contains("y.npy") && e.contains("expected float32, found float64"),
        "{e}"
    );
    std::fs::remove_file(dir.join("x.npy")).unwrap();
    let e = index.load("x").unwrap_err().to_string();
    assert!(e.contains("x.npy") && e.contains("missing"), "{e}");
    // a non-empty directory that is not a dump is refused
    let other = tmp.path().join("o");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("keep.txt"), "x").unwrap();
    let e = DumpWriter::create(&other, meta(), &qdq_model(), &[])
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("not empty"), "{e}");
    assert!(other.join("keep.txt").exists());
}

#[test]
fn localize_names_the_first_departing_value() {
    let tmp = tempfile::tempdir().unwrap();
    let ours = tmp.path().join("ours");
    let s = dump(&ours, &[]);
    // a target without an index, one integer value off by 2 LSB, an extra file
    let theirs = tmp.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    for v in &s.index.values {
        let mut t = s.index.load(&v.name).unwrap();
        if v.name == "r" {
            t.as_mut_slice::<u8>().unwrap()[1] += 2;
        }
        if v.name == "y" {
            t.as_mut_slice::<f32>().unwrap()[0] += 1.0;
        }
        qport_data::npy::write(&theirs.join(value_file_name(&v.name)), &t).unwrap();
    }
    std::fs::remove_file(theirs.join("x.npy")).unwrap();
    qport_data::npy::write(&theirs.join("inner%2Fvalue.npy"), &Tensor::scalar(1.0f32)).unwrap();
    let target = TargetDump::open(&theirs).unwrap();
    let l = localize(&s.index, &target, &Tolerance::default()).unwrap();
    assert_eq!(l.missing_in_target, ["x"]);
    assert_eq!(l.target_only, ["inner/value"]);
    let first = l.first().unwrap();
    assert_eq!(first.name, "r");
    assert_eq!(
        first.metric,
        DiffMetric::Integer {
            elements: 4,
            differing: 1,
            max_lsb: 2.0
        }
    );
    assert!(!l.values[0].departs && l.values[2].departs);
    match l.values[2].metric {
        DiffMetric::Float {
            max_abs, cosine, ..
        } => assert!(max_abs == 1.0 && cosine < 1.0),
        ref m => panic!("{m:?}"),
    }
    // two LSB tolerated: the float output is the first to depart
    let tol = Tolerance {
        lsb: 2,
        ..Tolerance::default()
    };
    assert_eq!(
        localize(&s.index, &target, &tol)
            .unwrap()
            .first()
            .unwrap()
            .name,
        "y"
    );
    // against itself nothing departs
    let l = localize(
        &s.index,
        &TargetDump::open(&ours).unwrap(),
        &Tolerance::default(),
    )
    .unwrap();
    assert!(l.first().is_none() && l.missing_in_target.is_empty() && l.values.len() == 4);
    // a target value of the wrong dtype is an error naming the file
    qport_data::npy::write(
        &theirs.join("r.npy"),
        &Tensor::zeros(DType::I8, vec![2, 2]).unwrap(),
    )
    .unwrap();
    let e = localize(&s.index, &target, &Tolerance::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("r.npy") && e.contains("expected uint8, found int8"),
        "{e}"
    );
}
