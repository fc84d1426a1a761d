use super::*;

fn t(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_vec(shape.to_vec(), v.to_vec()).unwrap()
}

#[test]
fn float_outputs_get_every_statistic() {
    let mut spec = OutputSpec::new("scores", &[2, 3]);
    spec.step = Some(0.5);
    let mut acc = OutputAcc::new(spec);
    // row 0 agrees on top-1 (index 1), row 1 does not (2 vs 0)
    let r = t(&[2, 3], &[0.0, 2.0, 1.0, 1.0, 0.0, 1.5]);
    let q = t(&[2, 3], &[0.0, 2.0, 1.4, 1.6, 0.0, 1.5]);
    let d = acc.add(&r, &q, &[]).unwrap().unwrap();
    assert_eq!((d.rows, d.rows_agree), (2, 1));
    assert!(!d.top1_agrees());
    assert_eq!(d.within_steps, 5); // 0.4 within 0.5, 0.6 not
    acc.add(&r, &r, &[]).unwrap();
    let s = acc.finish();
    assert_eq!(s.kind, OutputKind::Float);
    assert_eq!((s.samples, s.bit_identical), (2, 1));
    assert_eq!(s.cosine_min, Some(d.cosine));
    assert!((s.cosine_mean.unwrap() - (1.0 + d.cosine) / 2.0).abs() < 1e-15);
    let signal = 2.0 * (4.0 + 1.0 + 1.0 + 2.25);
    let noise = 0.4f64.powi(2) + 0.6f64.powi(2);
    let want = 10.0 * (signal / noise).log10();
    assert!((s.sqnr_db.unwrap() - want).abs() < 1e-5, "{:?}", s.sqnr_db);
    assert!((s.max_abs_diff.unwrap() - 0.6).abs() < 1e-6);
    let w = s.within_steps.unwrap();
    assert_eq!((w.steps, w.step), (1, 0.5));
    assert!((w.share - 11.0 / 12.0).abs() < 1e-12);
    let top = s.top1.unwrap();
    assert_eq!((top.axis, top.rows, top.agree), (1, 4, 3));
    assert_eq!(top.rate, 0.75);
}

#[test]
fn identical_outputs_have_no_sqnr_and_no_axis_means_no_top1() {
    let mut acc = OutputAcc::new(OutputSpec::new("boxes", &[1, 4, 5]));
    let r = t(&[1, 4, 5], &[1.0; 20]);
    acc.add(&r, &r, &[]).unwrap();
    let s = acc.finish();
    assert_eq!(s.sqnr_db, None);
    assert_eq!(s.cosine_mean, Some(1.0));
    assert_eq!(s.top1, None);
    assert_eq!(s.within_steps, None);
    // a zero reference against noise is a very low, finite SQNR
    assert!(sqnr_db(0.0, 1.0).unwrap() < -1000.0);
}

#[test]
fn top1_is_taken_along_the_stated_axis() {
    // [1, 3, 2] along axis 1: two rows of three
    let spec = OutputSpec {
        name: "x".into(),
        argmax_axis: Some(1),
        step: None,
    };
    let r = [0.0, 5.0, 1.0, 0.0, 2.0, 0.0];
    let q = [0.0, 5.0, 1.0, 3.0, 2.0, 0.0];
    let d = compare_float(&r, &q, &[1, 3, 2], &spec);
    // row (.,0) = [0,1,2] argmax 2 in both; row (.,1) = [5,0,0] vs [5,3,0]: 0 both
    assert_eq!((d.rows, d.rows_agree), (2, 2));
    let q = [9.0, 5.0, 1.0, 0.0, 2.0, 0.0];
    let d = compare_float(&r, &q, &[1, 3, 2], &spec);
    assert_eq!((d.rows, d.rows_agree), (2, 1));
}

#[test]
fn pass_through_and_integer_outputs_are_not_compared() {
    let ids = Tensor::from_vec(vec![1, 4], vec![101i64, 7, 9, 102]).unwrap();
    let inputs = vec![("input_ids".to_string(), ids.clone())];
    let mut acc = OutputAcc::new(OutputSpec::new("ids_out", &[1, 4]));
    assert_eq!(acc.add(&ids, &ids, &inputs).unwrap(), None);
    let s = acc.finish();
    assert_eq!(s.kind, OutputKind::PassThrough);
    assert_eq!(s.passes_input.as_deref(), Some("input_ids"));
    assert!(!s.is_compared());
    assert_eq!((s.cosine_mean, s.max_abs_diff, s.top1), (None, None, None));

    // an integer output that is not an input
    let a = Tensor::from_vec(vec![3], vec![1i64, 5, 9]).unwrap();
    let b = Tensor::from_vec(vec![3], vec![1i64, 7, 9]).unwrap();
    let mut acc = OutputAcc::new(OutputSpec::new("idx", &[3]));
    acc.add(&a, &b, &inputs).unwrap();
    let s = acc.finish();
    assert_eq!(s.kind, OutputKind::Integer);
    assert_eq!((s.bit_identical, s.max_abs_diff), (0, Some(2.0)));
    assert_eq!(s.cosine_mean, None);

    // a float output equal to its input on one sample only is compared
    let x = t(&[1, 2], &[1.0, 2.0]);
    let y = t(&[1, 2], &[3.0, 2.0]);
    let mut acc = OutputAcc::new(OutputSpec::new("f", &[1, 2]));
    acc.add(&x, &x, &[("x".to_string(), x.clone())]).unwrap();
    acc.add(&y, &y, &[("x".to_string(), x.clone())]).unwrap();
    assert_eq!(acc.finish().kind, OutputKind::Float);
    // equal to the input under the reference only: compared
    let mut acc = OutputAcc::new(OutputSpec::new("f", &[1, 2]));
    acc.add(&x, &y, &[("x".to_string(), x.clone())]).unwrap();
    assert_eq!(acc.finish().kind, OutputKind::Float);
}

#[test]
fn mismatched_runs_are_an_error() {
    let mut acc = OutputAcc::new(OutputSpec::new("y", &[2]));
    let e = acc
        .add(&t(&[2], &[1.0, 2.0]), &t(&[1, 2], &[1.0, 2.0]), &[])
        .unwrap_err();
    assert!(e.contains("'y'"), "{e}");
}

#[test]
fn bit_identity_and_non_finite_values() {
    assert!(!bit_identical(&t(&[1], &[0.0]), &t(&[1], &[-0.0])));
    assert!(bit_identical(&t(&[1], &[f32::NAN]), &t(&[1], &[f32::NAN])));
    assert!(!bit_identical(&t(&[1], &[1.0]), &t(&[1, 1], &[1.0])));
    assert_eq!(non_finite(&t(&[2], &[1.0, 2.0])), None);
    let v = non_finite(&t(&[3], &[f32::INFINITY, 1.0, f32::NAN])).unwrap();
    assert_eq!((v.index, v.nan, v.what()), (2, true, "NaN"));
    let v = non_finite(&t(&[2], &[1.0, f32::NEG_INFINITY])).unwrap();
    assert_eq!((v.index, v.nan), (1, false));
    let h = Tensor::from_vec(vec![1], vec![half::f16::INFINITY]).unwrap();
    assert!(non_finite(&h).is_some());
    let i = Tensor::from_vec(vec![1], vec![i64::MAX]).unwrap();
    assert_eq!(non_finite(&i), None);
}

#[test]
fn selection_and_axes() {
    let all: Vec<String> = ["boxes", "scores", "ids"].map(String::from).to_vec();
    assert_eq!(
        select_outputs(&all, &["ids,boxes".into()]).unwrap(),
        vec![0, 2]
    );
    assert_eq!(
        select_outputs(&all, &["scores".into(), "boxes".into()]).unwrap(),
        vec![0, 1]
    );
    assert!(select_outputs(&all, &["boxes,nope".into()])
        .unwrap_err()
        .contains("'nope'"));
    assert_eq!(resolve_axis(-1, "s", &[1, 8, 840]), Ok(2));
    assert_eq!(resolve_axis(1, "s", &[1, 8, 840]), Ok(1));
    assert!(resolve_axis(3, "s", &[1, 8, 840])
        .unwrap_err()
        .contains("rank 3"));
    assert!(resolve_axis(-4, "s", &[1, 8, 840]).is_err());
}

#[test]
fn thresholds_fail_per_output() {
    let good = OutputStats {
        name: "a".into(),
        kind: OutputKind::Float,
        passes_input: None,
        dtype: "float32".into(),
        shape: vec![1, 2],
        samples: 1,
        bit_identical: 0,
        cosine_mean: Some(0.999),
        cosine_min: Some(0.999),
        sqnr_db: Some(30.0),
        max_abs_diff: Some(0.1),
        within_steps: None,
        top1: None,
    };
    let bad = OutputStats {
        name: "b".into(),
        cosine_mean: Some(0.5),
        sqnr_db: Some(3.0),
        ..good.clone()
    };
    let pass = OutputStats {
        name: "p".into(),
        kind: OutputKind::PassThrough,
        cosine_mean: None,
        sqnr_db: None,
        ..good.clone()
    };
    let outs = vec![good.clone(), bad, pass];
    assert_eq!(
        Thresholds::default().check([("x".to_string(), &outs[..])]),
        None
    );
    let th = Thresholds {
        min_cosine: Some(0.99),
        min_sqnr: Some(20.0),
    };
    let c = th.check([("int8 vs fp32".to_string(), &outs[..])]).unwrap();
    assert!(!c.passed);
    let names: Vec<(&str, &str)> = c
        .failing
        .iter()
        .map(|f| (f.output.as_str(), f.metric))
        .collect();
    assert_eq!(names, [("b", "cosine"), ("b", "sqnr_db")]);
    assert!(c.failing[0].to_string().contains("below --min-cosine 0.99"));
    let ok = th.check([("x".to_string(), &outs[..1])]).unwrap();
    assert!(ok.passed);
    let w = low_cosine_warnings("int8 vs fp32", &outs);
    assert_eq!(w.len(), 1);
    assert!(w[0].contains("'b'") && w[0].contains("0.5000"), "{w:?}");
}

#[test]
fn choices_give_specs() {
    let outs = vec![
        ("boxes".to_string(), t(&[1, 4, 3], &[0.0; 12])),
        ("logits".to_string(), t(&[1, 3], &[0.0; 3])),
    ];
    let step = |n: &str| (n == "logits").then_some(0.5);
    let all = OutputChoice::default().specs(&outs, step).unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!((all[0].1.argmax_axis, all[0].1.step), (None, None));
    assert_eq!((all[1].1.argmax_axis, all[1].1.step), (Some(1), Some(0.5)));
    let c = OutputChoice {
        names: vec!["boxes".into()],
        argmax_axis: Some("-2".parse().unwrap()),
    };
    let one = c.specs(&outs, step).unwrap();
    assert_eq!((one[0].0, one[0].1.argmax_axis), (0, Some(1)));
    let none = OutputChoice {
        names: vec![],
        argmax_axis: Some("none".parse().unwrap()),
    };
    assert!(none
        .specs(&outs, step)
        .unwrap()
        .iter()
        .all(|(_, s)| s.argmax_axis.is_none()));
    let bad = OutputChoice {
        names: vec![],
        argmax_axis: Some(ArgmaxAxis::Axis(2)),
    };
    assert!(bad
        .specs(&outs, step)
        .unwrap_err()
        .contains("'logits' has rank 2"));
    assert!("x".parse::<ArgmaxAxis>().is_err());
}

#[test]
fn accumulators_of_consecutive_samples_merge_exactly() {
    // twelve samples of a [2, 5] output with a step, pseudo-random values
    let mut x = 0x2545_f491u32;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        (x % 20_000) as f32 / 997.0 - 10.0
    };
    let samples: Vec<(Tensor, Tensor)> = (0..12)
        .map(|k| {
            let r: Vec<f32> = (0..10).map(|_| next()).collect();
            // every third sample identical; the others perturbed
            let q: Vec<f32> = if k % 3 == 0 {
                r.clone()
            } else {
                r.iter().map(|v| v + next() * 0.05).collect()
            };
            (t(&[2, 5], &r), t(&[2, 5], &q))
        })
        .collect();
    let mut spec = OutputSpec::new("scores", &[2, 5]);
    spec.step = Some(0.1);
    let acc = |part: &[(Tensor, Tensor)]| {
        let mut a = OutputAcc::new(spec.clone());
        for (r, q) in part {
            a.add(r, q, &[]).unwrap();
        }
        a
    };
    let whole = acc(&samples).finish();
    assert_eq!((whole.samples, whole.bit_identical), (12, 4));
    for cuts in [vec![0, 12], vec![5, 12], vec![1, 7, 12], vec![4, 4, 9, 12]] {
        let mut merged = OutputAcc::new(spec.clone());
        let mut from = 0;
        for &to in &cuts {
            // through JSON, as a shard carries it
            let part = acc(&samples[from..to]);
            let json = serde_json::to_string(&part).unwrap();
            let part: OutputAcc = serde_json::from_str(&json).unwrap();
            merged.merge(&part).unwrap();
            from = to;
        }
        let m = merged.finish();
        assert_eq!(m, whole, "cuts {cuts:?}");
        assert_eq!(
            m.cosine_mean.unwrap().to_bits(),
            whole.cosine_mean.unwrap().to_bits()
        );
    }
    // another output, or another shape, does not merge
    let mut other = OutputAcc::new(OutputSpec::new("boxes", &[2, 5]));
    assert!(other
        .merge(&acc(&samples[..2]))
        .unwrap_err()
        .contains("compared as"));
    let mut a = acc(&samples[..2]);
    let mut b = OutputAcc::new(spec.clone());
    b.add(&t(&[1, 10], &[0.0; 10]), &t(&[1, 10], &[0.0; 10]), &[])
        .unwrap();
    assert!(a.merge(&b).unwrap_err().contains("in the other"));
}
