//! The agreement study in shards (`qport_study::agree::shard`) on
//! onnxruntime's QDQ u8s8 EfficientNet-Lite0 (the fixture) and photo
//! crops: four shards of six samples (sizes 1, 2, 1, 2), each carried
//! through its JSON form, with `--repeat` ending inside a shard and chunks
//! smaller than a shard, merge into exactly the unsharded study's result;
//! a shard given the wrong number of samples is an input error.

use qport_core::arith::ArithProfile;
use qport_data::Sample;
use qport_study::agree::{merge, AgreeOptions, AgreeStudy, PartialAgreement, Shard};
use qport_study::StudyError;
use qport_tests::fixture;

fn study() -> AgreeStudy {
    let qdq = qport_onnx::load(fixture("models/efficientnet-lite0.qdq-u8s8.onnx")).unwrap();
    let fp32 = qport_onnx::load(fixture("models/efficientnet-lite0.onnx")).unwrap();
    let profiles: Vec<ArithProfile> = ["f32-rne", "avx2-u8s8"]
        .iter()
        .map(|n| ArithProfile::preset(n).unwrap())
        .collect();
    let options = AgreeOptions {
        threads: 2,
        chunk: 2,
        repeat: Some(3),
    };
    AgreeStudy::new(&qdq, &fp32, &profiles, options).unwrap()
}

#[test]
fn four_shards_merge_into_the_unsharded_result() {
    let samples: Vec<Sample> = qport_tests::photo_crops("eval", 6);
    let total = samples.len();
    let s = study();
    let want = s.run(samples.iter().cloned().map(Ok), &mut |_| {}).unwrap();
    assert_eq!(want.selves[0].n, 3);
    let mut parts: Vec<PartialAgreement> = (0..4)
        .map(|i| {
            let shard = Shard::new(i, 4).unwrap();
            let mine = samples[shard.range(total)].iter().cloned().map(Ok);
            let part = s.run_shard(shard, total, mine, &mut |_| {}).unwrap();
            assert_eq!(part.n(), shard.range(total).len());
            let json = serde_json::to_string(&part).unwrap();
            serde_json::from_str(&json).unwrap()
        })
        .collect();
    parts.swap(0, 3);
    let merged = merge(parts).unwrap();
    assert_eq!(merged.agreement, want);
    // bit for bit, also where the sums are
    for (a, b) in merged.agreement.vs_fp32.iter().zip(&want.vs_fp32) {
        let (x, y) = (&a.outputs[0], &b.outputs[0]);
        assert_eq!(
            x.cosine_mean.map(f64::to_bits),
            y.cosine_mean.map(f64::to_bits)
        );
        assert_eq!(x.sqnr_db.map(f64::to_bits), y.sqnr_db.map(f64::to_bits));
    }

    // a shard given samples that are not its share
    let shard = Shard::new(1, 4).unwrap();
    let e = s
        .run_shard(
            shard,
            total,
            samples[..1].iter().cloned().map(Ok),
            &mut |_| {},
        )
        .unwrap_err();
    assert!(
        matches!(&e, StudyError::Input(m) if m.contains("holds samples 1..3")),
        "{e}"
    );
}
