//! The agreement study on a real artifact: onnxruntime's QDQ u8s8
//! EfficientNet-Lite0 (the fixture) on photo crops under three profiles.
//! Each profile against its own second run must be bit-identical, the FP32
//! controls must agree on top-1 (and the two SIMD runs bit for bit), and
//! the results must not depend on the thread count or the chunking.

use qport_core::arith::ArithProfile;
use qport_core::compare::OutputKind;
use qport_core::{DType, Tensor};
use qport_data::Sample;
use qport_engine::EngineError;
use qport_onnx::Model;
use qport_study::agree::{AgreeOptions, AgreeStudy, Agreement};
use qport_study::StudyError;
use qport_tests::fixture;

fn models() -> (Model, Model) {
    let qdq = qport_onnx::load(fixture("models/efficientnet-lite0.qdq-u8s8.onnx")).unwrap();
    let fp32 = qport_onnx::load(fixture("models/efficientnet-lite0.onnx")).unwrap();
    (qdq, fp32)
}

fn profiles(names: &[&str]) -> Vec<ArithProfile> {
    names
        .iter()
        .map(|n| ArithProfile::preset(n).unwrap())
        .collect()
}

fn study(threads: usize, chunk: usize, samples: &[Sample]) -> Agreement {
    let (qdq, fp32) = models();
    let s = AgreeStudy::new(
        &qdq,
        &fp32,
        &profiles(&["f32-rne", "avx2-u8s8", "gemmlowp"]),
        AgreeOptions {
            threads,
            chunk,
            repeat: None,
        },
    )
    .unwrap();
    let mut calls = vec![];
    let a = s
        .run(samples.iter().cloned().map(Ok), &mut |n| calls.push(n))
        .unwrap();
    assert_eq!(calls, (1..=samples.len()).collect::<Vec<_>>());
    a
}

#[test]
fn self_agreement_is_bit_identical_and_fp32_is_invariant() {
    let samples = qport_tests::photo_crops("eval", 5);
    let t = std::time::Instant::now();
    let a = study(2, 8, &samples);
    eprintln!("study: {:.1} s", t.elapsed().as_secs_f64());
    let n = samples.len();
    assert_eq!(a.n(), n);
    assert_eq!(a.outputs.len(), 1);
    let o = &a.outputs[0];
    assert_eq!((o.name.as_str(), &o.shape[..]), ("logits", &[1, 1000][..]));
    assert_eq!((o.kind, o.argmax_axis), (OutputKind::Float, Some(1)));
    assert_eq!(a.profiles, ["f32-rne", "avx2-u8s8", "gemmlowp"]);
    for p in &a.selves {
        assert_eq!(
            (p.top1_agree, p.bit_identical),
            (Some(n), n),
            "{} vs itself",
            p.a
        );
        let o = &p.outputs[0];
        assert_eq!(
            (o.cosine_min, o.max_abs_diff, o.sqnr_db),
            (Some(1.0), Some(0.0), None)
        );
        assert!(p.flips.is_empty() && p.margin_auc.is_none());
    }
    for p in &a.fp32_controls {
        assert_eq!(p.top1_agree, Some(n), "{} vs {}", p.a, p.b);
        let c = p.outputs[0].cosine_min.unwrap();
        assert!(c > 0.99999, "{} vs {}: {c}", p.a, p.b);
    }
    // the same plan on one thread and on two: bit for bit
    let two = &a.fp32_controls[1];
    assert_eq!((two.a.as_str(), two.b.as_str()), ("fp32", "fp32-2threads"));
    assert_eq!(two.bit_identical, n);
    // pairs are consistent with the per-sample records
    assert_eq!(a.pairs.len(), 3);
    for p in &a.pairs {
        let i = a.profiles.iter().position(|x| *x == p.a).unwrap();
        let j = a.profiles.iter().position(|x| *x == p.b).unwrap();
        let flips: Vec<usize> = a
            .samples
            .iter()
            .enumerate()
            .filter(|(_, r)| r.top1[i] != r.top1[j])
            .map(|(k, _)| k)
            .collect();
        assert_eq!(p.flips.iter().map(|f| f.index).collect::<Vec<_>>(), flips);
        assert_eq!(p.top1_agree.unwrap() + flips.len(), n);
        let o = &p.outputs[0];
        let (cmin, cmean) = (o.cosine_min.unwrap(), o.cosine_mean.unwrap());
        assert!(cmin <= cmean && cmean <= 1.0 + 1e-12);
        let top1 = o.top1.unwrap();
        assert_eq!((top1.rows, top1.agree), (n, n - flips.len()));
        assert!((0.0..=1.0).contains(&top1.top5_overlap));
        for f in &p.flips {
            assert_eq!(f.margin, a.samples[f.index].fp32_margin);
        }
    }
    let m = a.top1_matrix().unwrap();
    for (i, row) in m.iter().enumerate() {
        assert_eq!(row[i], n);
        for (j, &k) in row.iter().enumerate() {
            assert_eq!(k, m[j][i]);
        }
    }
    // FP32 margins are top-1 minus top-2, never negative
    assert!(a.samples.iter().all(|r| r.fp32_margin >= 0.0));
    assert!(a.vs_fp32.iter().all(|p| p.b == "fp32" && p.n == n));

    // one worker thread, chunks of 3: the same result
    let mut b = study(1, 3, &samples);
    assert_eq!(b.threads, 1);
    b.threads = a.threads;
    assert_eq!(a, b);
}

#[test]
fn bad_requests_and_bad_samples_are_named() {
    let (qdq, fp32) = models();
    let one = profiles(&["f32-rne"]);
    // a float model is not an artifact
    let e = AgreeStudy::new(&fp32, &fp32, &one, AgreeOptions::default()).err();
    assert!(
        matches!(
            e,
            Some(StudyError::Engine(EngineError::NotQuantized { .. }))
        ),
        "{e:?}"
    );
    let twice = profiles(&["f32-rne", "f32-rne"]);
    let e = AgreeStudy::new(&qdq, &fp32, &twice, AgreeOptions::default()).err();
    assert!(e.unwrap().to_string().contains("`f32-rne` is listed twice"));
    assert!(AgreeStudy::new(&qdq, &fp32, &[], AgreeOptions::default()).is_err());

    let s = AgreeStudy::new(&qdq, &fp32, &one, AgreeOptions::default()).unwrap();
    // no samples
    let e = s.run(std::iter::empty(), &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("no samples"), "{e}");
    // a sample of the wrong shape is named
    let small = Sample {
        index: 0,
        origin: "tiny.npy".into(),
        inputs: vec![(
            "input".into(),
            Tensor::zeros(DType::F32, vec![1, 3, 8, 8]).unwrap(),
        )],
    };
    match s.run([Ok(small)], &mut |_| {}) {
        Err(StudyError::Sample { sample, source }) => {
            assert_eq!(sample, "tiny.npy");
            assert!(matches!(source, EngineError::InputShape { .. }), "{source}");
        }
        other => panic!("{other:?}"),
    }
}
